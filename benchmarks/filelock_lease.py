"""Why the results lock is not ``filelock``: the experiment behind that decision (issue 25).

A holder that is alive but stalled (SIGSTOP here; a paused CI job or a hung NFS client in
practice) must never be taken over: two writers of one condition would interleave batches.
``filelock.SoftFileLease`` (filelock >= 3.30, its heartbeat lease) hands the lock to a peer once
the lease expires, while the first holder still runs; benchc's lock waits, then refuses with an
error naming the holder (test_store_hardening's
test_lock_of_a_live_process_on_this_host_is_waited_for).
``filelock.FileLock`` (flock) records no owner, so a waiter cannot name the holder either
(test_lock_from_another_host_waits_visibly_then_times_out).

Run: ``python benchmarks/filelock_lease.py`` (about 10 s). Measured 2026-12-02, filelock 4.3.1:
``filelock.SoftFileLease: holder alive=True; peer acquired -> True after 1.1s`` and
``benchc FileLock: holder alive=True; peer acquired -> refused: StoreError: timed out ...``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LEASE_S = 1.0

HOLDERS = {
    "filelock.SoftFileLease": (
        "import sys, time, filelock\n"
        f"lock = filelock.SoftFileLease(sys.argv[1], lease_duration={LEASE_S})\n"
        "lock.acquire(); print('held', flush=True); time.sleep(60)\n"
    ),
    "benchc FileLock": (
        "import sys, time\nsys.path.insert(0, sys.argv[2])\n"
        "from benchc.results.lock import FileLock\n"
        "lock = FileLock(sys.argv[1], timeout=600); lock.acquire()\n"
        "print('held', flush=True); time.sleep(60)\n"
    ),
}


def peer_acquires(kind: str, path: Path) -> str:
    if kind == "filelock.SoftFileLease":
        import filelock

        filelock.SoftFileLease(str(path), lease_duration=LEASE_S).acquire(timeout=5)
        return "True"
    import benchc.results.lock as lock_mod

    lock_mod.STALE_HEARTBEAT_S = LEASE_S  # the same staleness horizon as the lease
    try:
        lock_mod.FileLock(path, timeout=5).acquire()
        return "True"
    except lock_mod.StoreError as exc:
        return f"refused: StoreError: {str(exc)[:60]}..."


def main() -> None:
    sys.path.insert(0, str(REPO))
    tmp = Path(tempfile.mkdtemp())
    for kind, code in HOLDERS.items():
        path = tmp / f"{kind.replace(' ', '-')}.lock"
        holder = subprocess.Popen(
            [sys.executable, "-c", code, str(path), str(REPO)], stdout=subprocess.PIPE, text=True
        )
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        os.kill(holder.pid, signal.SIGSTOP)  # alive, its heartbeat stops
        t0 = time.monotonic()
        try:
            got = peer_acquires(kind, path)
            print(
                f"{kind}: holder alive={holder.poll() is None}; peer acquired -> {got} "
                f"after {time.monotonic() - t0:.1f}s"
            )
        finally:
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait()


if __name__ == "__main__":
    main()
