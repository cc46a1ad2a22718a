"""Read this machine's CPU topology with the real lscpu."""

from __future__ import annotations

import subprocess

from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.plan.types import Topology

LSCPU_ARGS = ("lscpu", "-e=CPU,NODE,SOCKET,CORE,ONLINE", "--json")


def local_topology() -> Topology:
    out = subprocess.run(LSCPU_ARGS, check=True, capture_output=True, text=True, timeout=30)
    return parse_lscpu_json(out.stdout)
