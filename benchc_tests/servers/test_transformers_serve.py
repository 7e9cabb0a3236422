"""benchc against ``transformers serve`` (a server it did not write), serving the embedded
tiny VLM: the same prompt as the white-box path, each capability gap that server has handled
(no log-probs, ``n`` ignored, ``top_k`` rejected with 422, temperature ignored unless its
generation config samples), and the whole suite end to end."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from benchc.data.images import prepare
from benchc.data.loaders import load_dataset
from benchc.fsutil import slug
from benchc.models.base import Query
from benchc.models.parse import parse_letter
from benchc.models.proxy import PATH_NO_LOGPROBS, SPIKE_MIN_QUERIES, OpenAIProxyBackend
from benchc_tests.unit.suite_project import make_suite_project
from benchc_tests.unit.test_models_hf import tiny_backend_cached

pytestmark = pytest.mark.servers

#: Makes ``transformers serve`` sample (it ignores temperature unless its generation config
#: sets ``do_sample``): every sampling parameter stated, no top-k cut.
SAMPLE = {"generation_config": json.dumps({"do_sample": True, "top_k": 0, "top_p": 1.0})}


@functools.lru_cache(maxsize=1)
def _testbed() -> tuple[Query, ...]:
    """Every sample of the embedded testbed at its native size, as the suite scores it."""
    ds = load_dataset("fixtures/testbed")
    return tuple(
        Query(prepare(s.image(), None), s.question, s.options, s.hint, id=s.id) for s in ds
    )


def _white_box(queries) -> np.ndarray:
    return tiny_backend_cached().forward(list(queries)).option_logits


def test_greedy_answers_equal_the_white_box_argmax_on_every_testbed_sample(
    transformers_serve,
) -> None:
    queries = _testbed()
    proxy = OpenAIProxyBackend(
        transformers_serve.model, transformers_serve.base_url, max_tokens=1, concurrency=4
    )
    replies = proxy._map(
        lambda q: {"text": proxy.complete(q, temperature=0.0)["choices"][0]["message"]["content"]},
        list(queries),
    )
    served = np.array(
        [parse_letter(r["text"], q.options) for r, q in zip(replies, queries, strict=True)]
    )
    white = np.nanargmax(_white_box(queries), axis=1)
    mismatched = [q.id for q, s, w in zip(queries, served, white, strict=True) if s != w]
    assert not mismatched, f"served greedy answer differs from the white-box argmax: {mismatched}"
    accuracy = float(np.mean(served == load_dataset("fixtures/testbed").answers))
    print(f"served greedy = white-box argmax on {len(queries)}/{len(queries)}; acc {accuracy:.3f}")
    assert accuracy > 0.5  # the trained model, not chance (0.25): the prompt reached it intact
    assert set(proxy.client.dropped) == {"top_k"}  # 422 "Unexpected fields": learnt once


def test_sampled_option_distribution_agrees_with_the_white_box_one(transformers_serve) -> None:
    """N = 20 replies for each of 24 testbed samples: the mean total-variation distance
    between each query's reply shares and its white-box option distribution lies within the
    99.9th percentile of the same statistic under multinomial sampling from the white-box p."""
    queries = list(_testbed()[:24])
    proxy = OpenAIProxyBackend(
        transformers_serve.model, transformers_serve.base_url,
        logprobs=False, n_samples=20, max_tokens=2, concurrency=2, extra_body=SAMPLE,
    )  # fmt: skip
    out = proxy.forward(queries)
    logits = _white_box(queries)
    counts = out.letter_counts
    observed, null = [], []
    rng = np.random.default_rng(0)
    for i, q in enumerate(queries):
        k = len(q.options)
        p = np.exp(logits[i, :k] - np.logaddexp.reduce(logits[i, :k]))
        n_valid = int(counts[i, :k].sum())
        assert n_valid >= 15, f"{q.id}: only {n_valid} of 20 replies named an option"
        observed.append(0.5 * np.abs(counts[i, :k] / n_valid - p).sum())
        sims = rng.multinomial(n_valid, p, size=4000) / n_valid
        null.append(0.5 * np.abs(sims - p).sum(axis=1))
    stat = float(np.mean(observed))
    bound = float(np.quantile(np.mean(null, axis=0), 0.999))
    print(f"mean TV {stat:.4f}, null 99.9th percentile {bound:.4f}")
    assert stat <= bound
    assert not proxy.not_sampling()
    assert proxy.path_counts == {"sampling (logprobs off)": 24}


def test_a_server_that_does_not_sample_is_reported(transformers_serve) -> None:
    """Its default generation config has no ``do_sample``: T = 1 with fresh seeds gives one
    answer per query, and the backend says so with the fix (and the fix works, above)."""
    queries = list(_testbed()[:SPIKE_MIN_QUERIES])
    proxy = OpenAIProxyBackend(
        transformers_serve.model, transformers_serve.base_url, n_samples=4, max_tokens=2
    )
    proxy.forward(queries)
    assert proxy.path_counts == {PATH_NO_LOGPROBS: SPIKE_MIN_QUERIES}
    assert proxy.capabilities.top_k == 0
    notes = "\n".join(proxy.notes())
    assert proxy.not_sampling() and "WARNING" in notes and "generation_config" in notes
    assert "at most 1 choice(s) per request" in notes  # n is ignored: one choice each


pytest_plugins = ["pytester"]


def test_the_suite_runs_end_to_end_over_transformers_serve(
    transformers_serve, pytester, tmp_path
) -> None:
    """Record, then check, a 12-sample x 2-cell suite over the real server: every gate is
    recorded and passes; the summary names each gap (no log-probs: sampling; ``n`` ignored;
    ``top_k`` rejected; VSI UNCHECKED, a failure under --strict-gates); the report reads it."""
    from benchc.cli import main
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate

    data = tmp_path / "twelve"
    save_jsonl(generate(12, 5), data)
    project = make_suite_project(pytester)
    extra = json.dumps(SAMPLE)
    args = [
        "suite",
        f"--model={transformers_serve.spec}",
        f"--model-args=concurrency=2,n_samples=6,max_tokens=2,extra_body={extra}",
        f"--dataset={data}",
        "--corruptions=gaussian_noise",
        "--severities=1,5",
        f"--results-dir={tmp_path / 'results'}",
        f"--cache-dir={tmp_path / 'cache'}",
        f"--thresholds-dir={tmp_path / 'thresholds'}",
        f"--report={tmp_path / 'report'}",
        "-p",
        "no:randomly",
    ]
    cases = 2 + 1 + 15  # two cells, the noise family, the model-level gates
    result = project.runpytest_inprocess(*args, "--snapshot-update")
    result.assert_outcomes(passed=cases, skipped=2)
    out = result.stdout.str()
    assert "Traceback" not in out and "WARNING" not in out
    for line in (
        # 12 samples x (clean + 2 cells), and 3 other option orders of clean and one cell
        "*queries scored 108 by sampling (server returned no logprobs)*",
        "*the server rejects top_k; left out of requests*",
        "*at most 1 choice(s) per request*",
        # one counted line per reason, not one per gate
        "    - 2 gates (gap: 1 vsi; insensitive_fraction: 1 vsi): VSI not applicable: *",
    ):
        result.stdout.fnmatch_lines([line])
    result = project.runpytest_inprocess(*args)
    result.assert_outcomes(passed=cases, skipped=2)
    result = project.runpytest_inprocess(*args, "--strict-gates")
    result.assert_outcomes(passed=cases, failed=2)
    doc = json.loads((tmp_path / "report" / "report.json").read_text())
    assert doc["series"][0]["vsi"] is None and doc["series"][0]["missing"]
    stored = next((tmp_path / "results" / slug(transformers_serve.model)).iterdir())
    assert main(["report", str(stored), "--baseline", str(tmp_path / "thresholds"),
                 "--out", str(tmp_path / "offline")]) == 0  # fmt: skip

    # Bench-C Table V against the real counterpart: the same samples and cells white-box,
    # compared with the server run (its sampling proxy of the same checkpoint)
    white = [
        "suite", f"--model={transformers_serve.model}", f"--dataset={data}",
        "--corruptions=gaussian_noise",
        "--severities=1,5", f"--results-dir={tmp_path / 'results-white'}",
        f"--cache-dir={tmp_path / 'cache'}", f"--thresholds-dir={tmp_path / 'thresholds-white'}",
        "-p", "no:randomly",
    ]  # fmt: skip
    project.runpytest_inprocess(*white, "--snapshot-update").assert_outcomes(passed=cases + 2)
    white_run = next((tmp_path / "results-white" / "tiny-vlm").glob("twelve-*"))
    assert main(["compare", str(white_run), str(stored), "--out", str(tmp_path / "cmp")]) == 0
    table_v = json.loads((tmp_path / "cmp" / "report.json").read_text())["agreement"]["table_v"]
    (pair,) = table_v["pairs"]
    assert pair["logit_access"] == "logits" and pair["n_shared"] == 12
    assert pair["logit_row"]["samples"] == pair["sampling_row"]["samples"] == "12×1×2"
    # the logit side is the white-box run's own figures; 6 sampled replies per query (the
    # server is not bit-deterministic) agree with its clean answers well above chance (0.25):
    # measured 0.75 (9/12)
    from benchc.results.reader import read_run

    own = read_run(white_run).grid
    assert pair["logit_row"]["acc_clean"] == pytest.approx(own.figure("acc_clean"))
    assert pair["top1_agreement"] >= 0.5
