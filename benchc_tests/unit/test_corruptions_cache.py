"""Cache and batch generation: same bytes on a hit, atomic concurrent fills, pool invariance."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import benchc.corruptions.batch as batch
from benchc.corruptions import (
    CacheKey,
    CorruptionCache,
    content_hash,
    corrupt,
    default_cache_root,
    iter_materialize,
    materialize,
    prefill,
)
from benchc.corruptions.cache import (
    CHECKSUM_CHUNK,
    SHA256_CHUNK,
    decode_rgb,
    encode_png,
    pixel_crc,
    pixel_digest,
)
from benchc.data.images import prepare
from benchc.spec import CLEAN, CORRUPTIONS, all_conditions


def images(n: int = 3, h: int = 48, w: int = 60) -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(5)
    return [(f"s{i}", rng.integers(0, 256, (h + i, w, 3), dtype=np.uint8)) for i in range(n)]


def a_key(**change) -> CacheKey:
    fields = dict(content="ab" * 16, image_size=64, corruption="fog", severity=2, seed=0)
    fields["sample_id"] = "s0"
    fields.update(change)
    return CacheKey(**fields)


def all_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


# --- the cache ---------------------------------------------------------------------------------


def test_put_then_get_returns_the_same_bytes(tmp_path):
    cache = CorruptionCache(tmp_path)
    array = corrupt(images(1)[0][1], "spatter", 3, seed=0, sample_id="s0")
    assert cache.get(a_key()) is None
    path = cache.put(a_key(), array)
    assert path.suffix == ".png" and path.parent.parent == tmp_path
    assert all_files(tmp_path) == [path]  # no temp file left behind
    hit = cache.get(a_key(), array.shape)
    assert hit.dtype == np.uint8 and hit.tobytes() == array.tobytes()
    assert os.stat(path).st_mode & 0o044 == 0o044  # readable by the other users of a shared cache


def test_key_digest_covers_every_field(monkeypatch):
    base = a_key().digest()
    changed = [
        a_key(content="cd" * 16),
        a_key(image_size=None),
        a_key(corruption="snow"),
        a_key(severity=3),
        a_key(seed=1),
        a_key(sample_id="s1"),
    ]
    digests = {base, *(k.digest() for k in changed)}
    assert len(digests) == 7
    monkeypatch.setattr("benchc.corruptions.cache.ENGINE_VERSION", "benchc-corruptions-test")
    assert a_key().digest() not in digests
    monkeypatch.undo()
    monkeypatch.setattr("benchc.corruptions.cache.library_version", lambda: "numpy=0")
    assert a_key().digest() not in digests


def test_damaged_or_mismatched_entry_is_a_miss_and_is_overwritten(tmp_path):
    cache = CorruptionCache(tmp_path)
    array = images(1)[0][1]
    path = cache.put(a_key(), array)
    path.write_bytes(path.read_bytes()[:40])  # truncated PNG
    assert cache.get(a_key()) is None
    cache.put(a_key(), array)
    assert cache.get(a_key()).tobytes() == array.tobytes()
    assert cache.get(a_key(), (10, 10, 3)) is None
    Image.fromarray(array[..., 0]).save(path)  # a greyscale file is not a valid entry
    assert cache.get(a_key()) is None
    with pytest.raises(ValueError, match="uint8"):
        cache.put(a_key(), array.astype(np.float32))


def test_entry_with_valid_format_but_other_pixels_is_a_miss(tmp_path):
    cache = CorruptionCache(tmp_path)
    array = images(1)[0][1]
    path = cache.put(a_key(), array)
    assert cache.get(a_key()).tobytes() == array.tobytes()
    with Image.open(path) as im:
        info = im.info  # keep the recorded checksum, change one pixel
    from PIL import PngImagePlugin

    meta = PngImagePlugin.PngInfo()
    for k, v in info.items():
        if isinstance(v, str):
            meta.add_text(k, v)
    damaged = array.copy()
    damaged[0, 0, 0] ^= 0xFF
    Image.fromarray(damaged).save(path, pnginfo=meta)
    assert cache.get(a_key()) is None  # decodes fine, fails its checksum: recomputed
    Image.fromarray(array).save(path)  # right pixels, no checksum (an older cache): a miss too
    assert cache.get(a_key()) is None


def png_rows_filters(data: bytes) -> set[int]:
    """The filter type of every row of an 8-bit RGB PNG's image data."""
    import struct
    import zlib

    pos, idat, width = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width = struct.unpack(">I", body[:4])[0]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = 1 + 3 * width
    return {raw[i] for i in range(0, len(raw), stride)}


