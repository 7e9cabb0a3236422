"""Deterministic CPU training of the tiny LLaVA on the embedded synthetic question families.

Why the extra machinery (measured, see ``shared/notes/tiny-vlm.md``): the answer-letter loss alone
leaves the vision tower untrained (its gradients are ~1e-5), so training-only auxiliary heads read
the projector outputs (per-token shape and colour of the grid cell under the token, per-image
kind, count and kind-specific value) and the LM's answer-position state (the answer's content).
They are never saved. Options are first shown in a fixed canonical order, then in the
generator's balanced order, so the LM learns content before letter matching.

The prompt is exactly what the Hugging Face backend sends: the chat template applied to a user
turn holding the image and ``benchc.spec.format_question(question, options)``, with the generation
prompt; the target is the bare letter followed by ``<|im_end|>``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import nn
from torch.nn import functional as F

from benchc.data import synthetic
from benchc.spec import LETTERS, format_question
from benchc.tinyvlm.checkpoint import (
    FULL,
    MINIATURE,
    TinyVLMConfig,
    letter_token_ids,
    make_components,
    save,
)

#: Seeds of the training stream are ``TRAIN_SEED_BASE + seed * 10**6 + step``; held-out
#: evaluation uses :data:`EVAL_SEED`, which no training step reaches.
TRAIN_SEED_BASE = 10_000_000
EVAL_SEED = 424_242

# kind-specific "value" classes of the per-image head (-100 = no label)
_N_WORDS, _N_NUMBERS, _N_CHART = len(synthetic.WORDS), len(synthetic.NUMBERS), 10
_VALUE_OFFSETS = {
    "text_word": 0,
    "text_number": _N_WORDS,
    "chart": _N_WORDS + _N_NUMBERS,
    "size": _N_WORDS + _N_NUMBERS + _N_CHART,
}
N_VALUE_CLASSES = _N_WORDS + _N_NUMBERS + _N_CHART + len(synthetic.COLOURS)


@dataclass(frozen=True)
class TrainConfig:
    """Training schedule. ``steps`` batches of ``batch`` fresh samples; no sample is repeated."""

    steps: int = 2400
    batch: int = 64
    fixed_order_frac: float = 0.15
    lr: float = 2e-3
    min_lr_frac: float = 0.05
    warmup: int = 100
    weight_decay: float = 0.01
    #: Every ``alt_size_every``-th batch is drawn at another size and resized by the processor,
    #: so testbed images of any size look familiar after preprocessing.
    alt_size_every: int = 4
    alt_sizes: tuple[int, ...] = (96, 160, 256)
    checkpoint_every: int = 200
    log_every: int = 25
    eval_n: int = 240
    #: Weight of the option-line heads (is this option correct; which letter is this line), read
    #: at the newline ending each option line; 0 disables them.
    option_weight: float = 1.0


TRAIN_FULL = TrainConfig()
TRAIN_MINIATURE = replace(
    TRAIN_FULL,
    steps=4,
    batch=8,
    warmup=1,
    checkpoint_every=2,
    log_every=1,
    eval_n=12,
    option_weight=1.0,
)
TRAIN_PRESETS = {
    "full": TRAIN_FULL,
    "miniature": TRAIN_MINIATURE,
    "full-v1": replace(TRAIN_FULL, steps=3000, option_weight=0.0),
}


class AuxHeads(nn.Module):
    """Training-only heads: per-token cell shape/colour, attention-pooled image facts, answer."""

    def __init__(self, d: int, n_tokens: int, option_heads: bool = False) -> None:
        super().__init__()
        self.n_side = math.isqrt(n_tokens)
        self.shape = nn.Linear(d, len(synthetic.SHAPES) + 1)
        self.colour = nn.Linear(d, len(synthetic.COLOURS) + 1)
        self.query = nn.Parameter(torch.randn(3, d) * 0.02)
        self.kind = nn.Linear(d, len(synthetic.KINDS))
        self.count = nn.Linear(d, 10)
        self.value = nn.Linear(d, N_VALUE_CLASSES)
        self.answer = nn.Linear(d, len(synthetic.ANSWER_VOCAB))
        if option_heads:
            self.option_correct = nn.Linear(d, 1)
            self.option_letter = nn.Linear(d, 4)
            self.question_answer = nn.Linear(d, len(synthetic.ANSWER_VOCAB))
        side = self.n_side
        grid = synthetic.GRID
        rows = torch.arange(side).repeat_interleave(side) * grid // side
        cols = torch.arange(side).repeat(side) * grid // side
        self.register_buffer("cell_of_token", rows * grid + cols, persistent=False)

    def forward(
        self,
        tokens: torch.Tensor,
        answer_state: torch.Tensor,
        labels: dict,
        line_states: torch.Tensor | None = None,
        option_weight: float = 0.0,
    ) -> dict:
        """Losses from image tokens (B, T, d), the LM state at the answer position (B, d) and,
        when ``option_weight`` > 0, the LM states at the ends of the question line and of the 4
        option lines (B, 5, d): the answer content is due at the question's end (binding the
        named shape to the image), each option line says whether it is the answer."""
        cell = self.cell_of_token
        shape_t = labels["cell_shape"].flatten(1)[:, cell]
        colour_t = labels["cell_colour"].flatten(1)[:, cell]
        att = torch.softmax(tokens @ self.query.T / math.sqrt(tokens.shape[-1]), dim=1)
        pooled = torch.einsum("btq,btd->bqd", att, tokens)
        losses = {
            "shape": F.cross_entropy(self.shape(tokens).flatten(0, 1), shape_t.flatten()),
            "colour": F.cross_entropy(self.colour(tokens).flatten(0, 1), colour_t.flatten()),
            "kind": 0.2 * F.cross_entropy(self.kind(pooled[:, 0]), labels["kind"]),
            "count": 0.5 * F.cross_entropy(self.count(pooled[:, 1]), labels["count"]),
            "value": F.cross_entropy(self.value(pooled[:, 2]), labels["value"], ignore_index=-100),
            "answer": 0.5 * F.cross_entropy(self.answer(answer_state), labels["answer_vocab"]),
        }
        if line_states is not None and option_weight > 0:
            option_states = line_states[:, 1:]
            b = option_states.shape[0]
            target = F.one_hot(labels["answer_letter"], 4).float()
            which = torch.arange(4).expand(b, 4)
            losses["option"] = option_weight * (
                F.binary_cross_entropy_with_logits(
                    self.option_correct(option_states).squeeze(-1), target
                )
                + 0.2
                * F.cross_entropy(self.option_letter(option_states).flatten(0, 1), which.flatten())
                + 0.5
                * F.cross_entropy(self.question_answer(line_states[:, 0]), labels["answer_vocab"])
            )
        return losses


def value_labels(arr: synthetic.Arrays) -> np.ndarray:
    """Per-image value class that the image alone determines (-100 where the question decides)."""
    out = np.full(len(arr.kind), -100, np.int64)
    for i, (k, v, q) in enumerate(zip(arr.kind, arr.value, arr.questions, strict=True)):
        kind = synthetic.KINDS[k]
        if kind == "text":
            out[i] = _VALUE_OFFSETS["text_word" if "word" in q else "text_number"] + v
        elif kind == "chart":
            out[i] = _VALUE_OFFSETS["chart"] + v - 1
        elif kind == "size":
            out[i] = _VALUE_OFFSETS["size"] + v
    return out


def canonical_order(arr: synthetic.Arrays) -> tuple[list[tuple[str, ...]], np.ndarray]:
    """Options sorted by answer-vocabulary index (the fixed-order curriculum) and new answers."""
    options, answers = [], np.empty(len(arr.answer), np.int64)
    for i, ids in enumerate(arr.option_ids):
        order = np.argsort(ids, kind="stable")
        options.append(tuple(arr.options[i][j] for j in order))
        answers[i] = int(np.nonzero(order == arr.answer[i])[0][0])
    return options, answers


def user_messages(question: str, options: Sequence[str]) -> list[dict]:
    """The single user turn every backend sends: the image, then the formatted question."""
    return [
        {
            "role": "user",
            "content": [
                {"type": "image"},
                {"type": "text", "text": format_question(question, options)},
            ],
        }
    ]


def prompt_text(processor, question: str, options: Sequence[str]) -> str:
    """The backend's prompt: chat template + generation prompt (the answer comes next)."""
    return processor.apply_chat_template(
        user_messages(question, options), add_generation_prompt=True, tokenize=False
    )


