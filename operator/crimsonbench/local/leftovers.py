"""What a dead local run left behind, found by its record and removed by the next run.

A run killed outright (SIGKILL, OOM killer, power loss of the terminal's machine but not
this one) cannot tear its cluster down: its daemons run in their own sessions, fio in its
own process group, loop devices and a Ceph root's mounts stay. Its record (claims.RunRecord)
says where all of it is; the record's lock is free once the run is gone, and only then is
anything touched. Runs of older versions wrote no record: nothing of theirs is touched.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from crimsonbench.local import aio, procs
from crimsonbench.local.claims import RECORD_GLOB, lock_dir, read, trusted, try_lock
from crimsonbench.local.cleanup import destroy
from crimsonbench.results.store import (
    LOCK_FILE,
    MARKER_FILE,
    NotAResultsDirectory,
    ResultStore,
)
from crimsonbench.spec.status import Phase

log = logging.getLogger(__name__)


def reap_dead_runs() -> list[str]:
    """Remove what every dead run recorded; one line per run removed (what and whose)."""
    done: list[str] = []
    for path in sorted(lock_dir().glob(RECORD_GLOB)):
        with _if_dead(path) as record:
            if record is None:
                continue
            left = _remove(record)
            line = _describe(record) + (f"; could not remove: {'; '.join(left)}" if left else "")
            log.warning("removed the leftovers of a dead run: %s", line)
            done.append(line)
            if not left:
                path.unlink(missing_ok=True)
    return done


@contextlib.contextmanager
def _if_dead(path: Path) -> Iterator[dict[str, Any] | None]:
    """The record, locked, when its run is gone (and it is still that file); else None."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:  # removed meanwhile, or another user's we may not open
        yield None
        return
    try:
        if not trusted(fd) or not try_lock(fd) or _replaced(path, fd):
            yield None
            return
        try:
            record = json.loads(read(fd))
        except json.JSONDecodeError:
            record = None
        yield record if isinstance(record, dict) else None
    finally:
        os.close(fd)


def _replaced(path: Path, fd: int) -> bool:
    """Another reaper removed the file between our open and our lock."""
    try:
        return os.stat(path).st_ino != os.fstat(fd).st_ino
    except FileNotFoundError:
        return True


def _remove(record: dict[str, Any]) -> list[str]:
    left: list[str] = []
    results = _results_dir(record.get("results"))
    if results is not None:
        _kill_fio(results)  # before the OSDs go: fio would wait for them
    root = _cluster_dir(record.get("root"))
    if root is not None:
        left += destroy(root)
        if not record.get("made_root", True):
            root.mkdir(exist_ok=True)  # the user's workDir stays, empty, as handed over
    changed = record.get("aio")
    if isinstance(changed, list) and len(changed) == 2 and all(type(v) is int for v in changed):
        left += aio.put_back(changed[0], changed[1])
    if results is not None:
        _mark_failed(Path(results), record)
    return left


# what a cluster directory holds (bootstrap.Layout); anything else there: not ours
_CLUSTER_NAMES = (
    "ceph.conf",
    "client.conf",
    "run",
    "log",
    "crash",
    "monmap",
    "mon.",
    "mgr.",
    "osd.",
    "ceph.client.admin.keyring",
    "ceph-root-mount",
    "tmp",
)  # fmt: skip  (tmp*.conf: CephCli.set_config's file)


def _cluster_dir(value: object) -> Path | None:
    """The recorded cluster directory, if it still looks like one a run made: absolute,
    below a directory of its own, holding only a cluster's files."""
    if not isinstance(value, str) or not value.startswith("/") or "/../" in value + "/":
        return None
    root = Path(value)
    if len(root.parts) < 3:
        return None
    if root.is_dir() and not all(e.name.startswith(_CLUSTER_NAMES) for e in root.iterdir()):
        log.warning("%s holds files no cluster makes: left alone", root)
        return None
    return root


def _results_dir(value: object) -> str | None:
    """The recorded results directory, if it is one (our marker in it)."""
    if not isinstance(value, str) or not value.startswith("/"):
        return None
    return value if (Path(value) / MARKER_FILE).is_file() else None


def _kill_fio(results: str) -> None:
    """The dead run's fio: its command line names a job file in the results directory."""
    for pid in procs.processes_mentioning(results.rstrip("/") + "/steps/"):
        if procs.program(pid) == "fio":
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _mark_failed(results: Path, record: dict[str, Any]) -> None:
    """Its status.json still says Running: it says how the run ended, unless another run
    holds the directory (resuming it: that run writes its own status)."""
    store = ResultStore(results)
    lock = results / LOCK_FILE
    try:
        if not lock.is_file() or lock.is_symlink():
            return
        with lock.open("rb") as fh:
            if not try_lock(fh.fileno()):
                return
            status = store.read_status()
            if status.finished:
                return
            status.phase = Phase.FAILED
            status.message = (
                f"the run (pid {record.get('pid')}) died without cleaning up; its "
                f"cluster was removed by the run of pid {os.getpid()}; finished steps are kept"
            )
            store.write_status(status.stamped())
    except (OSError, NotAResultsDirectory) as exc:
        log.warning("status of the dead run in %s not updated: %s", results, exc)


def _describe(record: dict[str, Any]) -> str:
    what = f"pid {record.get('pid')}"
    for key in ("run", "results", "root"):
        if record.get(key):
            what += f", {key} {record[key]}"
    return what
