"""Black-box client throughput: requests/s and client CPU per request at 448 px, new vs old path.

A local server that answers at once (loopback only, a separate process, a canned log-prob
answer) stands in for a GPU fleet, so the client is what is measured. Each query is a 448 px
corrupted image read from a real corruption cache (``gaussian_noise`` severity 3: noise
compresses worst, the heaviest request), scored on the log-prob path (one request each).

- **new**: :class:`benchc.models.proxy.OpenAIProxyBackend` (pooled keep-alive ``httpx``
  connections, the cache's PNG bytes sent as stored), ``concurrency`` threads.
- **old** (the reference, measured in the same run): the previous client, reproduced here
  as it was: the cache's pixels re-encoded to PNG (default compression) per request, a new
  ``urllib`` connection per request, the same thread count.
- **transport alone**: the backend's request bodies, built beforehand, sent over one pooled
  ``httpx`` client by a thread pool (as the backend does) and by ``asyncio``
  (``httpx.AsyncClient``), alternately, twice each: which client the requests themselves need.
- **processes**: the new path spread over ``--processes`` client processes (what ``-n 2``
  does to one run: each xdist worker is one client), aggregate requests/s.

    python benchmarks/bench_client.py                 # 1200 requests, concurrency 32
    python benchmarks/bench_client.py --requests 300 --old-requests 100   # quick

Client CPU is ``time.process_time()`` of the client process (all its threads, user + system),
so the server's own CPU is not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TESTBED = ROOT / "fixtures" / "testbed"
IMAGE_SIZE = 448

_ANSWER = json.dumps(
    {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "A"},
                "logprobs": {
                    "content": [
                        {
                            "token": "A",
                            "logprob": -0.5,
                            "top_logprobs": [
                                {"token": t, "logprob": lp}
                                for t, lp in zip(
                                    "ABCDE", (-0.5, -1.5, -2.0, -2.5, -6.0), strict=False
                                )
                            ],
                        }
                    ]
                },
            }
        ]
    }
).encode()


# -- the server that answers at once --------------------------------------------------------
class _Instant(asyncio.Protocol):
    """HTTP/1.1 keep-alive: read headers and the Content-Length body, answer the canned JSON
    (``latency_s`` after the body arrived: a fleet replica's queue and prefill; 0: at once)."""

    #: A shared counter of the requests answered (``multiprocessing.Value``), or ``None``.
    counter = None
    #: Seconds between a request's last byte and its answer (timers: no thread, no CPU).
    latency_s = 0.0

    def connection_made(self, transport) -> None:
        self.transport, self.buf, self.need = transport, bytearray(), None

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            if self.need is None:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                head = bytes(self.buf[:end]).lower()
                length = 0
                for line in head.split(b"\r\n"):
                    if line.startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                self.need = end + 4 + length
            if len(self.buf) < self.need:
                return
            del self.buf[: self.need]
            self.need = None
            if self.latency_s > 0:
                asyncio.get_running_loop().call_later(self.latency_s, self._answer)
            else:
                self._answer()

    def _answer(self) -> None:
        if self.counter is not None:
            with self.counter.get_lock():
                self.counter.value += 1
        if not self.transport.is_closing():
            self.transport.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(_ANSWER), _ANSWER)
            )


