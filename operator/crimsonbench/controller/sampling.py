"""OSD and fio CPU/memory on Kubernetes, sampled from the metrics API (metrics.k8s.io,
served by metrics-server) once per reconcile tick while a step's Job runs.

The source used is recorded per step (extra.metrics_source) and in the MetricsSource
condition: "metrics.k8s.io", or "none" when the API is not served (the columns are n/a).

And once a step is done, each fio server's CPU log (manifests/cpu-sampler.sh): what else
ran on the client nodes' planned CPUs, for the step's verdict (results/node_cpu.py).
"""

from __future__ import annotations

import time

from crimsonbench.controller.decisions.observed import quantity
from crimsonbench.controller.kube_errors import KubeError
from crimsonbench.controller.run_context import RunContext
from crimsonbench.errors import CrimsonBenchError
from crimsonbench.manifests import fio
from crimsonbench.manifests.naming import LABEL_ROLE, LABEL_RUN, label_value
from crimsonbench.plan.types import RunPlan
from crimsonbench.spec.status import StepSample

MAX_SAMPLES = 720  # an hour of 5 s ticks; status stays small


def _pod_usage(ctx: RunContext, namespace: str, selector: str) -> tuple[float, float] | None:
    """(CPU cores, memory bytes) summed over matching pods, or None if the API is absent."""
    items = ctx.kube.pod_metrics(namespace, selector)
    if items is None:
        return None
    cpu = mem = 0.0
    for pod in items:
        for c in pod.get("containers", []):
            cpu += quantity(c["usage"]["cpu"])
            mem += quantity(c["usage"]["memory"])
    return cpu, mem


def sample_step(ctx: RunContext, fio_namespace: str, plan: RunPlan) -> None:
    """Append one sample for the running step to status.stepSamples: the run's fio
    servers (they run every job) and the planned OSDs' pods."""
    status = ctx.record.status
    osd_ns = ctx.target.rook_namespace
    servers = f"{LABEL_RUN}={label_value(ctx.child)},{LABEL_ROLE}=fio-server"
    fio = _pod_usage(ctx, fio_namespace, servers)
    ids = ",".join(str(o.osd_id) for o in plan.osds)
    osds = f"app=rook-ceph-osd,ceph-osd-id in ({ids})"
    osd = _pod_usage(ctx, osd_ns, osds) if osd_ns and ids else (0.0, 0.0)
    if fio is None or osd is None:
        status.metrics_source = "none"
        ctx.record.condition(
            "MetricsSource",
            False,
            "NoMetricsAPI",
            "metrics.k8s.io is not served; OSD_cpu, OSD_mem and FIO_cpu are n/a",
        )
        return
    sample = StepSample(t=round(time.time(), 1), osd_cpu=osd[0] * 100,
                        osd_mem_mib=osd[1] / 2**20, fio_cpu=fio[0] * 100)  # fmt: skip
    status.step_samples = [*status.step_samples[-MAX_SAMPLES + 1 :], sample]
    status.metrics_source = "metrics.k8s.io"
    ctx.record.condition("MetricsSource", True, "MetricsAPI", "sampled from metrics.k8s.io")


def client_cpu_logs(
    ctx: RunContext, namespace: str, plan: RunPlan, seconds: int
) -> dict[str, str | None]:
    """client -> the newest lines of its fio server's container log, where its CPU sampler
    writes a line a second (`seconds` of them and fio's few); None where it could not be
    read (the step's verdict says so: unjudged, not valid)."""
    logs: dict[str, str | None] = {}
    for c in plan.clients:
        try:
            job = fio.server_job_name(ctx.child, c.name)
            logs[c.name] = ctx.kube.job_log(namespace, job, tail_lines=seconds) or None
        except (KubeError, CrimsonBenchError, OSError) as exc:
            ctx.logger.warning("the CPU log of client %s: %s", c.name, str(exc)[:300])
            logs[c.name] = None
    return logs
