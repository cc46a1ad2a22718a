"""The operator's decisions, as pure functions of what it observed and of the plan. The
kopf handlers and the Kubernetes client (stages.py and the *_stage modules) are the thin
shell that observes, calls these and applies what they return; these are unit-tested
without a cluster (tests/controller/test_decide.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crimsonbench.controller.osd_stores import crimson_stores
from crimsonbench.errors import ExecutionError, InvalidSpec, ParseError
from crimsonbench.manifests.fio_driver import StepReport
from crimsonbench.manifests.maintenance import OSD_STORES
from crimsonbench.plan.ceph_options import family_from_known_options
from crimsonbench.plan.types import RunPlan
from crimsonbench.spec.models import BenchmarkRunSpec, ClientSpec, Flavor, RookTarget

# ---------------------------------------------------------------- what is observed

_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)([a-zA-Z]*)$")
_SCALE = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30,
          "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}  # fmt: skip


def quantity(text: str) -> float:
    """A Kubernetes quantity ("500m", "8Gi", "1") as a number."""
    m = _QUANTITY.match(text.strip())
    if not m or m.group(2) not in _SCALE:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    return float(m.group(1)) * _SCALE[m.group(2)]


@dataclass(frozen=True)
class OsdPod:
    """A Rook OSD pod as the API shows it (label ceph-osd-id, spec.nodeName)."""

    osd_id: int
    node: str | None  # None while unscheduled
    ready: bool
    cpu_limit: str | None = None
    memory_limit: str | None = None
    terminating: bool = False
    uid: str = ""
    restarts: int = 0  # of the osd container
    name: str = ""

    @property
    def incarnation(self) -> str:
        """Changes whenever the OSD daemon is restarted: a new pod or a container restart."""
        return f"{self.uid}/{self.restarts}"


@dataclass(frozen=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str]


@dataclass(frozen=True)
class OsdMeta:
    """What `ceph osd metadata` says of one OSD; for a crimson OSD, whose metadata has no
    osd_objectstore, object_store is what the daemon itself answered (`ceph tell osd.N
    config get <store option>`, store_option names which), "" if it did not answer."""

    osd_id: int
    crimson: bool
    object_store: str
    host: str
    store_option: str = "osd_objectstore"


@dataclass(frozen=True)
class ClusterFacts:
    """What preflight reads from the cluster (manifests.maintenance.cluster_facts_job)."""

    known_options: frozenset[str]
    osds: Mapping[int, OsdMeta]
    pools: frozenset[str]

    @classmethod
    def from_sections(cls, sections: Mapping[str, str]) -> ClusterFacts:
        try:
            options = json.loads(sections["config-ls"])
            metadata = json.loads(sections["osd-metadata"])
            pools = json.loads(sections["pool-ls"])
        except (KeyError, ValueError) as exc:
            raise ParseError(f"the cluster facts Job printed no readable {exc}") from None
        stores = crimson_stores(sections.get(OSD_STORES, ""))
        return cls(
            frozenset(str(o) for o in options),
            {int(m["id"]): _osd_meta(m, stores) for m in metadata},
            frozenset(str(p) for p in pools),
        )


def _osd_meta(meta: Mapping[str, Any], stores: Mapping[int, tuple[str, str]]) -> OsdMeta:
    version = str(meta.get("ceph_version", ""))
    crimson = "crimson" in version or meta.get("osd_type") == "crimson"
    osd_id = int(meta["id"])
    if crimson:
        option, store = stores.get(osd_id, ("", ""))
        return OsdMeta(osd_id, True, store, str(meta.get("hostname", "")), option)
    return OsdMeta(osd_id, False, str(meta.get("osd_objectstore", "")),
                   str(meta.get("hostname", "")))  # fmt: skip


# ---------------------------------------------------------------- where things run


def select_osds(pods: Sequence[OsdPod], target: RookTarget) -> dict[int, str]:
    """OSD id -> node of the OSDs this run plans: every OSD Rook runs, narrowed by
    osdNodes and osdIds. An OSD that is not scheduled yet cannot be planned (NotReady is
    the caller's choice; here it is an error naming it)."""
    live = [p for p in pods if not p.terminating]
    unscheduled = sorted(p.osd_id for p in live if p.node is None)
    if unscheduled:
        raise ExecutionError(
            f"OSD(s) {unscheduled} are not running on any node; the cluster must be healthy "
            "before a run plans its OSDs"
        )
    placement = {p.osd_id: str(p.node) for p in live}
    if target.osd_nodes:
        unknown = sorted(set(target.osd_nodes) - set(placement.values()))
        if unknown:
            raise InvalidSpec(
                "spec.target.rook.osdNodes",
                f"no OSD of the cluster runs on {', '.join(unknown)} (OSDs run on "
                f"{', '.join(sorted(set(placement.values()))) or 'no node'}); OSDs are never "
                "moved, so name nodes that run OSDs",
            )
        placement = {i: n for i, n in placement.items() if n in target.osd_nodes}
    if target.osd_ids:
        missing = sorted(set(target.osd_ids) - set(placement))
        if missing:
            raise InvalidSpec(
                "spec.target.rook.osdIds",
                f"osd(s) {missing} do not run on the selected nodes (found "
                f"{sorted(placement)}); pick OSDs the cluster runs",
            )
        placement = {i: n for i, n in placement.items() if i in target.osd_ids}
    return dict(sorted(placement.items()))


def select_client_nodes(client: ClientSpec, nodes: Sequence[NodeInfo]) -> tuple[str, ...]:
    """The client nodes in client order: those the spec names, or the first `count` nodes
    (by name) matching nodeSelector."""
    known = {n.name for n in nodes}
    if client.named_nodes:
        unknown = [n for n in client.named_nodes if n not in known]
        if unknown:
            field = "spec.client.node" if client.node is not None else "spec.client.nodes"
            raise InvalidSpec(field, f"no node named {', '.join(unknown)} (kubectl get nodes)")
        return client.named_nodes
    matching = sorted(
        n.name for n in nodes if all(n.labels.get(k) == v for k, v in client.node_selector.items())
    )
    want = client.count or len(matching)
    if len(matching) < max(want, 1):
        selector = ",".join(f"{k}={v}" for k, v in sorted(client.node_selector.items()))
        raise InvalidSpec(
            "spec.client.nodeSelector",
            f"{len(matching)} node(s) match {selector}, the run needs {max(want, 1)}; "
            "label more nodes or lower client.count",
        )
    return tuple(matching[:want])


# ---------------------------------------------------------------- preflight


def preflight(spec: BenchmarkRunSpec, facts: ClusterFacts, placement: Mapping[int, str]) -> str:
    """Refuse, before anything is touched, a run the cluster cannot do; return the crimson
    option family the mons know ("" for classic)."""
    flavor, store = spec.osd.flavor, spec.osd.object_store.value
    for osd_id in sorted(placement):
        meta = facts.osds.get(osd_id)
        if meta is None:
            raise ExecutionError(f"`ceph osd metadata` knows no osd.{osd_id}; is it up?")
        if (flavor == Flavor.CRIMSON) != meta.crimson:
            kind = "crimson" if meta.crimson else "classic ceph-osd"
            raise InvalidSpec(
                "spec.osd.flavor",
                f"osd.{osd_id} on {placement[osd_id]} is a {kind} OSD (ceph osd metadata), "
                f"the spec asks for {flavor.value}; a run benchmarks the OSDs as deployed "
                f"(crimson on Rook needs an image whose ceph-osd is crimson)",
            )
        if meta.crimson and not meta.object_store:
            raise ExecutionError(
                f"osd.{osd_id} on {placement[osd_id]} did not say which object store it runs "
                "(crimson's osd metadata has none, and `ceph tell osd."
                f"{osd_id} config get crimson_osd_objectstore` / `osd_objectstore` answered "
                "nothing within 60 s); the run would be labelled with a store nobody checked: "
                "make sure the OSD is up and answers `ceph tell`"
            )
        if meta.object_store and meta.object_store != store:
            raise InvalidSpec(
                "spec.osd.objectStore",
                f"osd.{osd_id} runs {meta.object_store}, the spec asks for {store}; Rook "
                "cannot re-provision OSDs to another object store (rook issue 16678), so "
                f"set objectStore: {meta.object_store}",
            )
    if spec.target.rook is not None and spec.client.pool in facts.pools:
        raise InvalidSpec(
            "spec.client.pool",
            f"pool {spec.client.pool} exists already; the run creates its own size-1 pool "
            "(Rook would adopt and resize an existing one), so name a new pool",
        )
    if spec.target.external is not None and spec.client.pool not in facts.pools:
        raise InvalidSpec(
            "spec.client.pool",
            f"pool {spec.client.pool} does not exist on the external cluster (it has "
            f"{', '.join(sorted(facts.pools)) or 'none'}); create it or name one that exists",
        )
    if flavor != Flavor.CRIMSON or spec.target.external is not None:
        return ""
    return family_from_known_options(facts.known_options)


# ---------------------------------------------------------------- rollout


@dataclass(frozen=True)
class Progress:
    done: bool
    message: str


def rollout(
    plan: RunPlan,
    placement: Mapping[int, str],
    pods: Sequence[OsdPod],
    cluster_status: Mapping[str, Any],
    patched_generation: int,
) -> Progress:
    """Rook reconciled our generation, every planned OSD runs again on its own node with
    the planned resources, and is Ready. An OSD seen on another node fails the run."""
    seen = int(cluster_status.get("observedGeneration") or 0)
    phase = str(cluster_status.get("phase") or "unknown")
    if seen < patched_generation or phase != "Ready":
        return Progress(False, f"Rook at generation {seen}/{patched_generation}, phase {phase}")
    want_cpu, want_mem = str(plan.osd_resources.cpu), plan.osd_resources.memory
    by_id = {p.osd_id: p for p in pods if not p.terminating}
    for osd_id, node in sorted(placement.items()):
        pod = by_id.get(osd_id)
        if pod is None or pod.node is None:
            return Progress(False, f"osd.{osd_id} has no running pod yet")
        if pod.node != node:
            raise ExecutionError(
                f"osd.{osd_id} moved from node {node} to {pod.node}; a run must never move "
                "an OSD (check the CephCluster's placement)"
            )
        if (pod.cpu_limit, pod.memory_limit) != (want_cpu, want_mem):
            return Progress(False, f"osd.{osd_id} not rolled out yet (limits {pod.cpu_limit})")
        if not pod.ready:
            return Progress(False, f"osd.{osd_id} on {node} not Ready yet")
    return Progress(True, f"{len(placement)} OSDs Ready with the planned resources")


def _sole_live_pod(pods: Sequence[OsdPod], osd_id: int) -> tuple[OsdPod | None, str]:
    """The one pod of osd_id, or (None, why) when there is none, or more, or it is going."""
    found = [p for p in pods if p.osd_id == osd_id]
    live = [p for p in found if not p.terminating]
    if len(found) != 1 or len(live) != 1:
        return None, (f"osd.{osd_id} has {len(live)} running and {len(found) - len(live)} "
                      "terminating pods")  # fmt: skip
    return live[0], ""


def osds_at_rest(plan_ids: Sequence[int], pods: Sequence[OsdPod]) -> str:
    """'' when every planned OSD has one Ready pod that is not going away; else what is not
    (a step must not start on an OSD that is restarting)."""
    for osd_id in sorted(plan_ids):
        pod, why = _sole_live_pod(pods, osd_id)
        if pod is None:
            return why
        if not pod.ready:
            return f"osd.{osd_id} is not Ready"
    return ""


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


def original_osd_limits(original_spec: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(cpu, memory) limits of the OSD containers under the CephCluster spec as recorded
    before the run (resources.osd; None where it sets none)."""
    limits = ((original_spec.get("resources") or {}).get("osd") or {}).get("limits") or {}
    cpu, mem = limits.get("cpu"), limits.get("memory")
    return (None if cpu is None else str(cpu), None if mem is None else str(mem))


def _same_quantity(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a is b
    try:
        return quantity(a) == quantity(b)
    except ValueError:
        return a == b


def osds_running_with(
    osd_ids: Sequence[int], pods: Sequence[OsdPod], want: tuple[str | None, str | None]
) -> Progress:
    """Every OSD of osd_ids runs one Ready pod with the (cpu, memory) limits `want` (None:
    no limit). Rook sizes every OSD pod alike, so a resources change rolls them all: after
    a run's patch (want: the plan's) and after the restore (want: the original's)."""
    for osd_id in sorted(osd_ids):
        pod, why = _sole_live_pod(pods, osd_id)
        if pod is None:
            return Progress(False, why)
        if not (
            _same_quantity(pod.cpu_limit, want[0]) and _same_quantity(pod.memory_limit, want[1])
        ):
            return Progress(False, f"osd.{osd_id} still has limits cpu={pod.cpu_limit} "
                                   f"memory={pod.memory_limit}")  # fmt: skip
        if not pod.ready:
            return Progress(False, f"osd.{osd_id} not Ready yet")
    return Progress(True, f"{len(osd_ids)} OSDs Ready with limits cpu={want[0]} memory={want[1]}")


# ---------------------------------------------------------------- fio servers


@dataclass(frozen=True)
class PodState:
    """The one pod of a Job, as far as the operator cares."""

    phase: str  # Pending, Running, Succeeded, Failed, or Missing
    ready: bool = False
    ip: str | None = None
    node: str | None = None
    reason: str = ""
    name: str = ""


def server_addresses(
    plan: RunPlan, pods: Mapping[str, PodState], port: int
) -> dict[str, str] | Progress:
    """client -> "ip:port" once every client's fio server is Ready on its node; else what
    is being waited for. A server that ended (failed, evicted) fails the run."""
    waiting = []
    out: dict[str, str] = {}
    for client in plan.clients:
        pod = pods.get(client.name, PodState("Missing"))
        if pod.phase in ("Failed", "Succeeded"):
            raise ExecutionError(
                f"the fio server of {client.name} ended ({pod.phase}: {pod.reason or '?'})"
            )
        if pod.node is not None and pod.node != client.node:
            raise ExecutionError(f"fio server of {client.name} runs on {pod.node}")
        if not pod.ready or pod.ip is None:
            waiting.append(f"{client.name} ({pod.phase})")
            continue
        out[client.name] = f"{pod.ip}:{port}"
    if waiting:
        return Progress(False, "waiting for fio servers: " + ", ".join(waiting))
    return out


# ---------------------------------------------------------------- steps


def expected_jobs(plan: RunPlan) -> dict[str, int]:
    """client -> jobs fio must report for it in every step (job sections x numjobs)."""
    out: dict[str, int] = {}
    for job in plan.fio.jobs:
        out[job.client] = out.get(job.client, 0) + plan.fio_numjobs
    return out


WAIT_MARGIN_S = 10.0  # fio's end: jobs stop, servers send their results, the JSON is written


def wait_for_step_end(report: StepReport, expected_s: float, tick_s: float) -> float:
    """How long this tick should wait in the fio driver for a running step: until its
    expected end (started + ramp + runtime) when that comes before the next tick, plus a
    margin for fio's end; else 0 (the next tick polls again). Waiting in the pod, the
    operator sees the end within 0.1 s instead of up to a tick later."""
    if report.state != "running" or not report.started:
        return 0.0
    remaining = report.started + expected_s - report.now
    if remaining > tick_s:
        return 0.0
    return max(0.0, remaining) + WAIT_MARGIN_S
