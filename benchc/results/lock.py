"""Cross-process, cross-host lock files for the results store, with takeover of stale ones.

Why: xdist workers and concurrent CI jobs share one store, and a killed holder must not make the
next run wait silently for hours. A lock file records host, boot id, PID and the PID's start
time, and its holder touches it every few seconds (the heartbeat). A waiter on the same host
takes a lock over at once when the holder is dead, or its PID now belongs to another process
(start time or boot id differ). A lock from another host cannot be checked: the waiter says so
on stderr and gives up after a bounded timeout (``BENCHC_LOCK_TIMEOUT`` or ``--lock-timeout``,
default 600 s) with an error naming the file and the holder. A live holder on this host is
waited for as long as its heartbeat is fresh; a holder whose heartbeat stopped (a stopped
process) is waited for at most the timeout too.

Why not ``filelock``: its heartbeat lease (``SoftFileLease``) gives the lock to a peer once the
lease expires even while the holder still runs (a stalled holder: two writers), and its flock
``FileLock`` records no owner to name in the timeout error; benchmarks/filelock_lease.py shows
the first.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
import uuid
from pathlib import Path
from types import TracebackType

#: Environment variable: seconds to wait for a lock whose holder cannot be verified.
LOCK_TIMEOUT_ENV = "BENCHC_LOCK_TIMEOUT"
#: Default of that wait.
LOCK_TIMEOUT_S = 600.0
#: The holder touches its lock file this often.
HEARTBEAT_S = 5.0
#: A heartbeat older than this counts as stopped.
STALE_HEARTBEAT_S = 60.0
#: A lock file that cannot be parsed and is older than this is garbage (a crash mid-write).
GARBAGE_AGE_S = 5.0


#: Tokens of the locks this process holds (several threads may use the store).
_HELD: set[str] = set()


class StoreError(RuntimeError):
    """A stored entry or lock is unreadable or inconsistent with what the run expects."""


def default_timeout() -> float:
    """``$BENCHC_LOCK_TIMEOUT`` seconds, else :data:`LOCK_TIMEOUT_S`."""
    raw = os.environ.get(LOCK_TIMEOUT_ENV)
    if not raw:
        return LOCK_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        raise StoreError(f"{LOCK_TIMEOUT_ENV}={raw!r} is not a number of seconds") from None
    if value < 0:
        raise StoreError(f"{LOCK_TIMEOUT_ENV}={raw!r} must be >= 0")
    return value


def boot_id() -> str | None:
    """The kernel's boot id (Linux); PIDs and start times are only comparable within a boot."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def process_start(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (Linux ``/proc``), ``None`` if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:  # the command name (field 2) may contain spaces and parentheses
        return int(stat[stat.rindex(")") + 2 :].split()[19])
    except (ValueError, IndexError):
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _record() -> dict[str, object]:
    pid = os.getpid()
    return {
        "host": socket.gethostname(),
        "boot": boot_id(),
        "pid": pid,
        "start": process_start(pid),
        "created": time.time(),
    }


def _parse(text: str) -> dict[str, object] | None:
    """A lock record: JSON, or the older ``"<host> <pid>"`` form."""
    try:
        rec = json.loads(text)
        if isinstance(rec, dict) and "host" in rec and isinstance(rec.get("pid"), int):
            return rec
    except json.JSONDecodeError:
        pass
    parts = text.split()
    if len(parts) == 2 and parts[1].isdigit():
        return {"host": parts[0], "pid": int(parts[1])}
    return None


