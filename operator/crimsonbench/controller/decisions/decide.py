"""The operator's decisions before anything is touched, as pure functions of what it
observed: which OSDs and client nodes a run uses, and preflight against what the cluster
says of itself (the facts Job). The other decisions: rollout.py (Rook's OSD pods),
step_decide.py (a step's life), restore_steps.py (the restore). stages.py observes, calls
these and applies what they return; they are unit-tested without a cluster
(tests/controller/test_decide.py).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from crimsonbench.controller.decisions.observed import NodeInfo, OsdPod
from crimsonbench.controller.decisions.osd_stores import crimson_stores
from crimsonbench.errors import ExecutionError, InvalidSpec, ParseError
from crimsonbench.manifests.maintenance import OSD_STORES
from crimsonbench.plan.ceph_options import family_from_known_options
from crimsonbench.spec.models import BenchmarkRunSpec, ClientSpec, Flavor, RookTarget

# ---------------------------------------------------------------- what is observed


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
    # the mon database's values, (who, option) -> value (entries without a mask)
    mon_config: Mapping[tuple[str, str], str] = field(default_factory=dict)
    fsid: str = ""

    @classmethod
    def from_sections(cls, sections: Mapping[str, str]) -> ClusterFacts:
        try:
            options = json.loads(sections["config-ls"])
            metadata = json.loads(sections["osd-metadata"])
            pools = json.loads(sections["pool-ls"])
            dump = json.loads(sections["config-dump"])
            fsid = str(json.loads(sections["fsid"])["fsid"])
        except (KeyError, ValueError, TypeError) as exc:
            raise ParseError(f"the cluster facts Job printed no readable {exc}") from None
        stores = crimson_stores(sections.get(OSD_STORES, ""))
        keys = {"section", "name", "value"}
        mon = {(str(e["section"]), str(e["name"])): str(e["value"]) for e in dump
               if isinstance(e, dict) and not e.get("mask") and keys <= e.keys()}  # fmt: skip
        return cls(
            frozenset(str(o) for o in options),
            {int(m["id"]): _osd_meta(m, stores) for m in metadata},
            frozenset(str(p) for p in pools),
            mon,
            fsid,
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


def unknown_options(spec: BenchmarkRunSpec, known: frozenset[str]) -> None:
    """Refuse spec.osd.cephConfig names the mons do not know (`ceph config ls`): written
    into the CephCluster they would make Rook's reconcile fail (the mons refuse them),
    and the run would wait for a rollout that never comes. Close names are suggested."""
    unknown = sorted(set(spec.osd.ceph_config) - known)
    if not unknown or not known:  # no list read: nothing to compare with
        return
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, sorted(known), n=1)
        hints.append(f"{name} (did you mean {close[0]}?)" if close else name)
    raise InvalidSpec(
        "spec.osd.cephConfig",
        f"the cluster's mons know no option {', '.join(hints)} (`ceph config ls`): Rook "
        "could not apply it (the mons refuse unknown names) and the run would wait for a "
        "rollout that never comes; spell each name as `ceph config ls` lists it, or remove it",
    )


def preflight(
    spec: BenchmarkRunSpec, facts: ClusterFacts, placement: Mapping[int, str], pool: str = ""
) -> str:
    """Refuse, before anything is touched, a run the cluster cannot do; return the crimson
    option family the mons know ("" for classic). pool: the run's pool as planned
    (plan.build.pool_name; on Rook named from the run's uid)."""
    unknown_options(spec, facts.known_options)
    flavor, store = spec.osd.flavor, spec.osd.object_store.value
    pool = pool or spec.client.pool
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
    if spec.target.rook is not None and pool in facts.pools:
        raise InvalidSpec(
            "spec.client.pool",
            f"pool {pool} exists already; the run creates its own size-1 pool (Rook would "
            "adopt and resize an existing one) named from client.pool and the run's uid: "
            "someone made that name; remove it or change client.pool",
        )
    if spec.target.external is not None and pool not in facts.pools:
        raise InvalidSpec(
            "spec.client.pool",
            f"pool {pool} does not exist on the external cluster (it has "
            f"{', '.join(sorted(facts.pools)) or 'none'}); create it or name one that exists",
        )
    if flavor != Flavor.CRIMSON or spec.target.external is not None:
        return ""
    return family_from_known_options(facts.known_options)