@pytest.mark.parametrize("filter_flag", [True, False], ids=["opencv>=4.11", "older"])
def test_entries_use_one_fast_filter_and_a_crc_checksum(tmp_path, monkeypatch, filter_flag):
    import cv2

    if not filter_flag:  # an OpenCV without IMWRITE_PNG_FILTER: its own filters, same pixels
        monkeypatch.delattr(cv2, "IMWRITE_PNG_FILTER", raising=False)
    filter_flag = hasattr(cv2, "IMWRITE_PNG_FILTER")
    cache = CorruptionCache(tmp_path)
    array = corrupt(images(1)[0][1], "gaussian_noise", 3, seed=0, sample_id="s0")
    path = cache.put(a_key(), array)
    data = path.read_bytes()
    if filter_flag:
        assert png_rows_filters(data) == {2}  # "Up" on every row: no Paeth rows to undo
    with Image.open(path) as im:
        assert im.info[CHECKSUM_CHUNK] == pixel_crc(array)
        assert np.array_equal(np.asarray(im), array)
    hit = cache.read(a_key(), array.shape)
    assert hit is not None and hit[1] == data  # the file's bytes, for servers


@pytest.mark.parametrize("straight_to_rgb", [True, False], ids=["opencv>=4.10", "older"])
def test_entries_decode_to_pillows_pixels(monkeypatch, straight_to_rgb):
    import io

    import cv2

    if not straight_to_rgb:
        monkeypatch.delattr(cv2, "IMREAD_COLOR_RGB", raising=False)
    array = corrupt(images(1)[0][1], "frost", 2, seed=0, sample_id="s0")
    data = encode_png(array, {})
    got = decode_rgb(data)
    with Image.open(io.BytesIO(data)) as im:
        assert np.array_equal(got, np.asarray(im)) and np.array_equal(got, array)
    assert got.dtype == np.uint8 and not got.flags.writeable  # shared by whoever reads it
    assert decode_rgb(data[:100]) is None  # truncated: a miss, not an error


def test_entries_written_by_earlier_versions_still_hit(tmp_path):
    """sha256 checksum, Pillow's adaptive filters: read and checked as they are, not redone."""
    from PIL import PngImagePlugin

    cache = CorruptionCache(tmp_path)
    array = images(1)[0][1]
    path = cache.path(a_key())
    path.parent.mkdir(parents=True)
    meta = PngImagePlugin.PngInfo()
    meta.add_text(SHA256_CHUNK, pixel_digest(array))
    Image.fromarray(array).save(path, compress_level=1, pnginfo=meta)
    assert cache.get(a_key(), array.shape).tobytes() == array.tobytes()
    damaged = array.copy()
    damaged[1, 2, 0] ^= 1
    Image.fromarray(damaged).save(path, compress_level=1, pnginfo=meta)
    assert cache.get(a_key(), array.shape) is None


