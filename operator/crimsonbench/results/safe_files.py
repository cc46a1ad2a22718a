"""Files of a results directory as untrusted input and as atomic output: plain names
only, JSON read without following links, of bounded size and strictly parsed
(results.checked_json), and every write whole or not at all (temporary file, fsync,
rename). The errors name the path and say what is wrong."""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any

from crimsonbench.errors import CrimsonBenchError
from crimsonbench.results import checked_json as cj

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
MAX_JSON_BYTES = 32 * 2**20  # a step result is ~2 KiB (+8 bytes per second of IOPS log)


class NotAResultsDirectory(CrimsonBenchError, ValueError):
    """The directory holds no results, or none that can be used (the message says why)."""


class UnsafePath(NotAResultsDirectory):
    """A path the store will not read or write: a symbolic link below the root, a name
    that is not a plain file name, or a place outside the root."""


def read_json(path: Path, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """A JSON file of a results directory, as untrusted input: FileNotFoundError when
    missing; OSError or checked_json.ResultFormatError (a ValueError) saying what is wrong
    with it otherwise. Links are not followed, only regular files of at most max_bytes
    are read, and the JSON must be strict (results.checked_json)."""
    st = os.lstat(path)  # FileNotFoundError when missing
    if stat.S_ISLNK(st.st_mode):
        raise cj.ResultFormatError(f"is a symbolic link (to {os.readlink(path)}); not followed")
    if stat.S_ISDIR(st.st_mode):
        raise cj.ResultFormatError("is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise cj.ResultFormatError("is not a regular file")
    if st.st_size > max_bytes:
        raise cj.ResultFormatError(
            f"is {st.st_size} bytes, more than the {max_bytes // 2**20} MiB such a file can be"
        )
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise cj.ResultFormatError(f"grew past {max_bytes // 2**20} MiB while read")
    if not data.strip():
        raise cj.ResultFormatError("is empty")
    return cj.loads(data)


def reason(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc)


def is_safe_name(name: str) -> bool:
    """A plain file name: letters, digits, . _ - (not first), no "..", 1-200 characters."""
    return bool(SAFE_NAME.match(name)) and ".." not in name


def safe_name(name: str, what: str) -> str:
    """name, if it can be a file name in a directory we write (else UnsafePath)."""
    if not is_safe_name(name):
        raise UnsafePath(f"{what} {name!r} is not a safe file name (letters, digits, . _ -)")
    return name


def write_json(path: Path, data: Any) -> Path:
    # allow_nan=False: the files stay strict JSON for jq and other tools
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n")
    return path


def write_atomic(path: Path, data: str | bytes) -> Path:
    """PATH holds DATA whole or keeps what it held: a temporary file, fsync, rename. A
    link at PATH is replaced, not written through (ResultStore checks the directories)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)
    return path


def _fsync_dir(path: Path) -> None:
    # makes the rename itself survive a power cut; not every filesystem allows it
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
