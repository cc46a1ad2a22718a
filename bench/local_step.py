"""One planned step on a throwaway local cluster, ready to run: what the local benches share.

The OSD on the first CPU, the client on the last, memstore (the cluster is not what these
benches measure), images created and prefilled as a run would.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from crimsonbench.local.cluster import LocalCluster
from crimsonbench.local.step_exec import StepContext
from crimsonbench.local.topology_probe import local_topology
from crimsonbench.plan.build import build_plan
from crimsonbench.plan.types import RunPlan, Step
from crimsonbench.spec.models import validate_spec


@dataclass(frozen=True)
class StepShape:
    images: int
    processes: int  # fio jobs per image
    image_size: str
    iodepth: int
    runtime: int
    ramp: int
    preset: str = "randread4k"


@contextmanager
def prefilled_step(shape: StepShape) -> Iterator[tuple[RunPlan, Step, StepContext]]:
    """(plan, its one step, the executor's context) while the cluster is up."""
    cpus = sorted(os.sched_getaffinity(0))
    spec = validate_spec({
        "target": {"local": {}},
        "osd": {"flavor": "classic", "objectStore": "memstore", "cpuSet": str(cpus[0])},
        "client": {"cpuSet": str(cpus[-1]), "images": shape.images,
                   "processesPerImage": shape.processes, "imageSize": shape.image_size},
        "workloads": [{"preset": shape.preset}],
        "sweep": {"iodepths": [shape.iodepth], "runtimeSeconds": shape.runtime,
                  "rampSeconds": shape.ramp},
    })  # fmt: skip
    plan = build_plan("bench", spec, local_topology())
    local = spec.target.local
    assert local is not None  # noqa: S101  (validate_spec keeps the target given)
    with LocalCluster(local, spec.osd, plan.local_host.cpu.osds, plan.ceph) as cluster:
        cluster.create_pool("rbd", 32, plan.client_options)
        cluster.create_images(plan.images, plan.pool.image_size_bytes)
        cluster.prefill(plan.images, plan.pool.image_size_bytes)
        env = {**os.environ, **cluster.client_conf().env}
        ctx = StepContext(
            plan=plan, env=env, osd_pids=cluster.osd_pids, health_check=cluster.health_check
        )
        yield plan, plan.steps[0], ctx