def test_default_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("BENCHC_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_root() == tmp_path / "c"
    assert CorruptionCache().root == tmp_path / "c"
    monkeypatch.delenv("BENCHC_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert default_cache_root() == Path.home() / ".cache" / "benchc" / "corruptions"


def test_default_root_honours_xdg_cache_home_below_benchc_cache_dir(monkeypatch, tmp_path):
    """BENCHC_CACHE_DIR > $XDG_CACHE_HOME/benchc/corruptions > ~/.cache/benchc/corruptions."""
    monkeypatch.delenv("BENCHC_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_root() == tmp_path / "xdg" / "benchc" / "corruptions"
    assert CorruptionCache().root == tmp_path / "xdg" / "benchc" / "corruptions"
    monkeypatch.setenv("BENCHC_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_root() == tmp_path / "mine"  # the benchc variable wins
    monkeypatch.delenv("BENCHC_CACHE_DIR")
    for ignored in ("", "relative/cache"):  # the XDG spec: only an absolute path counts
        monkeypatch.setenv("XDG_CACHE_HOME", ignored)
        assert default_cache_root() == Path.home() / ".cache" / "benchc" / "corruptions"


def test_readers_never_see_a_partial_file_while_writers_race(tmp_path):
    cache = CorruptionCache(tmp_path)
    array = np.random.default_rng(0).integers(0, 256, (160, 160, 3), dtype=np.uint8)
    stop = threading.Event()
    bad: list[str] = []

    def write():
        for _ in range(10):
            cache.put(a_key(), array)

    def read():
        while not stop.is_set():
            got = cache.get(a_key())  # a partial file would read as a miss (None)
            if got is None or got.tobytes() != array.tobytes():
                bad.append("partial or wrong file read")

    cache.put(a_key(), array)  # from here on every read must see a complete file
    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=write) for _ in range(3)]
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    reader.join()
    assert not bad
    assert len(all_files(tmp_path)) == 1


_FILLER = textwrap.dedent(
    """
    import hashlib, sys
    import numpy as np
    sys.path.insert(0, {root!r})
    from benchc.corruptions import CorruptionCache, materialize
    from benchc.spec import all_conditions
    rng = np.random.default_rng(5)
    imgs = [(f"s{{i}}", rng.integers(0, 256, (40 + i, 48, 3), dtype=np.uint8)) for i in range(2)]
    out = materialize(imgs, all_conditions(), image_size=None, seed=0,
                      cache=CorruptionCache({cache!r}), workers=1)
    print(hashlib.sha256(b"".join(a.tobytes() for a in out.values())).hexdigest())
    """
)


@pytest.mark.slow  # two fresh Python processes, each importing the corruption library (~3 s)
def test_two_fresh_processes_filling_one_cache_agree_bit_for_bit(tmp_path):
    """Two concurrent fresh processes: same pixels as here, and only complete files on disk."""
    code = _FILLER.format(root=os.getcwd(), cache=str(tmp_path))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "random"}
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    here = materialize(images(2, 40, 48), all_conditions(), image_size=None, seed=0)
    digest = hashlib.sha256(b"".join(a.tobytes() for a in here.values())).hexdigest()
    assert outputs == [digest, digest]
    files = all_files(tmp_path)
    assert len(files) == len(here) and all(f.suffix == ".png" for f in files)
    cache = CorruptionCache(tmp_path)
    for (sample_id, condition), expected in here.items():
        name, severity = condition.rsplit("-", 1)
        image = dict(images(2, 40, 48))[sample_id]
        key = CacheKey(content_hash(image), None, name, int(severity), 0, sample_id)
        assert cache.get(key, expected.shape).tobytes() == expected.tobytes(), condition


# --- materialize -------------------------------------------------------------------------------


def test_materialize_matches_corrupt_in_sample_major_order(tmp_path):
    conditions = [CLEAN, "fog-2", "glass_blur-5", "impulse_noise-1"]
    out = materialize(images(), conditions, image_size=40, seed=3, cache=None)
    assert list(out) == [(sid, c) for sid, _ in images() for c in conditions]
    for (sample_id, condition), array in out.items():
        image = dict(images())[sample_id]
        if condition == CLEAN:
            expected = prepare(image, 40)
        else:
            name, severity = condition.rsplit("-", 1)
            expected = corrupt(
                image, name, int(severity), seed=3, sample_id=sample_id, image_size=40
            )
        assert array.shape == expected.shape and np.array_equal(array, expected), condition


def test_warm_cache_returns_same_bytes_without_recomputing(tmp_path, monkeypatch):
    cache = CorruptionCache(tmp_path)
    conditions = ["snow-3", "zoom_blur-1", "pixelate-4"]
    cold = materialize(images(), conditions, image_size=None, seed=0, cache=cache)
    assert len(all_files(tmp_path)) == 9

    def no_compute(*args, **kwargs):
        raise AssertionError("a warm cache must not recompute")

    monkeypatch.setattr(batch, "corrupt_array", no_compute)
    warm = materialize(images(), conditions, image_size=None, seed=0, cache=cache)
    assert list(warm) == list(cold)
    assert all(warm[k].tobytes() == cold[k].tobytes() for k in cold)
    with pytest.raises(RuntimeError, match="sample 's0', condition snow-3"):
        materialize(images(), conditions, image_size=None, seed=1, cache=cache)


@pytest.fixture
def fresh_pools():
    """Pools are kept alive for speed; a test that starts one stops it, leaving no processes."""
    batch.shutdown_pools()
    yield
    batch.shutdown_pools()


@pytest.mark.slow  # process pools of two sizes started from scratch (~3 s)
def test_pool_sizes_1_and_2_give_identical_pixels(tmp_path, fresh_pools):
    conditions = [CLEAN, *all_conditions()[::3]]
    serial = materialize(images(), conditions, image_size=48, seed=0, cache=None, workers=1)
    cache = CorruptionCache(tmp_path)
    pooled = materialize(images(), conditions, image_size=48, seed=0, cache=cache, workers=2)
    assert list(serial) == list(pooled)
    assert all(serial[k].tobytes() == pooled[k].tobytes() for k in serial)
    assert len(all_files(tmp_path)) == 3 * (len(conditions) - 1)  # workers filled the cache
    other = CorruptionCache(tmp_path / "prefilled")
    assert prefill(images(), conditions, image_size=48, seed=0, cache=other, workers=2) == 3 * 32
    filled = all_files(other.root)
    assert [f.name for f in filled] == [
        f.name for f in all_files(tmp_path) if other.root not in f.parents
    ]
    streamed = list(
        iter_materialize(images(), conditions, image_size=48, seed=0, cache=None, workers=2)
    )
    assert [sid for sid, _ in streamed] == ["s0", "s1", "s2"]
    assert list(streamed[1][1]) == conditions
    assert all(np.array_equal(serial[("s1", c)], a) for c, a in streamed[1][1].items())
    # A larger image at the strongest severity: thread-split library code must not leak in.
    big = [("big", np.random.default_rng(1).integers(0, 256, (160, 224, 3), dtype=np.uint8))]
    strongest = [f"{name}-5" for name in CORRUPTIONS]
    one = materialize(big, strongest, image_size=None, seed=0, workers=1)
    two = materialize(big, strongest, image_size=None, seed=0, workers=2)
    assert all(one[k].tobytes() == two[k].tobytes() for k in one)


def test_a_pool_fills_the_cache_with_the_bytes_a_serial_fill_writes(tmp_path, fresh_pools):
    """The cold cache is filled across the cores (the default run's warm-up process, a plain
    run's prefetch): every entry is byte-for-byte the file one process writes alone."""
    conditions = [CLEAN, *all_conditions()[1::4]]
    serial, pooled = CorruptionCache(tmp_path / "serial"), CorruptionCache(tmp_path / "pooled")
    n = prefill(images(), conditions, image_size=48, seed=0, cache=serial, workers=1)
    assert prefill(images(), conditions, image_size=48, seed=0, cache=pooled, workers=2) == n
    assert n == 3 * (len(conditions) - 1)
    one, two = all_files(serial.root), all_files(pooled.root)
    assert [p.relative_to(serial.root) for p in one] == [p.relative_to(pooled.root) for p in two]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(one, two, strict=True))