class FileLock:
    """``with FileLock(path): ...``: exclusive across processes and hosts sharing ``path``."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float | None = None) -> None:
        self.path = Path(path)
        self.timeout = default_timeout() if timeout is None else float(timeout)
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    # -- acquisition -----------------------------------------------------------------------
    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        announced = False
        while True:
            if self._try_create():
                break
            verdict, holder, age = self._inspect()
            if verdict == "stale":
                self._take_over(holder)
                continue
            if verdict == "busy":  # a verified live holder on this host, heartbeat fresh
                started = time.monotonic()
            waited = time.monotonic() - started
            if waited > self.timeout:
                raise StoreError(
                    f"timed out after {self.timeout:g} s waiting for lock {self.path}, held by "
                    f"{_who(holder)} (last heartbeat {age:.0f} s ago); if that run is gone, "
                    f"delete the file, or wait longer with --lock-timeout / {LOCK_TIMEOUT_ENV}"
                )
            if verdict == "unverified" and not announced:
                announced = True
                print(
                    f"benchc: waiting up to {self.timeout:g} s for lock {self.path}, held by "
                    f"{_who(holder)} (last heartbeat {age:.0f} s ago)",
                    file=sys.__stderr__ or sys.stderr,
                    flush=True,
                )
            time.sleep(0.1)
        _HELD.add(self._token)
        self._stop.clear()
        self._beat = threading.Thread(target=self._heartbeat, name="benchc-lock", daemon=True)
        self._beat.start()

    def release(self) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
            self._beat = None
        holder = self._read()
        if holder is not None and holder.get("token") == self._token:
            self.path.unlink(missing_ok=True)
        _HELD.discard(self._token)

    # -- internals -------------------------------------------------------------------------
    def _try_create(self) -> bool:
        """Create the lock file with its full record in one step (write a temp file, link it)."""
        rec = _record()
        self._token = rec["token"] = uuid.uuid4().hex
        tmp = self.path.with_name(f".{self.path.name}.{rec['pid']}.{self._token[:8]}")
        tmp.write_text(json.dumps(rec))
        try:
            os.link(tmp, self.path)
            return True
        except FileExistsError:
            return False
        finally:
            tmp.unlink(missing_ok=True)

    def _read(self) -> dict[str, object] | None:
        try:
            return _parse(self.path.read_text())
        except (OSError, UnicodeDecodeError):
            return None

    def _inspect(self) -> tuple[str, dict[str, object] | None, float]:
        """``("stale" | "busy" | "unverified", holder record, heartbeat age in seconds)``."""
        try:
            age = time.time() - self.path.stat().st_mtime
        except FileNotFoundError:
            return "gone", None, 0.0
        holder = self._read()
        if holder is None:
            return ("stale" if age > GARBAGE_AGE_S else "unverified"), None, age
        if holder.get("host") != socket.gethostname():
            return "unverified", holder, age
        pid = int(holder["pid"])  # type: ignore[arg-type]
        if holder.get("boot") not in (None, boot_id()):
            return "stale", holder, age  # written before a reboot
        if pid == os.getpid():
            # this process cannot wait for itself: a lock of ours that is not held is stale
            return ("busy" if holder.get("token") in _HELD else "stale"), holder, age
        if not pid_alive(pid):
            return "stale", holder, age
        start = holder.get("start")
        if start is not None and process_start(pid) not in (None, start):
            return "stale", holder, age  # the PID now belongs to another process
        return ("busy" if age <= STALE_HEARTBEAT_S else "unverified"), holder, age

    def _take_over(self, holder: dict[str, object] | None) -> None:
        """Remove a stale lock without removing a fresh one another waiter just created."""
        aside = self.path.with_name(f".{self.path.name}.stale.{os.getpid()}.{uuid.uuid4().hex[:8]}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        try:
            moved = _parse(aside.read_text())
        except (OSError, UnicodeDecodeError):
            moved = None
        if moved != holder:  # someone else took it over first and holds it now: put it back
            with contextlib.suppress(FileExistsError, OSError):
                os.link(aside, self.path)
        aside.unlink(missing_ok=True)

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            with contextlib.suppress(OSError):
                os.utime(self.path)


def _who(holder: dict[str, object] | None) -> str:
    if holder is None:
        return "an unknown process (unreadable lock file)"
    return f"host {holder.get('host')!s} pid {holder.get('pid')!s}"