def _serve(port_queue, counter=None, latency_s: float = 0.0) -> None:
    """Serve on a free loopback port (put on ``port_queue``); count requests in ``counter``;
    answer each ``latency_s`` after it arrived."""
    _Instant.counter = counter
    _Instant.latency_s = latency_s

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_Instant, "127.0.0.1", 0, backlog=512)
        port_queue.put(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(main())


# -- workload -------------------------------------------------------------------------------
def _config(root: Path, conditions: list[str], tag: str):
    from benchc.suite.config import SuiteConfig, parse_corruptions, parse_severities

    corruptions = sorted({c.rsplit("-", 1)[0] for c in conditions})
    severities = sorted({c.rsplit("-", 1)[1] for c in conditions})
    return SuiteConfig(
        model="openai:bench@http://unused",
        dataset=str(TESTBED),
        corruptions=parse_corruptions(",".join(corruptions)),
        severities=parse_severities(",".join(severities)),
        image_size=IMAGE_SIZE,
        results_dir=root / f"results-{tag}",
        cache_dir=root / "cache",
    )


def _run(url: str, root: Path, conditions: list[str], concurrency: int, tag: str):
    """A fresh :class:`SuiteRun` over the OpenAI backend (empty results store, warm cache)."""
    from benchc.data.loaders import load_dataset
    from benchc.models.proxy import OpenAIProxyBackend
    from benchc.suite.run import SuiteRun

    backend = OpenAIProxyBackend("bench", url, concurrency=concurrency)
    cfg = _config(root, conditions, tag)
    return SuiteRun(cfg, load_dataset(TESTBED), backend, corruption_workers=1)


def new_path(url: str, root: Path, conditions: list[str], concurrency: int, tag: str) -> None:
    """The suite's own path: ``SuiteRun.condition`` per cell (cache reads ahead of the
    requests, PNG bytes as stored, the pooled client)."""
    run = _run(url, root, conditions, concurrency, tag)
    for key in conditions:
        run.condition(key)


def old_path(url: str, root: Path, conditions: list[str], concurrency: int) -> None:
    """The previous client, as it was: chunks of 64 rows read through the cache, then batches
    of 16 (its default), a new thread pool per batch, and per request the pixels re-encoded
    to PNG (default level), JSON and a new urllib connection."""
    import base64
    import io

    from PIL import Image

    from benchc.corruptions import CorruptionCache, iter_materialize
    from benchc.data.loaders import load_dataset

    ds = load_dataset(TESTBED)
    pil = [s.image() for s in ds]
    cache = CorruptionCache(root / "cache")

    def one(arg) -> float:
        s, image = arg
        buf = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(image, dtype=np.uint8)).save(buf, format="PNG")
        url_ = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
        body = {"model": "bench", "messages": [{"role": "user", "content": [
            {"type": "text", "text": s.question},
            {"type": "image_url", "image_url": {"url": url_}}]}],
            "temperature": 0.0, "max_tokens": 1, "logprobs": True, "top_logprobs": 20}  # fmt: skip
        req = urllib.request.Request(
            f"{url}/chat/completions", data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"}, method="POST",
        )  # fmt: skip
        with urllib.request.urlopen(req, timeout=60) as resp:
            answer = json.loads(resp.read().decode())
        top = answer["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
        return float(np.logaddexp.reduce([t["logprob"] for t in top]))

    for key in conditions:
        for start in range(0, len(ds), 64):
            rows = range(start, min(len(ds), start + 64))
            images = [
                by_cond[key]
                for _, by_cond in iter_materialize(
                    [(ds[i].id, pil[i]) for i in rows],
                    [key],
                    image_size=IMAGE_SIZE,
                    seed=0,
                    cache=cache,
                )
            ]
            pairs = [(ds[i], im) for i, im in zip(rows, images, strict=True)]
            for b in range(0, len(pairs), 16):
                with ThreadPoolExecutor(concurrency) as pool:
                    list(pool.map(one, pairs[b : b + 16]))


def transport(url: str, bodies: list[bytes], concurrency: int, kind: str) -> None:
    """The same request bodies sent over one pooled ``httpx`` client of ``concurrency``
    connections, by ``kind``: ``threads`` (a thread pool, as the backend does) or ``asyncio``
    (``httpx.AsyncClient``, one event loop); each answer's JSON decoded."""
    import httpx

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    headers = {"Content-Type": "application/json"}
    target = f"{url}/chat/completions"
    if kind == "threads":
        with httpx.Client(limits=limits, headers=headers) as client:

            def one(body: bytes) -> dict:
                return client.post(target, content=body).json()

            with ThreadPoolExecutor(concurrency) as pool:
                list(pool.map(one, bodies))
        return

    async def run() -> None:
        gate = asyncio.Semaphore(concurrency)
        async with httpx.AsyncClient(limits=limits, headers=headers) as client:

            async def one(body: bytes) -> dict:
                async with gate:
                    return (await client.post(target, content=body)).json()

            await asyncio.gather(*(one(b) for b in bodies))

    asyncio.run(run())


def request_bodies(root: Path, conditions: list[str]) -> list[bytes]:
    """The backend's own request bodies (:func:`~benchc.models.client.encode_body`) for every
    testbed sample under ``conditions``, their images the cache's PNG files as stored."""
    from benchc.corruptions import CorruptionCache, iter_materialize
    from benchc.data.loaders import load_dataset
    from benchc.models.client import encode_body
    from benchc.models.proxy import image_data_url, image_url_part, png_bytes

    ds = load_dataset(TESTBED)
    cache = CorruptionCache(root / "cache")
    out = []
    items = [(s.id, s.image()) for s in ds]
    for key in conditions:
        files: dict[str, bytes] = {}
        stream = iter_materialize(
            items, [key], image_size=IMAGE_SIZE, seed=0, cache=cache, encoded=files
        )
        for (_, by_cond), sample in zip(stream, ds, strict=True):
            png = files.get(key) or png_bytes(by_cond[key])
            text = {"type": "text", "text": sample.question}
            content = [text, image_url_part(image_data_url(None, png))]
            body = {"model": "bench", "messages": [{"role": "user", "content": content}]}
            body.update(temperature=0.0, max_tokens=1, logprobs=True, top_logprobs=20)
            out.append(encode_body(body))
    return out


def _measure(fn, n: int) -> tuple[float, float]:
    """(requests/s, client CPU ms per request) of ``fn()`` scoring ``n`` requests."""
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return n / wall, 1000 * cpu / n


def _worker(args) -> tuple[int, float, float]:
    url, root, conditions, concurrency, tag = args
    from benchc.data.loaders import load_dataset

    n = len(load_dataset(TESTBED)) * len(conditions)
    cpu, start = time.process_time(), time.perf_counter()
    new_path(url, Path(root), conditions, concurrency, tag)
    return n, time.perf_counter() - start, time.process_time() - cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corruptions", default="gaussian_noise,shot_noise")
    parser.add_argument("--severities", default="1,2,3,4,5")
    parser.add_argument("--old-cells", type=int, default=2, help="cells the old path scores")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--processes", type=int, default=2, help="client processes (0: skip)")
    args = parser.parse_args(argv)
    from benchc.corruptions import CorruptionCache, prefill
    from benchc.data.loaders import load_dataset

    conditions = [
        f"{c}-{s}" for c in args.corruptions.split(",") for s in args.severities.split(",")
    ]
    ds = load_dataset(TESTBED)
    ctx = mp.get_context("spawn")
    ports = ctx.Queue()
    server = ctx.Process(target=_serve, args=(ports,), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{ports.get(timeout=60)}/v1"
    ports.close()
    ports.join_thread()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            prefill([(s.id, s.image()) for s in ds], conditions, image_size=IMAGE_SIZE, seed=0,
                    cache=CorruptionCache(root / "cache"), workers=os.cpu_count() or 1)  # fmt: skip
            n = len(ds) * len(conditions)
            print(f"{n} requests ({len(ds)} testbed samples x {len(conditions)} cells) at "
                  f"{IMAGE_SIZE} px from a warm corruption cache, concurrency {args.concurrency}, "
                  f"{os.cpu_count()} cores, a loopback server answering at once")  # fmt: skip
            new_path(url, root, conditions[:1], args.concurrency, "warm")
            new_rps, new_cpu = _measure(
                lambda: new_path(url, root, conditions, args.concurrency, "new"), n
            )
            old_cells = conditions[: args.old_cells]
            old_rps, old_cpu = _measure(
                lambda: old_path(url, root, old_cells, args.concurrency), len(ds) * len(old_cells)
            )
            print(f"old path (urllib, re-encoded PNG):    {old_rps:7.1f} requests/s "
                  f"{old_cpu:6.1f} ms client CPU per request")  # fmt: skip
            print(f"new path (httpx pool, PNG as stored): {new_rps:7.1f} requests/s "
                  f"{new_cpu:6.1f} ms client CPU per request")  # fmt: skip
            print(f"new / old: {new_rps / old_rps:.1f}x requests/s, "
                  f"{old_cpu / new_cpu:.1f}x less client CPU per request")  # fmt: skip
            bodies = request_bodies(root, conditions)
            transport(url, bodies[:64], args.concurrency, "asyncio")  # warm both paths
            transport(url, bodies[:64], args.concurrency, "threads")
            for kind in ("threads", "asyncio", "threads", "asyncio"):
                rps, cpu = _measure(
                    lambda k=kind: transport(url, bodies, args.concurrency, k), len(bodies)
                )
                print(f"transport alone, {kind:<8} (httpx, bodies built): {rps:7.1f} "
                      f"requests/s {cpu:6.2f} ms client CPU per request")  # fmt: skip
            if args.processes > 1:
                k = args.processes
                jobs = [
                    (url, str(root), conditions[i::k], args.concurrency, f"p{i}") for i in range(k)
                ]
                with ctx.Pool(k) as pool:
                    done = pool.map(_worker, jobs)
                total = sum(d[0] for d in done)
                slowest = max(d[1] for d in done)
                cpu = sum(d[2] for d in done)
                print(f"{k} client processes (as -n {k}, cells split): {total / slowest:7.1f} "
                      f"requests/s together, {1000 * cpu / total:.1f} ms client CPU per request "
                      f"({total / slowest / new_rps:.2f}x one process)")  # fmt: skip
    finally:
        server.terminate()
        server.join(5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