def test_prefill_computes_only_misses_and_feeds_materialize(tmp_path, monkeypatch):
    cache = CorruptionCache(tmp_path)
    conditions = [CLEAN, "frost-2", "motion_blur-4"]
    assert prefill(images(2), conditions[:2], image_size=None, seed=0, cache=cache) == 2
    assert prefill(images(2), conditions, image_size=None, seed=0, cache=cache) == 2
    assert prefill(images(2), conditions, image_size=None, seed=0, cache=cache) == 0
    expected = materialize(images(2), conditions, image_size=None, seed=0, cache=None)
    monkeypatch.setattr(batch, "corrupt_array", None)  # any computation would now fail
    warm = materialize(images(2), conditions, image_size=None, seed=0, cache=cache)
    assert all(warm[k].tobytes() == expected[k].tobytes() for k in expected)
    with pytest.raises(ValueError, match="needs a CorruptionCache"):
        prefill(images(2), conditions, image_size=None, seed=0, cache=None)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(images=[("a", np.zeros((40, 40, 3), np.uint8))] * 2), "duplicate sample id 'a'"),
        (dict(conditions=["fog-9"]), "not a condition key: 'fog-9'"),
        (dict(conditions="fog-1"), "not the string"),
        (dict(workers=0), "workers must be a positive integer"),
        (dict(images=[("t", np.zeros((20, 40, 3), np.uint8))]), "sample 't'.*32 px"),
    ],
)
def test_materialize_bad_input_is_a_value_error(kwargs, message):
    args = dict(images=images(1), conditions=["fog-1"], image_size=None, seed=0, cache=None)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        materialize(**args)


