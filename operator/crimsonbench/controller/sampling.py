"""OSD and fio CPU/memory on Kubernetes, sampled from the metrics API (metrics.k8s.io,
served by metrics-server) once per reconcile tick while a step's Job runs.

The source used is recorded per step (extra.metrics_source) and in the MetricsSource
condition: "metrics.k8s.io", or "none" when the API is not served (the columns are n/a).
"""

from __future__ import annotations

import time
from typing import Any

from kubernetes.client.exceptions import ApiException

from crimsonbench.controller.decide import quantity
from crimsonbench.controller.run_context import RunContext
from crimsonbench.manifests.naming import LABEL_ROLE, LABEL_RUN, label_value
from crimsonbench.plan.types import RunPlan
from crimsonbench.results.types import ResourceSample, ResourceSummary

MAX_SAMPLES = 720  # an hour of 5 s ticks; status stays small


def _pod_usage(ctx: RunContext, namespace: str, selector: str) -> tuple[float, float] | None:
    """(CPU cores, memory bytes) summed over matching pods, or None if the API is absent."""
    try:
        items = ctx.kube.custom.list_namespaced_custom_object(
            "metrics.k8s.io", "v1beta1", namespace, "pods", label_selector=selector
        )["items"]
    except ApiException as exc:
        if exc.status in (404, 503):
            return None
        raise
    cpu = mem = 0.0
    for pod in items:
        for c in pod.get("containers", []):
            cpu += quantity(c["usage"]["cpu"])
            mem += quantity(c["usage"]["memory"])
    return cpu, mem


def sample_step(ctx: RunContext, fio_namespace: str, plan: RunPlan) -> None:
    """Append one sample for the running step to status.stepSamples: the run's fio
    servers (they run every job) and the planned OSDs' pods."""
    osd_ns = ctx.target.rook_namespace
    servers = f"{LABEL_RUN}={label_value(ctx.name)},{LABEL_ROLE}=fio-server"
    fio = _pod_usage(ctx, fio_namespace, servers)
    ids = ",".join(str(o.osd_id) for o in plan.osds)
    osds = f"app=rook-ceph-osd,ceph-osd-id in ({ids})"
    osd = _pod_usage(ctx, osd_ns, osds) if osd_ns and ids else (0.0, 0.0)
    if fio is None or osd is None:
        ctx.set(metricsSource="none")
        ctx.condition(
            "MetricsSource",
            False,
            "NoMetricsAPI",
            "metrics.k8s.io is not served; OSD_cpu, OSD_mem and FIO_cpu are n/a",
        )
        return
    samples: list[dict[str, Any]] = list(ctx.get("stepSamples") or [])[-MAX_SAMPLES + 1 :]
    samples.append({"t": round(time.time(), 1), "osdCpu": osd[0] * 100,
                    "osdMemMib": osd[1] / 2**20, "fioCpu": fio[0] * 100})  # fmt: skip
    ctx.set(stepSamples=samples, metricsSource="metrics.k8s.io")
    ctx.condition("MetricsSource", True, "MetricsAPI", "sampled from metrics.k8s.io")


def summarize(ctx: RunContext) -> tuple[ResourceSummary, str]:
    from crimsonbench.results.resources import summarize_samples

    raw = ctx.get("stepSamples") or []
    samples = [ResourceSample(t=s["t"], osd_cpu=s["osdCpu"], osd_mem_mib=s["osdMemMib"],
                              fio_cpu=s["fioCpu"]) for s in raw]  # fmt: skip
    return summarize_samples(samples), str(ctx.get("metricsSource") or "none")
