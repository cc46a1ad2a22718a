"""A full disk mid-run: one line saying where, and the run's status still written.

A filesystem that is full takes no new file, not even the few hundred bytes of a final
status.json (written whole: a new file, then a rename). So a run sets a little space aside
in its results directory when it starts and gives it back to write how it ended.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from pathlib import Path

from crimsonbench.results.store import RESERVE_FILE

RESERVE_BYTES = 1 << 20  # status.json with a long skipped list is ~100 KiB at most
FULL = (errno.ENOSPC, errno.EDQUOT)


class Reserve:
    """RESERVE_BYTES held in the results directory until release()."""

    def __init__(self, results_dir: Path) -> None:
        self.path = results_dir / RESERVE_FILE

    def take(self) -> None:
        """Best effort: a disk too full for it fails the run's first write anyway."""
        with contextlib.suppress(OSError):
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                os.posix_fallocate(fd, 0, RESERVE_BYTES)  # real blocks, not a sparse file
            finally:
                os.close(fd)

    def release(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()


def full_disk(exc: BaseException, results_dir: Path) -> str | None:
    """The one-line message for a write that found its filesystem full; None otherwise.
    (A write into an open file names no file: the results directory is named then.)"""
    if not isinstance(exc, OSError) or exc.errno not in FULL:
        return None
    where = str(exc.filename or f"a file in {results_dir}")
    free = ""
    with contextlib.suppress(OSError, TypeError, ValueError):
        at = Path(exc.filename).parent if exc.filename else results_dir
        free = f" ({shutil.disk_usage(at).free // 2**20} MiB free now)"
    return (
        f"the disk is full: writing {where} failed ({os.strerror(exc.errno)}){free}; free "
        "space there or pick another --results (or target.local.workDir); finished steps "
        "are kept and a run with the same --results resumes"
    )
