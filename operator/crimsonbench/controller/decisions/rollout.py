"""Rook's OSD pods, decided on: rolled out as planned, at rest before a step, restarted
during one, back to the original after the restore. Pure functions of the pods observed
(observed.OsdPod) and the plan; "not yet" is a NotReady returned for the caller to raise,
"done" the message saying so."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crimsonbench.controller.decisions.observed import OsdPod, quantity
from crimsonbench.errors import ExecutionError, NotReady
from crimsonbench.plan.types import RunPlan


def rollout(
    plan: RunPlan,
    placement: Mapping[int, str],
    pods: Sequence[OsdPod],
    cluster_status: Mapping[str, Any],
    patched_generation: int,
) -> str | NotReady:
    """Rook reconciled our generation, every planned OSD runs again on its own node with
    the planned resources, and is Ready. An OSD seen on another node fails the run."""
    seen = int(cluster_status.get("observedGeneration") or 0)
    phase = str(cluster_status.get("phase") or "unknown")
    if seen < patched_generation or phase != "Ready":
        return NotReady(f"Rook at generation {seen}/{patched_generation}, phase {phase}")
    want_cpu, want_mem = str(plan.osd_resources.cpu), plan.osd_resources.memory
    by_id = {p.osd_id: p for p in pods if not p.terminating}
    for osd_id, node in sorted(placement.items()):
        pod = by_id.get(osd_id)
        if pod is None or pod.node is None:
            return NotReady(f"osd.{osd_id} has no running pod yet")
        if pod.node != node:
            raise ExecutionError(
                f"osd.{osd_id} moved from node {node} to {pod.node}; a run must never move "
                "an OSD (check the CephCluster's placement)"
            )
        if (pod.cpu_limit, pod.memory_limit) != (want_cpu, want_mem):
            return NotReady(f"osd.{osd_id} not rolled out yet (limits {pod.cpu_limit})")
        if not pod.ready:
            return NotReady(f"osd.{osd_id} on {node} not Ready yet")
    return f"{len(placement)} OSDs Ready with the planned resources"


@dataclass(frozen=True)
class RolloutDone:
    """What waiting for the rollout says and does: the RolledOut condition (ok, reason,
    message), and None (rolled out), NotReady (wait) or ExecutionError (gave up)."""

    condition: tuple[bool, str, str]
    outcome: NotReady | ExecutionError | None


def rollout_done(
    plan: RunPlan, placement: Mapping[int, str], pods: Sequence[OsdPod],
    progress: str | NotReady, setup: NotReady | None, waited_s: float, timeout_s: float,
) -> RolloutDone:  # fmt: skip
    """Done when the planned OSDs are (progress: rollout, and for crimson their restart),
    Rook rolled the cluster's other OSDs to the planned size too (it sizes them all
    alike) and the crimson setup Job is done (setup None); else a wait, bounded by
    timeout_s (rolloutTimeoutSeconds) from when it began."""
    others = sorted({p.osd_id for p in pods} - set(placement))
    if not isinstance(progress, NotReady) and others:
        limits = (str(plan.osd_resources.cpu), plan.osd_resources.memory)
        progress = osds_running_with(others, pods, limits)
    if not isinstance(progress, NotReady) and setup is None:
        return RolloutDone((True, "OsdsReady", progress), None)
    message = f"waiting for Rook to roll out for {waited_s:.0f} s: {progress}" + (
        f"; {setup}" if setup else ""
    )
    if waited_s > timeout_s:
        gave_up = ExecutionError(message + "; gave up (rolloutTimeoutSeconds)")
        return RolloutDone((False, "RollingOut", message), gave_up)
    return RolloutDone((False, "RollingOut", message), NotReady(message))


def stale_after_patch(
    at_patch: Mapping[str, str], placement: Mapping[int, str], pods: Sequence[OsdPod]
) -> list[OsdPod]:
    """The planned crimson OSDs still in the pod they ran in when the run patched the
    cluster (at_patch: osd id -> incarnation then): Rook restarts an OSD only when its
    Deployment changes, and crimson reads its reactor layout only at start."""
    return [p for p in pods if not p.terminating and p.osd_id in placement
            and at_patch.get(str(p.osd_id)) == p.incarnation]  # fmt: skip


def _sole_live_pod(pods: Sequence[OsdPod], osd_id: int) -> OsdPod | NotReady:
    """The one pod of osd_id, or why not (none, more than one, or it is going)."""
    found = [p for p in pods if p.osd_id == osd_id]
    live = [p for p in found if not p.terminating]
    if len(found) != 1 or len(live) != 1:
        return NotReady(f"osd.{osd_id} has {len(live)} running and {len(found) - len(live)} "
                        "terminating pods")  # fmt: skip
    return live[0]


def osds_at_rest(plan_ids: Sequence[int], pods: Sequence[OsdPod]) -> NotReady | None:
    """None when every planned OSD has one Ready pod that is not going away; else what is
    not (a step must not start on an OSD that is restarting)."""
    for osd_id in sorted(plan_ids):
        pod = _sole_live_pod(pods, osd_id)
        if isinstance(pod, NotReady):
            return pod
        if not pod.ready:
            return NotReady(f"osd.{osd_id} is not Ready")
    return None


def osd_incarnations(plan_ids: Sequence[int], pods: Sequence[OsdPod]) -> dict[str, str]:
    """osd id -> incarnation of its live pod, for the planned OSDs (recorded at step start)."""
    live = {p.osd_id: p for p in pods if not p.terminating}
    return {str(i): live[i].incarnation for i in sorted(plan_ids) if i in live}


def osd_disturbance(before: Mapping[str, str], pods: Sequence[OsdPod]) -> str:
    """'' when every OSD recorded at a step's start still runs as the same daemon (same pod,
    same container restart count) and is Ready; else which OSD restarted or is down: that
    step measured a cluster in recovery, not the one planned."""
    now = {str(p.osd_id): p for p in pods if not p.terminating}
    out = []
    for osd_id, was in sorted(before.items(), key=lambda kv: int(kv[0])):
        pod = now.get(osd_id)
        if pod is None:
            out.append(f"osd.{osd_id} has no pod (was {was})")
        elif pod.incarnation != was:
            out.append(f"osd.{osd_id} restarted during the step (pod/restarts {was} -> "
                       f"{pod.incarnation})")  # fmt: skip
        elif not pod.ready:
            out.append(f"osd.{osd_id} is not Ready")
    return "; ".join(out)


Limits = tuple[str | None, str | None]  # (cpu, memory); None: no limit


def original_osd_limits(original_spec: Mapping[str, Any], device_class: str = "") -> list[Limits]:
    """The (cpu, memory) limits an OSD of `device_class` may run with under the CephCluster
    spec recorded before the run: Rook >= 1.19 takes resources.osd-<class> when the spec
    has it, older Rook and OSDs of other classes resources.osd (None where it sets none).
    With the class unknown, any osd-<class> of the spec."""
    resources = original_spec.get("resources") or {}
    keys = [k for k in resources if k.startswith("osd-")]
    if device_class:
        keys = [k for k in keys if k == f"osd-{device_class}"]
    out = []
    for key in [*keys, "osd"]:
        limits = (resources.get(key) or {}).get("limits") or {}
        cpu, mem = limits.get("cpu"), limits.get("memory")
        out.append((None if cpu is None else str(cpu), None if mem is None else str(mem)))
    return out


def _same_quantity(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a is b
    try:
        return quantity(a) == quantity(b)
    except ValueError:
        return a == b


def osds_running_with(
    osd_ids: Sequence[int],
    pods: Sequence[OsdPod],
    want: Limits | Callable[[OsdPod], Sequence[Limits]],
) -> str | NotReady:
    """Every OSD of osd_ids runs one Ready pod with the (cpu, memory) limits `want` (None:
    no limit), or one of those want(pod) gives. Rook sizes every OSD pod alike, so a
    resources change rolls them all: after a run's patch (want: the plan's) and after the
    restore (want: the original's, by the pod's device class)."""
    seen: dict[Limits, None] = {}
    for osd_id in sorted(osd_ids):
        pod = _sole_live_pod(pods, osd_id)
        if isinstance(pod, NotReady):
            return pod
        allowed = want(pod) if callable(want) else [want]
        match = [w for w in allowed if _same_quantity(pod.cpu_limit, w[0])
                 and _same_quantity(pod.memory_limit, w[1])]  # fmt: skip
        if not match:
            return NotReady(f"osd.{osd_id} still has limits cpu={pod.cpu_limit} "
                            f"memory={pod.memory_limit}")  # fmt: skip
        if not pod.ready:
            return NotReady(f"osd.{osd_id} not Ready yet")
        seen[match[0]] = None
    limits = "; ".join(f"cpu={c} memory={m}" for c, m in seen) or "none"
    return f"{len(osd_ids)} OSDs Ready with limits {limits}"
