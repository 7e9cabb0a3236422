"""The suite's input pipeline: batches built ahead in threads, across chunk and condition
boundaries, giving bit for bit the arrays of a plain loop; prepared images made once and kept
within a budget; batches planned by true token length."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import torch

from benchc import spec
from benchc.data import load_dataset, save_jsonl
from benchc.data.synthetic import generate
from benchc.models.base import Backend, BatchOutput, Query
from benchc.models.collate import plan_batches
from benchc.suite.config import DEFAULT_MODEL, SuiteConfig
from benchc.suite.run import SuiteRun
from benchc_tests.unit.test_models_hf import tiny_backend_cached

CONDITIONS = ["clean", "gaussian_noise-3", "brightness-2"]


class OffCPU(Backend):
    """The tiny HF backend as if it ran on a device: the suite pipelines around it. Records
    which thread prepared each batch and how many batches were prepared before each ran."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.fingerprint, self.name = inner.fingerprint, inner.name
        self.batch_size, self.capabilities = inner.batch_size, inner.capabilities
        self.prepared_in: list[str] = []
        self.ahead_at_run: list[int] = []
        #: The chunks under way ahead when each batch ran (set ``watch`` to a SuiteRun).
        self.watch: SuiteRun | None = None
        self.pending_at_run: list[list] = []
        self._lock = threading.Lock()

    @property
    def local_cpu(self) -> bool:
        return False

    def length_key(self, query: Query) -> tuple[int, ...]:
        return self.inner.length_key(query)

    def prepare(self, queries: Sequence[Query]):
        batch = self.inner.prepare(queries)
        with self._lock:
            self.prepared_in.append(threading.current_thread().name)
        return batch

    def forward_prepared(self, batch, **kwargs) -> BatchOutput:
        with self._lock:
            self.ahead_at_run.append(len(self.prepared_in))
            if self.watch is not None:
                self.pending_at_run.append(self.watch.lookahead.pending())
        return self.inner.forward_prepared(batch, **kwargs)

    def forward(self, queries, **kwargs) -> BatchOutput:
        return self.inner.forward(queries, **kwargs)

    def vision_features(self, images):
        return self.inner.vision_features(images)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pipeline")
    save_jsonl(generate(20, 11), root / "data")
    return root / "data"


def _run(data_dir: Path, root: Path, backend: Backend, label: str) -> SuiteRun:
    cfg = SuiteConfig(
        model=DEFAULT_MODEL,
        dataset=str(data_dir),
        image_size=64,
        batch_size=2,  # chunks of 8 rows: three chunks per condition
        results_dir=root / f"results-{label}",
        cache_dir=root / "cache",
    )
    return SuiteRun(cfg, load_dataset(cfg.dataset), backend)


def test_pipelined_run_equals_the_plain_loop_across_conditions(data_dir, tmp_path) -> None:
    inner = tiny_backend_cached()
    plain = _run(data_dir, tmp_path, inner, "plain")
    assert not plain.pipelined
    expected = {k: plain.condition(k) for k in CONDITIONS}

    remote = OffCPU(inner)
    run = _run(data_dir, tmp_path, remote, "pipelined")
    remote.watch = run
    assert run.pipelined and run.chunk_rows == 8
    run.start_prefetch(CONDITIONS)  # the planned order (no corruption pool: 1 worker)
    assert run.lookahead.pending() == [(CONDITIONS[0], 0, 8)]  # built while the session sets up
    got = {}
    for i, key in enumerate(CONDITIONS):
        got[key] = run.condition(key)
        if i + 1 < len(CONDITIONS):  # the next condition's first chunk is under way already
            assert run.lookahead.pending() == [(CONDITIONS[i + 1], 0, 8)]
    run.stop_prefetch()
    for key in CONDITIONS:
        for name in ("option_logits", "option_mass"):
            np.testing.assert_array_equal(got[key][name], expected[key][name])
    # every batch, the very first included (scheduled by start_prefetch), was prepared in the
    # pipeline's threads, ahead of its turn
    threads = remote.prepared_in
    assert all(t.startswith("benchc-prepare") for t in threads), threads
    assert len(threads) == len(remote.ahead_at_run) == 3 * 10
    # while a condition's last chunk (rows 16-20: batches 8-9 of 10) ran, the next condition's
    # first chunk was being built: the device does not wait at condition boundaries
    for i in range(len(CONDITIONS) - 1):
        for batch in (10 * i + 8, 10 * i + 9):
            assert (CONDITIONS[i + 1], 0, 8) in remote.pending_at_run[batch], (i, batch)
    # when the last batch of a chunk ran, the next chunk's batches had been started
    assert any(ahead > run_i + 1 for run_i, ahead in enumerate(remote.ahead_at_run))
    assert run.scored_queries == 60 and "60 queries" in run.notes()[0]
    assert "pipelined" in run.notes()[0]


