"""Kind workers whose kubelets declare more CPUs than this machine has (scheduling
arithmetic only).

Why: the VM has 2 CPUs, and every kind node reports all of them (three nodes already claim
6 CPUs of capacity on 2 real ones). A benchmark worker runs an OSD (Guaranteed, 1 whole
CPU) and a fio server (Guaranteed, 1 whole CPU); with 2 CPUs of capacity nothing else fits
beside them, not even the CNI agent's 10m or the step's fio client Job (100m, pinned to the
first client node), which then stays Pending. Declaring 4 CPUs is the same overcommit kind
already does, one step further; what the pods see and are pinned to is unchanged.

How: the kubelet's CPU capacity is cAdvisor's count of the CPU directories
(/sys/devices/system/node/node*/cpu*) it finds online; the CPU set it writes into the
kubepods cgroup is the set of their ids. The workers get a copy of node0 in which every real
CPU appears several times under names with the same id (cpu1, cpu01, cpu001: cAdvisor reads
the id from the digits; each copy a core of its own), bind-mounted read-only over
/sys/devices/system/node (kind extraMounts): N directories, the real ids, so the cgroup
cpusets stay valid. Only the node container's mount namespace sees it: containers, pods
included, mount a fresh sysfs, so `lscpu` in a pod (our topology probe) still shows the
machine's real CPUs. The static CPU manager must stay off (its exclusive CPUs would be
counted N/real times).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

SYS_NODE = Path("/sys/devices/system/node")
SYS_CPU = Path("/sys/devices/system/cpu")


def real_cpus() -> list[int]:
    """The online CPU ids (the /sys/devices/system/cpu/online list)."""
    out: list[int] = []
    for part in (SYS_CPU / "online").read_text().strip().split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def declared_cpu_mounts(dest: Path, cpus: int) -> list[dict[str, Any]]:
    """Write a node0 with CPUS CPU directories over the real CPU ids under DEST; the kind
    extraMount that shows it to a node."""
    real = real_cpus()
    if cpus < len(real):
        raise ValueError(f"declared CPUs ({cpus}) below the real ones ({len(real)})")
    node = dest / "sysfs-node"
    node0 = node / "node0"
    if node.exists():
        shutil.rmtree(node)
    node0.mkdir(parents=True)
    real0 = SYS_NODE / "node0"
    for name in ("meminfo", "distance", "cpulist"):  # per-NUMA-node memory, as it is
        if (real0 / name).is_file():
            (node0 / name).write_text((real0 / name).read_text())
    for i in range(cpus):
        cpu, copy = real[i % len(real)], i // len(real)
        name = "cpu" + "0" * copy + str(cpu)  # cpu1, cpu01, ...: id 1
        topo = node0 / name / "topology"
        topo.mkdir(parents=True)
        real_topo = SYS_CPU / f"cpu{cpu}" / "topology"
        core = int((real_topo / "core_id").read_text())
        # a copy is a core of its own: the kubelet refuses a core listing one CPU twice
        (topo / "core_id").write_text(f"{core + 1000 * copy}\n")
        (topo / "physical_package_id").write_text((real_topo / "physical_package_id").read_text())
    return [{"hostPath": str(node), "containerPath": str(SYS_NODE), "readOnly": True}]