def _pils(images: np.ndarray | Sequence[np.ndarray]) -> list[Image.Image]:
    return [Image.fromarray(np.asarray(im, dtype=np.uint8)) for im in images]


def pixel_values(processor, images: np.ndarray | Sequence[np.ndarray]) -> torch.Tensor:
    """The image processor's output, computed directly (its PIL pipeline costs ~40% of a
    training step): bicubic PIL resize to the square input size when needed, rescale, normalise.
    Bit-identical to ``processor.image_processor`` (checked in the unit tests)."""
    ip = processor.image_processor
    h, w = ip.size["height"], ip.size["width"]
    out = np.empty((len(images), h, w, 3), np.float64)
    for i, im in enumerate(images):
        im = np.asarray(im, dtype=np.uint8)
        if im.shape[:2] != (h, w):
            im = np.asarray(Image.fromarray(im).resize((w, h), Image.Resampling(ip.resample)))
        out[i] = im
    mean = np.asarray(ip.image_mean, np.float32)
    std = np.asarray(ip.image_std, np.float32)
    # same arithmetic as transformers' rescale (in float64, then float32) and normalize (float32)
    out = (out * ip.rescale_factor).astype(np.float32)
    out = (out - mean) / std
    return torch.from_numpy(np.ascontiguousarray(out.transpose(0, 3, 1, 2)))