def test_vsi_inputs_made_ahead_give_the_plain_loops_arrays(data_dir, tmp_path) -> None:
    from benchc.suite import run as run_module
    from benchc.suite.vsi import vsi_arrays

    inner = tiny_backend_cached()
    expected = vsi_arrays(_run(data_dir, tmp_path, inner, "vsi-plain"))
    run = _run(data_dir, tmp_path, OffCPU(inner), "vsi-pipelined")
    made_in: list[str] = []
    real = run_module.SuiteRun._vsi_inputs

    def spy(self, start, stop):
        made_in.append(threading.current_thread().name)
        return real(self, start, stop)

    run._vsi_inputs = spy.__get__(run)  # type: ignore[method-assign]
    got = vsi_arrays(run)
    assert sorted(got) == sorted(expected)
    for name, array in expected.items():
        np.testing.assert_array_equal(got[name], array, err_msg=name)
    assert made_in[0] == threading.current_thread().name
    assert len(made_in) == 3 and all(t.startswith("benchc-vsi-ahead") for t in made_in[1:])
    assert run._vsi_ahead == {}


def test_vsi_takes_the_probe_features_from_its_own_passes(data_dir, tmp_path, monkeypatch):
    """The clean and blurred passes hand over their tower's pooled output: the same features,
    bit for bit, as encoding the images a second time (``vision_features``), which never runs."""
    from benchc.suite.vsi import vsi_arrays

    inner = tiny_backend_cached()
    # OffCPU's forward takes no ``features``: the probe's features are encoded again
    encoded_again = vsi_arrays(_run(data_dir, tmp_path, OffCPU(inner), "vsi-encoded-again"))
    monkeypatch.setattr(
        type(inner), "vision_features", lambda self, images: pytest.fail("encoded again")
    )
    got = vsi_arrays(_run(data_dir, tmp_path, inner, "vsi-in-pass"))
    assert sorted(got) == sorted(encoded_again)
    for name, array in encoded_again.items():
        np.testing.assert_array_equal(got[name], array, err_msg=name)
    assert got["features_clean"].shape == (20, inner.model.config.vision_config.hidden_size)


def test_a_failed_build_ahead_surfaces_at_its_own_chunk(data_dir, tmp_path) -> None:
    remote = OffCPU(tiny_backend_cached())
    run = _run(data_dir, tmp_path, remote, "failing")
    real = remote.inner.prepare
    bad = run.dataset.ids[9]  # in the second chunk, prepared ahead

    def prepare(queries):
        if any(q.id == bad for q in queries):
            raise ValueError(f"processor failed on sample {bad!r}")
        return real(queries)

    remote.inner.prepare = prepare  # type: ignore[method-assign]
    try:
        with pytest.raises(ValueError, match=f"processor failed on sample {bad!r}"):
            run.condition("clean")
    finally:
        del remote.inner.prepare
    assert run.lookahead.pending() == []
    assert not run.store.has("clean") and len(run.store.load_parts("clean")) == 1


def test_each_original_is_decoded_once_and_kept_within_budget(data_dir, tmp_path) -> None:
    run = _run(data_dir, tmp_path, tiny_backend_cached(), "originals")
    decoded = []
    real = run.original
    run.original = lambda i: decoded.append(i) or real(i)  # type: ignore[method-assign]
    for key in CONDITIONS[:2]:
        run.condition(key)
    assert sorted(decoded) == list(range(20))  # once per sample, not once per condition
    one = run._originals[0].nbytes
    run._originals.budget = 3 * one
    run._originals._kept.clear()
    run._originals.bytes = 0
    for i in range(20):
        arr = run._originals[i]
        assert not arr.flags.writeable
    assert run._originals.bytes <= 3 * one and len(run._originals._kept) <= 3


