"""What a local run claims on this machine, as files under one lock directory that every
run of every user shares: its CPUs (cpu-N) and its record (run-*.json, what a later run
must remove if this one dies: local/leftovers.py).

Each claim is an flock held for the run's life. The kernel drops it when the process
ends, however it ends, so a killed run never leaves a CPU claimed, and a record whose lock
can be taken belongs to a run that is gone.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from crimsonbench.errors import ExecutionError, InvalidSpec
from crimsonbench.spec.cpuset import format_cpuset

LOCK_DIR = Path("/run/lock/crimsonbench")
MAX_HOLDER_BYTES = 4096
RECORD_GLOB = "run-*.json"


def lock_dir() -> Path:
    """The shared directory, made world-writable and sticky (like /run/lock) so runs of
    other users can claim CPUs too but not remove each other's files. One someone else
    made (a link, a directory of another user's) is not used."""
    try:
        if not LOCK_DIR.exists() and not LOCK_DIR.is_symlink():
            with contextlib.suppress(FileExistsError):
                LOCK_DIR.mkdir(parents=True)
                LOCK_DIR.chmod(0o1777)
        st = LOCK_DIR.lstat()
    except OSError as exc:
        raise ExecutionError(f"cannot make the lock directory {LOCK_DIR}: {exc}") from None
    if (
        not stat.S_ISDIR(st.st_mode)
        or st.st_uid not in (0, os.geteuid())
        or (st.st_mode & 0o002 and not st.st_mode & stat.S_ISVTX)
    ):
        raise ExecutionError(
            f"{LOCK_DIR} is not a directory of root's or yours (or is writable by all and not "
            "sticky): runs cannot claim CPUs there; remove it (a run makes it again)"
        )
    return LOCK_DIR


def open_lock(path: Path, shared: bool = True) -> int:
    """A lock file: shared ones (CPUs) readable and writable by every user, a run's record
    by its owner alone (a later run acts on what it says). Never through a link."""
    mode = 0o666 if shared else 0o600
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        raise ExecutionError(
            f"cannot open the lock file {path}: {exc.strerror}; if another user made it, "
            "remove it (a run makes it again)"
        ) from None
    with contextlib.suppress(PermissionError):
        if os.fstat(fd).st_uid == os.geteuid():
            os.fchmod(fd, mode)
    return fd


def trusted(fd: int) -> bool:
    """Written by this user and by nobody else (the lock directory is world-writable)."""
    st = os.fstat(fd)
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


def try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def put(fd: int, text: str) -> None:
    """Replace the file's text (its holder, who alone writes it)."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode()[:MAX_HOLDER_BYTES], 0)


def read(fd: int) -> str:
    return os.pread(fd, MAX_HOLDER_BYTES, 0).decode(errors="replace").strip()


class CpuClaim:
    """The run's CPUs, claimed one lock file each (cpu-N): a second run pinning any of them
    is refused, or waits up to wait_s, naming the run that holds them."""

    def __init__(self, fields: Mapping[int, str], holder: str) -> None:
        """fields: each CPU -> the spec field that put it in the run (named if it is busy)."""
        self.cpus = sorted(fields)
        self.fields, self.holder = dict(fields), holder
        self._fds: dict[int, int] = {}

    def __enter__(self) -> CpuClaim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self, wait_s: float = 0.0, waiting: Callable[[str], None] | None = None) -> bool:
        """All or nothing; InvalidSpec naming the holders when not free within wait_s.
        Returns whether they were free at once (False: it waited for them)."""
        deadline = time.monotonic() + wait_s
        told, waited = "", False
        while (busy := self._try_all()) is not None:
            waited = True
            text = self._busy_text(busy)
            if time.monotonic() >= deadline:
                raise InvalidSpec(self.fields[min(busy)], text + self._advice(wait_s))
            if waiting is not None and text != told:
                waiting(f"waiting for CPUs: {text}")
                told = text
            time.sleep(1.0)
        return not waited

    def _try_all(self) -> dict[int, str] | None:
        """None when every CPU is ours now; else CPU -> its holder (none kept)."""
        directory = lock_dir()
        busy: dict[int, str] = {}
        for cpu in self.cpus:
            fd = open_lock(directory / f"cpu-{cpu}")
            if try_lock(fd):
                self._fds[cpu] = fd
            else:
                busy[cpu] = read(fd) or "a run that has not said who it is yet"
                os.close(fd)
        if not busy:
            for fd in self._fds.values():
                put(fd, self.holder)
            return None
        self.release()
        return busy

    def _busy_text(self, busy: dict[int, str]) -> str:
        by_holder: dict[str, list[int]] = {}
        for cpu, holder in busy.items():
            by_holder.setdefault(holder, []).append(cpu)
        return "; ".join(
            f"CPU {format_cpuset(cpus)} {'is' if len(cpus) == 1 else 'are'} pinned by {holder}"
            for holder, cpus in by_holder.items()
        )

    @staticmethod
    def _advice(wait_s: float) -> str:
        waited = f" (waited {wait_s:.0f} s)" if wait_s else ""
        return (
            f"{waited}: two runs on the same CPUs would measure each other; wait for it, "
            "pick other CPUs (osd.cpuSet, client.cpuSet), or queue with --wait-cpus SECONDS"
        )

    def release(self) -> None:
        for fd in self._fds.values():
            os.close(fd)  # closing the last descriptor drops the lock
        self._fds.clear()


class RunRecord:
    """This run's record (run-<pid>-<id>.json): locked while the run lives, its text what
    a later run removes if this one dies (local/leftovers.py reads it)."""

    def __init__(self, data: dict[str, Any]) -> None:
        directory = lock_dir()
        name = f"run-{os.getpid()}-{uuid.uuid4().hex[:8]}.json"
        # locked under a name no reaper globs, then renamed: never seen unlocked
        tmp = directory / f".{name}.new"
        self._fd = open_lock(tmp, shared=False)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        self.data = {"pid": os.getpid(), **data}
        put(self._fd, json.dumps(self.data))
        self.path = directory / name
        os.rename(tmp, self.path)

    def note(self, **items: Any) -> None:
        """Add what a dead run's successor must know (written at once: a SIGKILL may come
        next)."""
        self.data.update(items)
        put(self._fd, json.dumps(self.data))
        os.fsync(self._fd)

    def close(self, keep: bool) -> None:
        """keep: the run leaves something behind, so the next run finds the record (its
        lock drops now); else the record goes."""
        if self._fd < 0:
            return
        if not keep:
            self.path.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = -1