def test_threaded_reads_equal_a_plain_loop_and_keep_the_files_bytes(tmp_path):
    """``read_threads`` reads cache hits ahead in threads: the same arrays in the same order,
    and ``encoded`` holds each hit's file bytes exactly (what a server backend sends)."""
    cache = CorruptionCache(tmp_path / "cache")
    rng = np.random.default_rng(3)
    items = [(f"s{i}", rng.integers(0, 255, (40, 48, 3), dtype=np.uint8)) for i in range(7)]
    conds = ["fog-2", CLEAN]
    kw = dict(image_size=None, seed=0, cache=cache)
    batch.prefill(items, conds, cache=cache, image_size=None, seed=0)
    plain = list(batch.iter_materialize(items, conds, **kw))
    files: list[dict[str, bytes]] = []
    encoded: dict[str, bytes] = {}
    threaded = []
    for sid, by_cond in batch.iter_materialize(items, conds, encoded=encoded, read_threads=3, **kw):
        threaded.append((sid, by_cond))
        files.append(dict(encoded))
    assert [s for s, _ in threaded] == [s for s, _ in plain]
    for (_, a), (_, b) in zip(plain, threaded, strict=True):
        assert all(np.array_equal(a[c], b[c]) for c in conds)
    for (sid, image), got in zip(items, files, strict=True):
        assert set(got) == {"fog-2"}  # clean is not a cache entry
        key = CacheKey(batch.content_hash(prepare(image, None)), None, "fog", 2, 0, sid)
        assert got["fog-2"] == cache.path(key).read_bytes()


