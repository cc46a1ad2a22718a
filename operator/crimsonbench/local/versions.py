"""What is installed: the Ceph version, and the option names its daemons know (to name
crimson options before any daemon runs)."""

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


def known_options(userland: Userland | None = None) -> set[str] | None:
    """Every option name the userland's Ceph was built with (`ceph-conf -D` prints the
    compiled-in defaults of the same libceph-common the daemons load): asking the
    programs beats a version table. None when ceph-conf is not there."""
    ul = userland or Userland()
    if ul.which("ceph-conf") is None:
        return None
    out = run(["ceph-conf", "-c", "/dev/null", "-D"], timeout=30, userland=ul)
    return {line.split(" = ", 1)[0].strip() for line in out.splitlines() if " = " in line}
