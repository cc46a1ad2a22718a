"""OSD and fio CPU/memory on Kubernetes, sampled from the metrics API (metrics.k8s.io,
served by metrics-server) once per reconcile tick while a step's Job runs.

The source used is recorded per step (extra.metrics_source) and in the MetricsSource
condition: "metrics.k8s.io", or "none" when the API is not served (the columns are n/a).

And once a step is done, each fio server's CPU log (manifests/cpu-sampler.sh): what else
ran on the client nodes' planned CPUs, for the step's verdict (results/node_cpu.py).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from crimsonbench.controller.decisions.observed import quantity
from crimsonbench.controller.kube_errors import KubeError
from crimsonbench.controller.run_context import RunContext
from crimsonbench.errors import CrimsonBenchError
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


def sample_step(ctx: RunContext, namespace: str, servers: str, osds: str | None) -> None:
    """Append one sample for the running step to status.stepSamples: the pods of the
    run's fio servers (they run every job) and of its OSDs (`osds`; None: none sampled),
    both in `namespace` (decisions/step_requests.py renders the selectors)."""
    status = ctx.record.status
    fio = _pod_usage(ctx, namespace, servers)
    osd = _pod_usage(ctx, namespace, osds) if osds else (0.0, 0.0)
    if fio is None or osd is None:
        status.metrics_source = "none"
        ctx.record.condition(
            "MetricsSource",
            False,
            "NoMetricsAPI",
            "metrics.k8s.io is not served; OSD_cpu, OSD_mem and FIO_cpu are n/a",
        )
        return
    status.metrics_source = "metrics.k8s.io"
    ctx.record.condition("MetricsSource", True, "MetricsAPI", "sampled from metrics.k8s.io")
    sample = StepSample(t=round(time.time(), 1), osd_cpu=osd[0] * 100,
                        osd_mem_mib=osd[1] / 2**20, fio_cpu=fio[0] * 100)  # fmt: skip
    status.step_samples = [*status.step_samples[-MAX_SAMPLES + 1 :], sample]


def client_cpu_logs(
    ctx: RunContext, namespace: str, jobs: Mapping[str, str], lines: int
) -> dict[str, str | None]:
    """client -> the newest `lines` of its fio server's container log (`jobs`: client ->
    its Job), where its CPU sampler writes a line a second; None where it could not be
    read (the step's verdict says so: unjudged, not valid)."""
    logs: dict[str, str | None] = {}
    for client, job in jobs.items():
        try:
            logs[client] = ctx.kube.job_log(namespace, job, tail_lines=lines) or None
        except (KubeError, CrimsonBenchError, OSError) as exc:
            ctx.logger.warning("the CPU log of client %s: %s", client, str(exc)[:300])
            logs[client] = None
    return logs