def test_true_length_keys_pad_little_on_mixed_image_shapes(tmp_path) -> None:
    """A Qwen-VL processor: image tokens depend on the image's shape. Keys by true length
    batch different shapes of equal length together (no padding) and waste at most 5 % of the
    tokens to padding; a row's letter logits do not depend on its batch mates beyond rounding."""
    from benchc.models.hf import HFBackend
    from benchc.testing.dev.tiny_families import build

    folder = build("qwen2_5_vl", tmp_path / "qwen")
    backend = HFBackend(str(folder), batch_size=8, model_args={"max_pixels": 28 * 28 * 64})
    rng = np.random.default_rng(0)
    sides = [(224, 224), (224, 168), (168, 224), (224, 112), (112, 224), (196, 224), (168, 168)]
    queries = []
    for i in range(48):
        shape = sides[rng.integers(len(sides))]
        queries.append(
            Query(
                rng.integers(0, 255, (*shape, 3), dtype=np.uint8),
                f"Question {i}?" + " more" * int(rng.integers(4)),
                ("yes", "no", "maybe")[: 2 + int(rng.integers(2))],
                id=f"q{i}",
            )
        )
    keys = [backend.length_key(q) for q in queries]
    lengths = [k[0] for k in keys]
    for q, n in zip(queries[:6], lengths[:6], strict=True):
        prompt = backend.render(backend.user_text(q))
        assert backend._model_inputs([q.image], [prompt])["input_ids"].shape[1] == n
    new = padding_waste(lengths, plan_batches(keys, 8))
    # today's main keyed (text tokens, image shape): leftovers of one text length but very
    # different image sizes shared batches
    text = [backend._n_text_tokens(backend.render(backend.user_text(q))) for q in queries]
    old = [(t, *q.image.shape[:2]) for t, q in zip(text, queries, strict=True)]
    assert new <= 0.05 < padding_waste(lengths, plan_batches(old, 8))
    from benchc.models.collate import score

    one = score(backend, queries[:16], batch_size=1)
    grouped = score(backend, queries[:16], batch_size=8, mix_lengths=False)
    assert np.nanmax(np.abs(one.option_logits - grouped.option_logits)) <= 1e-5


def padding_waste(lengths: Sequence[int], plan: Sequence[Sequence[int]]) -> float:
    from benchc.models.collate import padding_waste as waste

    return waste(lengths, plan)


def test_true_length_keys_pad_little_on_the_embedded_testbed() -> None:
    from benchc.suite.config import DEFAULT_DATASET

    backend = tiny_backend_cached()
    dataset = load_dataset(DEFAULT_DATASET)
    queries = [Query(np.asarray(s.image()), s.question, s.options, s.hint, s.id) for s in dataset]
    keys = [backend.length_key(q) for q in queries]
    lengths = [k[0] for k in keys]
    assert len(set(lengths)) > 1  # the testbed does mix prompt lengths
    assert padding_waste(lengths, plan_batches(keys, backend.batch_size)) <= 0.05


@pytest.mark.slow
def test_processor_workers_give_the_same_inputs(tmp_path) -> None:
    """A tiling processor (SmolVLM) in worker processes: bit for bit the in-thread tensors, and
    an image-only processor survives the pickling to the workers."""
    import pickle

    from benchc.models.hf import HFBackend
    from benchc.testing.dev.tiny_families import build

    backend = HFBackend(str(build("smolvlm", tmp_path / "smol")))
    again = pickle.loads(pickle.dumps(backend.processor))
    assert type(again) is type(backend.processor) and again.image_only
    rng = np.random.default_rng(1)
    queries = [
        Query(rng.integers(0, 255, (64, 40 + 8 * i, 3), dtype=np.uint8), "Q?", ("a", "b"))
        for i in range(3)
    ]
    # a bf16 model, as on a GPU: the workers cast, the tensors are those cast here
    backend.dtype = torch.bfloat16
    expected = backend.prepare(queries).inputs
    assert expected["pixel_values"].dtype == torch.bfloat16
    backend.use_processor_workers(1)
    try:
        assert backend.processor_workers == 1
        got = backend.prepare(queries).inputs
    finally:
        backend.close()
    assert backend.processor_workers == 0
    assert sorted(got) == sorted(expected)
    for name, tensor in expected.items():
        assert got[name].dtype == tensor.dtype and torch.equal(got[name], tensor), name


