"""Which fio a local run starts on this machine (a Ceph root runs its own).

Ours first: scripts/build-fio.sh builds Debian's fio source with the patches of
images/fio/ (the runner image's fio, so both executors run the same one) and setup.sh links
it beside this Python (.venv/bin/fio). Stock fio 3.33 connects every job's image one after
the other before any job starts (~7 s a step at 32 images x 4 processes); ours connects
them all at once (images/fio/README.md). $CRIMSONBENCH_FIO names another (e.g. /usr/bin/fio
to compare with stock); without either, the fio on PATH.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from crimsonbench.errors import ExecutionError

FIO_ENV = "CRIMSONBENCH_FIO"


def _runnable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def host_fio(environ: Mapping[str, str] | None = None, beside: Path | None = None) -> str:
    """The fio program to run: $CRIMSONBENCH_FIO, else ours beside this Python, else "fio"
    (PATH). A $CRIMSONBENCH_FIO that cannot run is refused, naming it."""
    env = os.environ if environ is None else environ
    named = env.get(FIO_ENV, "").strip()
    if named:
        if not _runnable(Path(named)):
            raise ExecutionError(
                f"${FIO_ENV}={named} is not an executable file; point it at a fio "
                "(e.g. /usr/bin/fio) or unset it to run ours (scripts/build-fio.sh)"
            )
        return named
    ours = (beside or Path(sys.executable).parent) / "fio"
    return str(ours) if _runnable(ours) else "fio"