def fast_inputs(processor, config: TinyVLMConfig, images, texts: Sequence[str]) -> dict:
    """What ``processor(images=..., text=..., padding=True)`` returns, without its overhead."""
    image_token = processor.image_token
    expanded = [t.replace(image_token, image_token * config.image_seq_length) for t in texts]
    enc = processor.tokenizer(expanded, return_tensors="pt", padding=True)
    return {
        "input_ids": enc["input_ids"],
        "attention_mask": enc["attention_mask"],
        "pixel_values": pixel_values(processor, images),
    }


class Trainer:
    """Owns model, heads and optimiser; ``step(t)`` is a pure function of the state and ``t``."""

    def __init__(self, config: TinyVLMConfig, train: TrainConfig, seed: int) -> None:
        self.config, self.train_cfg, self.seed = config, train, seed
        self.processor, self.model = make_components(config, seed)
        self.tokenizer = self.processor.tokenizer
        self.letter_ids = [ids[0] for ids in letter_token_ids(self.tokenizer)]  # bare "A".."Z"
        self.eos_id = self.tokenizer.eos_token_id
        self.image_id = self.model.config.image_token_id
        (self.nl_id,) = self.tokenizer.encode("\n", add_special_tokens=False)
        torch.manual_seed(seed + 1)
        self.heads = AuxHeads(
            config.text_hidden, config.image_seq_length, option_heads=train.option_weight > 0
        )
        params = list(self.model.parameters()) + list(self.heads.parameters())
        self.opt = torch.optim.AdamW(
            params, lr=train.lr, weight_decay=train.weight_decay, betas=(0.9, 0.98)
        )
        self._tokens: torch.Tensor | None = None
        self.model.model.multi_modal_projector.register_forward_hook(self._grab)
        self.gen_size = max(synthetic.MIN_SIZE, config.image_size)

    def _grab(self, _module, _inputs, output) -> None:
        self._tokens = output

    def lr_at(self, t: int) -> float:
        c = self.train_cfg
        if t < c.warmup:
            return c.lr * (t + 1) / c.warmup
        frac = (t - c.warmup) / max(1, c.steps - c.warmup)
        return c.lr * (c.min_lr_frac + (1 - c.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * frac)))

    def batch(self, t: int) -> tuple[dict, dict]:
        """Model inputs and labels of step ``t`` (fresh synthetic samples, deterministic in t)."""
        c = self.train_cfg
        size = self.gen_size
        if c.alt_size_every and t % c.alt_size_every == c.alt_size_every - 1:
            size = c.alt_sizes[(t // c.alt_size_every) % len(c.alt_sizes)]
        data_seed = TRAIN_SEED_BASE + self.seed * 10**6 + t
        arr = synthetic.generate_arrays(c.batch, data_seed, size)
        if t < c.fixed_order_frac * c.steps:
            options, answers = canonical_order(arr)
        else:
            options, answers = arr.options, arr.answer
        texts = [
            prompt_text(self.processor, q, o) + LETTERS[a] + self.tokenizer.eos_token
            for q, o, a in zip(arr.questions, options, answers, strict=True)
        ]
        inputs = fast_inputs(self.processor, self.config, arr.images, texts)
        answer_vocab = arr.option_ids[np.arange(len(arr.answer)), arr.answer]
        labels = {
            "letter": torch.tensor([self.letter_ids[a] for a in answers]),
            "cell_shape": torch.from_numpy(arr.cell_shape.astype(np.int64)),
            "cell_colour": torch.from_numpy(arr.cell_colour.astype(np.int64)),
            "kind": torch.from_numpy(arr.kind),
            "count": torch.from_numpy(np.clip(arr.count, 0, 9)),
            "value": torch.from_numpy(value_labels(arr)),
            "answer_vocab": torch.from_numpy(answer_vocab),
            "answer_letter": torch.from_numpy(np.asarray(answers, np.int64)),
            "option_pos": self.option_positions(inputs["input_ids"]),
        }
        return inputs, labels

    def option_positions(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, 5) positions of the newlines ending the question line and each option line
        (after the image the question's newline is the 2nd, the options' the 3rd..6th)."""
        out = torch.zeros((input_ids.shape[0], 5), dtype=torch.long)
        for r, row in enumerate(input_ids.tolist()):
            last_img = max(i for i, t in enumerate(row) if t == self.image_id)
            nls = [i for i, t in enumerate(row) if t == self.nl_id and i > last_img]
            out[r] = torch.tensor(nls[1:6])
        return out

    def step(self, t: int) -> dict[str, float]:
        inputs, labels = self.batch(t)
        self.model.train()
        for g in self.opt.param_groups:
            g["lr"] = self.lr_at(t)
        out = self.model(**inputs, logits_to_keep=3, output_hidden_states=True)
        logits = out.logits  # (B, 3, V): positions predicting letter, <|im_end|>, (next)
        losses = {
            "letter": F.cross_entropy(logits[:, 0], labels["letter"]),
            "eos": 0.2
            * F.cross_entropy(logits[:, 1], torch.full_like(labels["letter"], self.eos_id)),
        }
        last = out.hidden_states[-1]
        answer_state = last[:, -3]
        line_states = last[torch.arange(last.shape[0])[:, None], labels["option_pos"]]
        losses.update(
            self.heads(
                self._tokens, answer_state, labels, line_states, self.train_cfg.option_weight
            )
        )
        total = sum(losses.values())
        self.opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(
            list(self.model.parameters()) + list(self.heads.parameters()), 1.0
        )
        self.opt.step()
        acc = (logits[:, 0].argmax(-1) == labels["letter"]).float().mean()
        return {"loss": total.item(), "acc": acc.item(), **{k: v.item() for k, v in losses.items()}}

    def state(self, t: int, log: list) -> dict:
        return {
            "step": t,
            "model": self.model.state_dict(),
            "heads": self.heads.state_dict(),
            "opt": self.opt.state_dict(),
            "log": log,
        }

    def load(self, state: dict) -> tuple[int, list]:
        self.model.load_state_dict(state["model"])
        self.heads.load_state_dict(state["heads"])
        self.opt.load_state_dict(state["opt"])
        return state["step"], state["log"]


@torch.no_grad()
def letter_probs(
    model,
    processor,
    images: Sequence[np.ndarray],
    questions: Sequence[str],
    options: Sequence[Sequence[str]],
    *,
    batch: int = 64,
) -> np.ndarray:
    """Option probabilities (n, K_max; NaN beyond K) through the backend's exact prompt path."""
    model.eval()
    variants = letter_token_ids(processor.tokenizer)
    k_max = max(len(o) for o in options)
    out = np.full((len(images), k_max), np.nan, np.float32)
    for s in range(0, len(images), batch):
        sl = slice(s, s + batch)
        texts = [
            prompt_text(processor, q, o) for q, o in zip(questions[sl], options[sl], strict=True)
        ]
        inputs = processor(images=_pils(images[sl]), text=texts, return_tensors="pt", padding=True)
        last = model(**inputs, logits_to_keep=1).logits[:, -1].float()
        for r, opts in enumerate(options[sl]):
            k = len(opts)
            lg = torch.stack([torch.logsumexp(last[r, variants[j]], 0) for j in range(k)])
            out[s + r, :k] = torch.softmax(lg, 0).numpy()
    return out


def accuracy_by_kind(probs: np.ndarray, answers: np.ndarray, kinds: np.ndarray) -> dict[str, float]:
    """Overall and per-kind accuracy (argmax, ties to the lowest index)."""
    correct = np.nanargmax(probs, axis=1) == answers
    res = {"all": float(correct.mean())}
    for k, name in enumerate(synthetic.KINDS):
        m = kinds == k
        if m.any():
            res[name] = float(correct[m].mean())
    return res


def evaluate(
    model,
    processor,
    *,
    n: int = 600,
    seed: int = EVAL_SEED,
    size: int = 128,
    corruptions: Sequence[tuple[str, int]] = (),
) -> dict:
    """Held-out accuracy: clean (per kind), images shuffled across samples, and corrupted."""
    arr = synthetic.generate_arrays(n, seed, size)
    q, o, y = arr.questions, arr.options, arr.answer
    res = {"n": n, "seed": seed, "size": size}
    res["clean"] = accuracy_by_kind(letter_probs(model, processor, arr.images, q, o), y, arr.kind)
    perm = np.random.default_rng(seed).permutation(n)
    shuffled = letter_probs(model, processor, arr.images[perm], q, o)
    res["shuffled_images"] = accuracy_by_kind(shuffled, y, arr.kind)["all"]
    if corruptions:
        from benchc.corruptions import corrupt_array

        for name, sev in corruptions:
            imgs = np.stack(
                [
                    corrupt_array(im, name, sev, seed=0, sample_id=i)
                    for i, im in enumerate(arr.images)
                ]
            )
            res[f"{name}-{sev}"] = accuracy_by_kind(
                letter_probs(model, processor, imgs, q, o), y, arr.kind
            )["all"]
    return res


def _atomic_save(obj, path: Path) -> None:
    from benchc.fsutil import atomic_write

    atomic_write(path, lambda fh: torch.save(obj, fh))


def build_trained(
    out_dir: str | Path,
    seed: int = 0,
    *,
    config: TinyVLMConfig = FULL,
    train: TrainConfig | None = None,
    steps: int | None = None,
    work_dir: str | Path | None = None,
    log=print,
) -> Path:
    """Build and train the tiny VLM, save it (without heads) to ``out_dir``.

    With ``work_dir`` the run checkpoints every ``checkpoint_every`` steps and resumes from the
    last checkpoint, giving the same bytes as an uninterrupted run.
    """
    if train is None:
        train = TRAIN_MINIATURE if config == MINIATURE else TRAIN_FULL
    if steps is not None:
        train = replace(train, steps=steps)
    t_start = time.time()
    trainer = Trainer(config, train, seed)
    start, history = 0, []
    ckpt = Path(work_dir) / "state.pt" if work_dir else None
    if ckpt is not None:
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        if ckpt.exists():
            start, history = trainer.load(torch.load(ckpt, weights_only=False))
            log(f"resumed at step {start}")
    window: list[dict] = []
    for t in range(start, train.steps):
        window.append(trainer.step(t))
        if (t + 1) % train.log_every == 0 or t + 1 == train.steps:
            mean = {k: round(float(np.mean([w[k] for w in window])), 4) for k in window[0]}
            history.append({"step": t + 1, **mean})
            log(json.dumps({"step": t + 1, "s": round(time.time() - t_start, 1), **mean}))
            window = []
        if ckpt is not None and ((t + 1) % train.checkpoint_every == 0 or t + 1 == train.steps):
            _atomic_save(trainer.state(t + 1, history), ckpt)
    trainer.model.eval()
    held_out = evaluate(trainer.model, trainer.processor, n=train.eval_n, size=trainer.gen_size)
    log(json.dumps({"held_out": held_out}))
    extra = {"train": asdict(train), "seed": seed, "held_out_quick": held_out}
    save(Path(out_dir), trainer.model, trainer.processor, config, extra)
    return Path(out_dir)


__all__ = [
    "EVAL_SEED",
    "TRAIN_FULL",
    "TRAIN_MINIATURE",
    "TrainConfig",
    "build_trained",
    "evaluate",
    "letter_probs",
    "prompt_text",
    "user_messages",
]