def test_read_file_checks_an_entry_without_decoding_and_refuses_what_it_cannot_check(tmp_path):
    """A server sends the cache file as it is: read_file checks it by its compressed stream's
    recorded CRC (no decode) and gives the pixels' recorded CRC; an entry written before that
    record, a damaged or re-encoded stream and another shape are not vouched for (None), and
    read() (decoding) still serves the old entry."""
    import struct
    import zlib

    from benchc.corruptions.cache import (
        CHECKSUM_CHUNK,
        decode_rgb,
        encode_png,
        pixel_crc,
        png_chunks,
    )

    cache = CorruptionCache(tmp_path)
    rng = np.random.default_rng(1)
    array = rng.integers(0, 256, (24, 40, 3), dtype=np.uint8)
    key = CacheKey("c", 40, "gaussian_noise", 3, 0, "s")
    cache.put(key, array)
    data, crc = cache.read_file(key, array.shape)
    assert data == cache.path(key).read_bytes() and crc == pixel_crc(array)
    np.testing.assert_array_equal(decode_rgb(data), array)
    assert cache.read_file(key, (40, 24, 3)) is None
    # written before the stream's CRC was recorded: only the decoding read vouches for it
    cache.path(key).write_bytes(encode_png(array, {CHECKSUM_CHUNK: pixel_crc(array)}))
    assert cache.read_file(key, array.shape) is None
    np.testing.assert_array_equal(cache.get(key, array.shape), array)
    # a stream changed after writing, its chunk CRCs made valid again (a hand edit)
    cache.put(key, array)
    good = cache.path(key).read_bytes()
    chunks = png_chunks(good)
    idat = next(i for i, (kind, _, _) in enumerate(chunks) if kind == b"IDAT")
    pos = good.index(b"IDAT")
    body = bytearray(chunks[idat][1])
    body[-1] ^= 1
    edited = b"IDAT" + bytes(body)
    bad = good[: pos - 4] + struct.pack(">I", len(body)) + edited
    bad += struct.pack(">I", zlib.crc32(edited)) + good[pos + 4 + len(body) + 4 :]
    cache.path(key).write_bytes(bad)
    assert cache.read_file(key, array.shape) is None
    cache.path(key).write_bytes(good[:-20])  # truncated
    assert cache.read_file(key, array.shape) is None


def test_filling_only_reads_no_warm_entry(tmp_path, monkeypatch):
    """The suite's prefetcher fills the cache sample by sample (iter_materialize keep=False):
    a missing entry is computed and stored, a present one is neither read nor decoded."""
    cache = CorruptionCache(tmp_path)
    conditions = ["gaussian_noise-1", "brightness-2"]
    kw = dict(image_size=None, seed=0, cache=cache)
    assert [got for _, got in iter_materialize(images(), conditions, keep=False, **kw)] == [{}] * 3
    assert len(list(tmp_path.rglob("*.png"))) == 6
    monkeypatch.setattr(CorruptionCache, "read", lambda *a, **k: pytest.fail("read"))
    monkeypatch.setattr(batch, "corrupt_array", lambda *a, **k: pytest.fail("computed"))
    assert len(list(iter_materialize(images(), conditions, keep=False, **kw))) == 3


def test_file_of_stores_once_then_reads_and_survives_a_cache_it_cannot_write(tmp_path, monkeypatch):
    """A server's clean image: encoded and stored the first time, read (not encoded) after;
    where the cache cannot be written (a read-only mount) the file is still given, from
    memory, with the same bytes."""
    import benchc.corruptions.cache as cache_mod
    from benchc.corruptions.cache import CorruptionCache, PreparedKey, decode_rgb, pixel_crc

    img = np.random.default_rng(5).integers(0, 256, (24, 40, 3), dtype=np.uint8)
    key = PreparedKey("c0ffee")
    encodes = []
    plain = CorruptionCache._encode
    monkeypatch.setattr(
        CorruptionCache, "_encode", staticmethod(lambda a: encodes.append(1) or plain(a))
    )
    cache = CorruptionCache(tmp_path / "rw")
    data, crc = cache.file_of(key, img)
    assert np.array_equal(decode_rgb(data), img) and crc == pixel_crc(img) and encodes == [1]
    assert cache.file_of(key, img) == (data, crc) and encodes == [1]  # read, not encoded

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Read-only file system")

    monkeypatch.setattr(cache_mod, "atomic_write", refuse)
    readonly = CorruptionCache(tmp_path / "ro")
    assert readonly.file_of(key, img) == (data, crc)
    assert not any((tmp_path / "ro").rglob("*.png"))
