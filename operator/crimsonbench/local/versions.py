"""What is installed here: the Ceph version (to name crimson options before any daemon runs)."""

from __future__ import annotations

import re
import shutil
import subprocess

from crimsonbench.errors import ExecutionError

_VERSION = re.compile(r"ceph version (\d+\.\d+\.\d+)")


def installed_ceph_version() -> str:
    """From `ceph --version`, e.g. "16.2.15"."""
    if shutil.which("ceph") is None:
        raise ExecutionError("the ceph CLI is not installed; run ./scripts/setup.sh (ceph-common)")
    out = subprocess.run(["ceph", "--version"], capture_output=True, text=True, timeout=30)
    m = _VERSION.search(out.stdout)
    if not m:
        raise ExecutionError(f"cannot read a version from `ceph --version`: {out.stdout!r}")
    return m.group(1)