def test_prepared_images_are_hashed_once_and_forgotten_with_them(monkeypatch) -> None:
    import gc

    from benchc.corruptions import batch, engine

    array = np.arange(64 * 48 * 3, dtype=np.uint8).reshape(64, 48, 3)
    expected = engine.content_hash(array)
    batch.remember_hash(array)
    assert not array.flags.writeable and id(array) in batch._HASHES
    monkeypatch.setattr(batch, "content_hash", lambda a: pytest.fail("hashed again"))
    assert batch.known_hash(array) == expected
    key = id(array)
    del array
    gc.collect()
    assert key not in batch._HASHES


def test_prepare_returns_a_kept_image_as_it_is_and_copies_a_writeable_one() -> None:
    from benchc.data.images import prepare

    array = (np.arange(96 * 64 * 3) % 251).astype(np.uint8).reshape(96, 64, 3)
    copied = prepare(array, 96)
    assert copied is not array and np.array_equal(copied, array)  # the caller may change it
    array.flags.writeable = False
    assert prepare(array, 96) is array  # a kept image: no copy, no re-hash
    assert prepare(array, None) is array
    assert prepare(array, 64).shape == (64, 43, 3)


@pytest.mark.slow
def test_device_check_runs_its_path_on_a_cpu() -> None:
    """benchmarks/device_check.sh with the 7B shape shrunk, on the CPU: the command a lent GPU
    runs, its arguments and its output lines."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        ["bash", str(root / "benchmarks" / "device_check.sh")],
        env={
            **__import__("os").environ,
            "DEVICE": "cpu",
            "EXTRA": "--shrink",
            "SAMPLES": "8",
            "BATCHES": "2",
        },
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "qwen2.5-vl-7b (shrunk) on cpu" in out
    assert "in sequence  busy" in out and "pipelined    busy" in out
    assert "batch   2:" in out


@pytest.mark.slow
def test_bench_pipeline_runs_both_paths_and_prints_their_ratios() -> None:
    """benchmarks/bench_pipeline.py on a miniature configuration: today's path (the reference
    commit, extracted) and the new one, repeated, each in its own process; its output lines."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "benchmarks"))
    try:
        from bench_pipeline import DEFAULT_REFERENCE
    finally:
        sys.path.remove(str(root / "benchmarks"))
    # a shallow clone lacks the reference commit: HEAD stands in for "today" (the script is
    # what is tested here, not the speed-up)
    known = subprocess.run(
        ["git", "-C", str(root), "cat-file", "-e", f"{DEFAULT_REFERENCE}^{{commit}}"],
        capture_output=True,
    )
    reference = DEFAULT_REFERENCE if known.returncode == 0 else "HEAD"
    args = ["--families=llava", "--samples=8", "--rate=400", "--photo-side=500", "--repeat=2"]
    args.append(f"--reference={reference}")
    done = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "bench_pipeline.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=root,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "== llava: 48 queries per path" in out
    for line in ("today  busy", "new    busy", "median of 2 runs", "new/today: busy x"):
        assert line in out, out
    assert "cache entries (any thread)" in out and "once per sample per run" in out


class SecondModel(OffCPU):
    """Another model on the same VSI set (its own fingerprint, so nothing stored is shared but
    the corruption cache); records the PNG bytes each query carries to a server."""

    def __init__(self, inner: Backend) -> None:
        super().__init__(inner)
        self.fingerprint, self.name = inner.fingerprint + "-second", inner.name + "-second"
        self.sent: list[Query] = []

    def forward(self, queries, **kwargs) -> BatchOutput:
        self.sent.extend(queries)
        return super().forward(queries, **kwargs)


