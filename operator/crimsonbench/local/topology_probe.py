"""What the planner needs to know of this machine: its CPU topology (the real lscpu), and
the room a run would have (available memory, free disk where the cluster will be)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from crimsonbench.plan.capacity import Measured
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.plan.types import Topology
from crimsonbench.spec.models import LocalTarget

LSCPU_ARGS = ("lscpu", "-e=CPU,NODE,SOCKET,CORE,ONLINE", "--json")


def local_topology() -> Topology:
    out = subprocess.run(LSCPU_ARGS, check=True, capture_output=True, text=True, timeout=30)
    return parse_lscpu_json(out.stdout)


def local_room(target: LocalTarget) -> Measured:
    """MemAvailable, and the free space of the nearest existing directory of the cluster's
    (workDir, else the temporary directory a cluster is made in)."""
    where = Path(target.work_dir or tempfile.gettempdir()).absolute()
    while not where.exists() and where != where.parent:
        where = where.parent
    return Measured(_mem_available(), shutil.disk_usage(where).free, str(where))


def _mem_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
