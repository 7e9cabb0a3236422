"""The Hugging Face backend (:mod:`benchc.models.hf`), the processor and the prompt: the
chat-templated prompt of a query, its true input length, and the processor's tensors for a
batch (per-sample text tensors composed once per run, :mod:`benchc.models.text_side`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from benchc.data.images import is_prepared, prepare
from benchc.models.base import Query
from benchc.models.processors import process_batch, render_chat
from benchc.models.prompt import chat_messages
from benchc.models.text_side import TextSide
from benchc.spec import format_question

log = logging.getLogger("benchc.models.hf")

#: Processor outputs that are training targets, never model inputs for scoring.
_TRAINING_KEYS = frozenset({"labels"})


class HFPrompt:
    """:class:`~benchc.models.hf.HFBackend`'s prompts and processor inputs (a mixin: the
    backend holds the processor, tokenizer, chat template and the memos these fill)."""

    def user_text(self, query: Query) -> str:
        """The model-independent user-turn text (``benchc.spec.format_question``)."""
        return format_question(query.question, query.options, query.hint)

    def render(self, user_text: str) -> str:
        """The chat-templated prompt for one image + ``user_text``, generation prompt added."""
        return self.render_messages(chat_messages(user_text), **self._template_kwargs)

    def render_messages(self, messages: list[dict], **template_kwargs: Any) -> str:
        """The chat-templated prompt of ``messages`` as given, with exactly ``template_kwargs``
        (generation prompt added). The reference server renders requests through this, as real
        servers do: parts in the order they arrive, nothing rearranged."""
        return render_chat(self.processor, messages, add_generation_prompt=True, **template_kwargs)

    def length_key(self, query: Query) -> tuple[int, ...]:
        """``(tokens,)``: the query's true input length, prompt text plus the image tokens the
        processor expands the image into (which depend on the image's shape for Qwen-VL-style
        grids). Equal keys batch without padding whatever the image shapes; close keys pad
        little. Text and image counts are each computed once (per prompt, per image shape)."""
        prompt = self._prompt(self.user_text(query))
        return (self._n_text_tokens(prompt) + self._n_image_tokens(query.image.shape[:2]),)

    def processor_ms(self, side: int = 448) -> float:
        """Milliseconds the processor takes for one ``side``-px photo-shaped image (4:3)."""
        import time

        image = np.zeros((side * 3 // 4, side, 3), np.uint8)
        prompt = self.render("?")
        self._model_inputs([image], [prompt], device=False)  # warm up
        began = time.perf_counter()
        self._model_inputs([image], [prompt], device=False)
        return (time.perf_counter() - began) * 1000

    def _n_text_tokens(self, prompt: str) -> int:
        n = self._text_tokens.get(prompt)
        if n is None:
            bos = self.tokenizer.bos_token
            add_special = not (bos and prompt.startswith(bos))
            with self._tokenizer_lock:
                ids = self.tokenizer(prompt, add_special_tokens=add_special)["input_ids"]
            n = self._text_tokens[prompt] = len(ids)
        return n

    def _n_image_tokens(self, shape: tuple[int, ...]) -> int:
        """Tokens one image of ``shape`` (H, W, before resizing) adds to a prompt."""
        if self._image_shape_matters is None:
            self._image_shape_matters = self._probe_image_shape_matters()
        memo = tuple(shape) if self._image_shape_matters else (0, 0)
        n = self._image_tokens.get(memo)
        if n is None:
            h, w = shape if self._image_shape_matters else (336, 336)
            size = self._pil(np.zeros((max(h, 1), max(w, 1), 3), np.uint8)).size[::-1]
            prompt = self.render("?")
            total = self._model_inputs([np.zeros((*size, 3), np.uint8)], [prompt], device=False)
            n = total["input_ids"].shape[1] - self._n_text_tokens(prompt)
            self._image_tokens[memo] = n
        return n

    def _probe_image_shape_matters(self) -> bool:
        """Whether the processor's input length depends on image shape (e.g. Qwen-VL grids)."""
        prompt = self.render("?")
        lengths = {
            self._model_inputs([np.zeros((h, w, 3), np.uint8)], [prompt], device=False)[
                "input_ids"
            ].shape[1]
            for h, w in ((224, 448), (448, 224), (336, 336))
        }
        return len(lengths) > 1

    def _add_special(self, prompts: Sequence[str]) -> bool:
        bos = self.tokenizer.bos_token
        return not (bos and prompts[0].startswith(bos))

    def _model_inputs(
        self, images: Sequence[np.ndarray], prompts: Sequence[str], *, device: bool = True
    ) -> dict:
        """The processor's tensors for one batch (on the input device unless ``device=False``:
        then on the CPU, as the processor made them)."""
        pil = [[self._pil(img)] for img in images]
        add_special = self._add_special(prompts)

        def whole() -> dict:
            # A fast tokenizer is not safe across threads while its padding is set ("Already
            # borrowed"): the pipeline's planning and preparing threads take turns.
            # A processor may add training targets (PaliGemma: ``labels``); with them the model
            # computes a loss over the kept logits only, which fails. Scoring never needs them.
            with self._tokenizer_lock:
                return process_batch(self.processor, pil, prompts, add_special, _TRAINING_KEYS)

        def image_part() -> dict:
            return dict(self.processor.image_processor(images=pil, return_tensors="pt"))

        # Each sample's text tensors are made once per run (models/text_side.py).
        text_side = self._text_side()
        keys = [(p, im[0].height, im[0].width) for p, im in zip(prompts, pil, strict=True)]
        inputs = text_side.compose(keys, image_part, whole)
        if inputs is None:
            inputs = whole()
            text_side.record(keys, inputs)
        return self._device_inputs(inputs)[0] if device else inputs

    def _text_side(self) -> TextSide:
        """The per-sample text tensors of the current processor (a new processor, a new one)."""
        held = self._text_sides
        if held is not None and held[0] is self.processor:
            return held[1]
        side = TextSide(self.tokenizer.pad_token_id, self.tokenizer.padding_side)
        image_processor = getattr(self.processor, "image_processor", None)
        if image_processor is None:
            side.enabled = False
        else:
            probe = [[Image.new("RGB", (self.image_size or 64, self.image_size or 64))]]
            try:
                side.image_keys = frozenset(image_processor(images=probe, return_tensors="pt"))
            except Exception as err:  # composing is an optimisation: the processor still runs
                log.info("per-sample text tensors off: image processor alone fails (%s)", err)
                side.enabled = False
        self._text_sides = (self.processor, side)
        return side

    def _prompt(self, user_text: str) -> str:
        """:meth:`render`, once per distinct user text (the same prompts recur in every
        condition of a run)."""
        prompt = self._prompts.get(user_text)
        if prompt is None:
            prompt = self._prompts[user_text] = self.render(user_text)
        return prompt

    def _pil(self, image: np.ndarray) -> Image.Image:
        if self.image_size is not None and is_prepared(image, self.image_size):
            return Image.fromarray(image)  # the suite's images: skip two copies
        return Image.fromarray(prepare(image, self.image_size))