def test_a_second_models_vsi_run_blurs_nothing(data_dir, tmp_path) -> None:
    """VSI blurs are content-addressed on the corruption cache: the first model's run blurs
    each image once (its region and whole-image blur share the pass), a second model's run on
    the same set reads every blurred image from the cache, bit for bit, and a server is sent the
    cache's PNG bytes of exactly the pixels the white-box path scores."""
    from benchc.corruptions import blur_calls
    from benchc.corruptions.cache import decode_rgb
    from benchc.suite.vsi import vsi_arrays

    inner = tiny_backend_cached()
    first = _run(data_dir, tmp_path, inner, "vsi-first")
    before = blur_calls()
    expected = vsi_arrays(first)
    assert blur_calls() - before == len(first.dataset) == 20
    inputs = first._vsi_inputs(0, 8)

    second_model = SecondModel(inner)
    second = _run(data_dir, tmp_path, second_model, "vsi-second")
    assert second.key != first.key
    before = blur_calls()
    got = vsi_arrays(second)
    assert blur_calls() - before == 0
    for name, array in expected.items():
        np.testing.assert_array_equal(got[name], array, err_msg=name)
    again = second._vsi_inputs(0, 8)
    assert blur_calls() - before == 0
    for a, b in zip(inputs.blurred + inputs.whole, again.blurred + again.whole, strict=True):
        np.testing.assert_array_equal(a, b)
    # the two blurred passes carried their cache files' bytes, the clean pass none
    assert sum(q.encoded is not None for q in second_model.sent) == 2 * 20
    for query in second_model.sent:
        if query.encoded is not None:
            np.testing.assert_array_equal(decode_rgb(query.encoded), query.image)


class FilesOnly(OffCPU):
    """A backend that reads only files (as a server backend): records what it was sent, and
    scores the pixels the files hold."""

    reads_files = True

    def __init__(self, inner: Backend) -> None:
        super().__init__(inner)
        self.fingerprint, self.name = inner.fingerprint + "-files", inner.name + "-files"
        self.sent: list[Query] = []

    def forward(self, queries, **kwargs) -> BatchOutput:
        self.sent.extend(queries)
        from dataclasses import replace

        return super().forward([replace(q, image=q.pixels()) for q in queries], **kwargs)

    def prepare(self, queries: Sequence[Query]):
        self.sent.extend(queries)
        from dataclasses import replace

        return super().prepare([replace(q, image=q.pixels()) for q in queries])

    def length_key(self, query: Query) -> tuple[int, ...]:
        from dataclasses import replace

        return self.inner.length_key(replace(query, image=query.pixels()))


def test_a_files_only_backend_gets_cache_files_undecoded_with_the_same_results(data_dir, tmp_path):
    from benchc.corruptions.cache import decode_rgb, pixel_crc

    inner = tiny_backend_cached()
    plain = _run(data_dir, tmp_path, inner, "decoded")
    expected = {k: plain.condition(k) for k in CONDITIONS}  # fills the cache
    files = FilesOnly(inner)
    run = _run(data_dir, tmp_path, files, "files-only")
    got = {k: run.condition(k) for k in CONDITIONS}
    run.stop_prefetch()
    for key in CONDITIONS:
        np.testing.assert_array_equal(got[key]["option_logits"], expected[key]["option_logits"])
    assert len(files.sent) == 3 * 20 and all(q.encoded is not None for q in files.sent)
    corrupted = [q for q in files.sent if q.image is None]
    assert len(corrupted) == 2 * 20  # corrupted conditions: files, never decoded
    for q in files.sent:
        assert q.pixel_crc == pixel_crc(decode_rgb(q.encoded))
    clean = [q for q in files.sent if q.image is not None]  # the clean condition's own pixels
    assert len(clean) == 20
    for q in clean:  # ... and their file on the cache, holding exactly those pixels
        np.testing.assert_array_equal(decode_rgb(q.encoded), q.image)


def test_a_files_only_backends_second_run_encodes_no_clean_image(data_dir, tmp_path, monkeypatch):
    """The clean images a server is sent are stored on the corruption cache by the first run
    (content-addressed by their pixels): another model's run reads them, encoding nothing."""
    from benchc.corruptions.cache import CorruptionCache

    encoded: list[tuple[int, ...]] = []
    plain_encode = CorruptionCache._encode

    def counting(array):
        encoded.append(array.shape)
        return plain_encode(array)

    monkeypatch.setattr(CorruptionCache, "_encode", staticmethod(counting))
    inner = tiny_backend_cached()
    first = _run(data_dir, tmp_path, FilesOnly(inner), "files-first")
    first.condition(spec.CLEAN)
    assert len(encoded) == 20
    second_backend = FilesOnly(SecondModel(inner))
    second = _run(data_dir, tmp_path, second_backend, "files-second")
    encoded.clear()
    got = second.condition(spec.CLEAN)
    assert encoded == []
    np.testing.assert_array_equal(
        got["option_logits"], first.condition(spec.CLEAN)["option_logits"]
    )


