"""What is installed: the Ceph version (to name crimson options before any daemon runs)."""

from __future__ import annotations

import re

from crimsonbench.errors import ExecutionError
from crimsonbench.local.ceph_cli import run
from crimsonbench.local.userland import Userland

_VERSION = re.compile(r"ceph version (\d+\.\d+\.\d+)")


def installed_ceph_version(userland: Userland | None = None) -> str:
    """From `ceph --version` in the userland (default this machine), e.g. "16.2.15"."""
    ul = userland or Userland()
    if ul.which("ceph") is None:
        raise ExecutionError(
            f"the ceph CLI is not in {ul.describe()}; run ./scripts/setup.sh (ceph-common)"
        )
    out = run(["ceph", "--version"], timeout=30, userland=ul)
    m = _VERSION.search(out)
    if not m:
        raise ExecutionError(f"cannot read a version from `ceph --version`: {out!r}")
    return m.group(1)
