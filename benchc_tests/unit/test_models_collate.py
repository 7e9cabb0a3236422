"""Letter-variant resolution and the length-grouping collator (no model needed)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from benchc.models.base import Backend, BatchOutput, Query
from benchc.models.collate import Collator, concat_outputs, plan_batches, score
from benchc.models.letters import letter_variants, require_letters, resolve_letters


def _word_tokenizer(words: list[str]) -> PreTrainedTokenizerFast:
    vocab = {"<unk>": 0, **{w: i + 1 for i, w in enumerate(words)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")


@pytest.fixture(scope="module")
def tiny_tokenizer():
    from transformers import AutoTokenizer

    from benchc_tests.unit.test_models_hf import tiny_model_dir

    return AutoTokenizer.from_pretrained(tiny_model_dir())


def test_letter_variants_collects_bare_space_and_sentencepiece_spellings() -> None:
    tok = _word_tokenizer(["A", "▁A", "B", "AB", "a"])
    ids = letter_variants(tok, "A")
    vocab = tok.get_vocab()
    assert set(ids) >= {vocab["A"]}
    assert vocab["AB"] not in ids and vocab["a"] not in ids
    assert letter_variants(tok, "C") == ()  # unknown letters do not resolve to <unk>


def test_letter_variants_byte_level_bpe_finds_both_forms(tiny_tokenizer) -> None:
    ids = letter_variants(tiny_tokenizer, "A")
    decoded = {tiny_tokenizer.decode([i]) for i in ids}
    assert decoded == {"A", " A"}


def test_require_letters_names_missing_letter() -> None:
    tok = _word_tokenizer(["A", "B", "C"])
    table = resolve_letters(tok)
    require_letters(table, 3)  # A-C are fine
    with pytest.raises(ValueError, match=r"sample 'q1'.*4 options.*letter\(s\) D"):
        require_letters(table, 4, what="sample 'q1'")


@given(
    keys=st.lists(st.integers(0, 4), min_size=1, max_size=40),
    batch_size=st.integers(1, 8),
    mix=st.booleans(),
)
def test_plan_batches_is_a_partition_with_equal_keys_first(keys, batch_size, mix) -> None:
    plan = plan_batches(keys, batch_size, mix_lengths=mix)
    flat = [i for b in plan for i in b]
    assert sorted(flat) == list(range(len(keys)))
    assert all(1 <= len(b) <= batch_size for b in plan)
    # Only batches holding leftovers may mix keys, so mixed batches number at most
    # ceil(distinct keys / batch_size) and never exist without mix_lengths.
    mixed = [b for b in plan if len({keys[i] for i in b}) > 1]
    assert not mixed if not mix else len(mixed) <= len(set(keys))
    # Every key with at least batch_size members fills a whole batch on its own.
    for key in set(keys):
        if keys.count(key) >= batch_size:
            assert any(len(b) == batch_size and {keys[i] for i in b} == {key} for b in plan)


def test_plan_batches_longest_first_and_rejects_bad_size() -> None:
    assert plan_batches([1, 3, 2, 3], 2) == [[1, 3], [2, 0]]
    with pytest.raises(ValueError, match="batch_size"):
        plan_batches([1], 0)


class _EchoBackend(Backend):
    """Option logits encode the query's position marker, so order mistakes are visible."""

    fingerprint = "echo"
    name = "echo"

    def __init__(self) -> None:
        self.batches: list[int] = []

    def length_key(self, query: Query) -> tuple[int, ...]:
        return (len(query.question),)

    def forward(self, queries, *, distribution=False, top_k=None) -> BatchOutput:
        self.batches.append(len(queries))
        k_max = max(len(q.options) for q in queries)
        logits = np.full((len(queries), k_max), np.nan, np.float32)
        for i, q in enumerate(queries):
            logits[i, : len(q.options)] = float(q.question.count("x"))
        return BatchOutput(logits, np.ones(len(queries), np.float32))


def test_score_restores_input_order_and_pads_option_width() -> None:
    img = np.zeros((32, 32, 3), np.uint8)
    queries = [Query(img, "x" * n + "?" * (n % 3), tuple("abcd"[: 2 + n % 3])) for n in range(11)]
    backend = _EchoBackend()
    out = score(backend, queries, batch_size=4)
    assert out.option_logits.shape == (11, 4)
    for n, q in enumerate(queries):
        assert np.all(out.option_logits[n, : len(q.options)] == n)
        assert np.all(np.isnan(out.option_logits[n, len(q.options) :]))
    assert sum(backend.batches) == 11


def test_collator_restore_checks_count_and_concat_checks_fields() -> None:
    img = np.zeros((32, 32, 3), np.uint8)
    c = Collator([Query(img, "q", ("a", "b"))] * 3, lambda q: (0,), 2)
    with pytest.raises(ValueError, match="expected 2 batch outputs"):
        c.restore([])
    a = BatchOutput(np.zeros((1, 2), np.float32), np.ones(1, np.float32))
    b = BatchOutput(
        np.zeros((1, 2), np.float32), np.ones(1, np.float32), top_ids=np.zeros((1, 3), np.int64)
    )
    with pytest.raises(ValueError, match="top_ids"):
        concat_outputs([a, b])


def test_concat_pads_a_batch_that_sampled_no_query():
    """The openai backend sets letter counts only in batches with a sampled query; a chunk of
    several batches (the suite's) still concatenates: -1 counts, 0 unparsed elsewhere."""
    logits = np.zeros((2, 4), np.float32)
    plain = BatchOutput(logits, np.ones(2, np.float32))
    sampled = BatchOutput(
        logits[:1], np.ones(1, np.float32), letter_counts=np.array([[1, 2, 0, 0]]),
        n_unparsed=np.array([3]),
    )  # fmt: skip
    out = concat_outputs([plain, sampled])
    np.testing.assert_array_equal(out.letter_counts, [[-1] * 4, [-1] * 4, [1, 2, 0, 0]])
    np.testing.assert_array_equal(out.n_unparsed, [0, 0, 3])
    assert concat_outputs([plain, plain]).letter_counts is None