def test_a_files_only_backends_vsi_run_decodes_no_blur_and_matches(data_dir, tmp_path):
    """VSI through a backend that sends files: a second model blurs nothing and decodes no
    blur; it is sent the cache's files of exactly the white-box path's blurs, and its VSI
    arrays equal the white-box run's bit for bit."""
    from benchc.corruptions import blur_calls
    from benchc.corruptions.cache import decode_rgb, pixel_crc
    from benchc.suite.vsi import vsi_arrays

    inner = tiny_backend_cached()
    white = _run(data_dir, tmp_path, inner, "vsi-white")
    expected = vsi_arrays(white)
    inputs = white._vsi_inputs(0, 20)
    files = FilesOnly(SecondModel(inner))
    run = _run(data_dir, tmp_path, files, "vsi-files")
    before = blur_calls()
    got = vsi_arrays(run)
    assert blur_calls() - before == 0
    for name, array in expected.items():
        np.testing.assert_array_equal(got[name], array, err_msg=name)
    assert all(q.encoded is not None for q in files.sent)
    for q in files.sent:
        assert q.pixel_crc == pixel_crc(decode_rgb(q.encoded))
    # blurred passes: no pixels in the query, the file holds the white-box blur
    blurred = [q for q in files.sent if q.image is None]
    assert len(blurred) >= 20
    want = {q.id: [] for q in blurred}
    for i, (b, w) in enumerate(zip(inputs.blurred, inputs.whole, strict=True)):
        want.setdefault(white.dataset[i].id, []).extend([b, w])
    for q in blurred:
        pixels = decode_rgb(q.encoded)
        assert any(np.array_equal(pixels, w) for w in want[q.id]), q.id
    again = run._vsi_inputs(0, 20)
    assert all(b is None for b in again.blurred) and blur_calls() - before == 0


def test_a_files_only_backend_replaces_damaged_clean_and_blur_files(data_dir, tmp_path) -> None:
    """A stored clean image or blur whose file was damaged (a flipped byte, a truncation) is
    never sent: it is made and stored again, and the server gets the right pixels."""
    from benchc.corruptions.cache import decode_rgb, pixel_crc
    from benchc.suite.vsi import vsi_arrays

    inner = tiny_backend_cached()
    white = _run(data_dir, tmp_path, inner, "damage-white")
    expected = vsi_arrays(white)
    want = [*white.prepared(0, 20), *white._vsi_inputs(0, 20)[1], *white._vsi_inputs(0, 20)[4]]
    first = FilesOnly(inner)
    vsi_arrays(_run(data_dir, tmp_path, first, "damage-first"))  # stores the clean files too
    assert sum(q.image is not None for q in first.sent) == 20
    files = sorted((tmp_path / "cache").rglob("*.png"))
    assert len(files) == 20 + 20 + 20  # clean, region-blurred, whole-blurred: one file each
    for k, path in enumerate(files):  # every entry damaged, one way or the other
        data = bytearray(path.read_bytes())
        if k % 2:
            data[len(data) // 2] ^= 0xFF
        else:
            del data[len(data) // 3 :]
        path.write_bytes(bytes(data))
    backend = FilesOnly(SecondModel(inner))
    got = vsi_arrays(_run(data_dir, tmp_path, backend, "damage-files"))
    for name, array in expected.items():
        np.testing.assert_array_equal(got[name], array, err_msg=name)
    assert len(backend.sent) == 3 * 20
    for q in backend.sent:
        pixels = decode_rgb(q.encoded)
        assert q.pixel_crc == pixel_crc(pixels)
        assert any(np.array_equal(pixels, w) for w in want), q.id
    for path in files:  # stored again, whole
        decode_rgb(path.read_bytes())
