"""The CephCluster (ceph.rook.io/v1, Rook v1.17) spec a run needs, and how to undo it.

What a run changes in `spec` (everything else is kept exactly as found):

- `cephConfig`: one `osd.N` section per OSD with the plan's crimson CPU options, the
  plan's `osd` section (spec.osd.cephConfig) and the crimson prerequisites in `global`.
  Rook applies cephConfig with `ceph config assimilate-conf` after the mgr is up and
  before it updates the OSDs, so the OSDs start with them. Values are strings (the CRD
  says so). Option names the mons do not know make Rook's reconcile fail, which is why
  the planner picks legacy or current crimson names by Ceph version.
- `resources.osd` (and every `osd-<deviceClass>` key already present, which would
  otherwise win for OSDs of that class): requests == limits with whole CPUs, so the OSD
  containers are Guaranteed and a kubelet with the static CPU manager may give them
  exclusive cores. When the log collector sidecar runs (logCollector.enabled) its
  `logcollector` resources get requests == limits too: one Burstable container makes the
  whole pod Burstable. Rook derives osd_memory_target from the memory limit for classic
  OSDs (POD_MEMORY_LIMIT).
- `placement.osd`: when the caller says which node each OSD goes to, a required node
  affinity on the `kubernetes.io/hostname` label, ANDed into the existing terms. Rook
  honours only matchExpressions (labels) when it decides on which nodes to create OSDs
  (k8sutil.NodeMeetsAffinityTerms ignores matchFields), so node *names* are matched
  through that label (Rook's storage.nodes[].name is that label too). Placement is per
  daemon type, not per OSD: every OSD is limited to the union of the nodes given, and an
  existing OSD elsewhere would stay Pending during the run.

Rook caveats the operator has to handle (see also restore_cleanup_commands):

- Rook never unsets a cephConfig key that disappears from the spec ("The operator does not
  unset any removed config options"): restoring the spec leaves our keys in the mon
  database until `ceph config rm` removes them.
- Startup-only options (all crimson CPU options are) need an OSD restart. Rook rolls the
  OSD deployments when `resources`/`placement` change; a cephConfig-only change restarts
  nothing.
- A crimson OSD's reactor layout is fixed when it is deployed (needs_reprovision).
- Rook can only provision bluestore OSDs (`storage.store.type`: bluestore|bluestore-rdr)
  with `ceph-osd`; crimson needs an image whose ceph-osd is crimson, and seastore or
  cyanstore OSDs cannot be created by Rook today (rook issue 16678). rook_unsupported()
  says so before anything is patched.
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

from crimsonbench.plan.ceph_options import COUNT_OPTIONS, CPU_SET_OPTIONS, CRIMSON_GLOBAL
from crimsonbench.plan.types import RunPlan
from crimsonbench.spec.cpuset import parse_cpuset
from crimsonbench.spec.models import BenchmarkRunSpec, Flavor, ObjectStore, size_bytes

HOSTNAME_LABEL = "kubernetes.io/hostname"
GIB = 2**30

# The log collector sidecar (logrotate every period) in every Ceph pod. Only set when the
# original has no limits for it, so a user's own sizing stays.
LOGCOLLECTOR_RESOURCES = {"cpu": "100m", "memory": "128Mi"}

# Memory per OSD pod: a base for the OSD itself plus, for crimson, one GiB per reactor
# (seastar gives every shard its own memory; seastore caches per shard). In-memory stores
# (cyanstore, memstore) also hold their share of all image data, with 25 % overhead.
CLASSIC_BASE_GIB = 8  # Rook sets osd_memory_target to 80 % of this (osd default: 4 GiB)
CRIMSON_BASE_GIB = 4
CRIMSON_GIB_PER_REACTOR = 1
IN_MEMORY_OVERHEAD = 1.25


# ---------------------------------------------------------------- the desired spec


def cephcluster_patch(
    original: Mapping[str, Any],
    plan: RunPlan,
    spec: BenchmarkRunSpec,
    nodes: Mapping[int, str] | None,
    *,
    osd_memory: str | None = None,
) -> dict[str, Any]:
    """The CephCluster's new, complete `spec` for this run, derived from `original` (the
    whole CephCluster object as read, or at least {"spec": ...}).

    nodes: OSD id -> node name, when known; adds the placement node affinity.
    osd_memory: memory request/limit of each OSD pod (a Kubernetes quantity); default
    from default_osd_memory(spec).
    """
    new = copy.deepcopy(dict(original.get("spec") or {}))

    if plan.ceph.config:
        cephconfig = new.setdefault("cephConfig", {})
        for section, options in plan.ceph.config.items():
            merged = dict(cephconfig.get(section) or {})
            merged.update({k: str(v) for k, v in options.items()})
            cephconfig[section] = merged

    cpu = str(osd_cpu_count(plan, nodes))
    memory = osd_memory or default_osd_memory(spec)
    guaranteed = {"cpu": cpu, "memory": memory}
    resources = new.setdefault("resources", {})
    for key in ["osd", *sorted(k for k in resources if k.startswith("osd-"))]:
        entry = dict(resources.get(key) or {})
        entry["requests"] = dict(guaranteed)
        entry["limits"] = dict(guaranteed)
        resources[key] = entry
    if _log_collector_enabled(new):
        entry = dict(resources.get("logcollector") or {})
        sized = dict(entry.get("limits") or LOGCOLLECTOR_RESOURCES)
        entry["requests"] = dict(sized)
        entry["limits"] = dict(sized)
        resources["logcollector"] = entry

    if nodes:
        placement = new.setdefault("placement", {})
        osd = dict(placement.get("osd") or {})
        inherited = (placement.get("all") or {}).get("nodeAffinity")
        only_osd = (new.get("storage") or {}).get("onlyApplyOSDPlacement", False)
        if "nodeAffinity" not in osd and inherited and not only_osd:
            # Rook's Placement.Merge *replaces* all.nodeAffinity with osd.nodeAffinity, so
            # start from all's to keep its constraint for the OSDs
            osd["nodeAffinity"] = copy.deepcopy(inherited)
        placement["osd"] = _with_node_affinity(osd, sorted(set(nodes.values())))
    return new


def osd_cpu_count(plan: RunPlan, nodes: Mapping[int, str] | None = None) -> int:
    """Whole CPUs per OSD pod: its reactors (classic: its affinity set) plus its share of
    the alien CPUs. Crimson BlueStore's alien CPU set is one set shared by every OSD on a
    node, so each OSD pod asks for ceil(alien CPUs / OSDs on the busiest node); asking for
    the whole set per OSD would over-commit the node by the number of OSDs."""
    if not plan.cpu.osds:
        return 1
    per_node = Counter(nodes[o.osd_id] for o in plan.cpu.osds if o.osd_id in nodes) if nodes else {}
    crowd = max(per_node.values(), default=len(plan.cpu.osds))
    return max(len(o.reactors) + math.ceil(len(o.alien) / crowd) for o in plan.cpu.osds)


def default_osd_memory(spec: BenchmarkRunSpec) -> str:
    """A sane memory request/limit per OSD pod for the object store (see the constants)."""
    osd = spec.osd
    if osd.flavor == Flavor.CLASSIC:
        gib = float(CLASSIC_BASE_GIB)
    else:
        gib = float(CRIMSON_BASE_GIB + CRIMSON_GIB_PER_REACTOR * osd.reactors_per_osd)
    if osd.object_store in (ObjectStore.CYANSTORE, ObjectStore.MEMSTORE):
        data = spec.client.images * size_bytes(spec.client.image_size) / osd.count
        gib += IN_MEMORY_OVERHEAD * data / GIB
    return f"{math.ceil(gib)}Gi"


def rook_unsupported(spec: BenchmarkRunSpec) -> str | None:
    """Why Rook cannot provision OSDs of this kind, or None. Existing OSDs of that kind
    (made by hand with a crimson image) can still be benchmarked; re-provisioning cannot."""
    store = spec.osd.object_store
    if store in (ObjectStore.SEASTORE, ObjectStore.CYANSTORE, ObjectStore.MEMSTORE):
        return (
            f"Rook creates only bluestore OSDs (storage.store.type bluestore|bluestore-rdr); "
            f"it cannot create {store.value} OSDs (rook issue 16678)"
        )
    return None


def _log_collector_enabled(spec: Mapping[str, Any]) -> bool:
    # No CRD default: absent means off (Rook's example cluster.yaml turns it on).
    return bool((spec.get("logCollector") or {}).get("enabled", False))


def _with_node_affinity(placement: Mapping[str, Any], hostnames: list[str]) -> dict[str, Any]:
    """AND `kubernetes.io/hostname In hostnames` into every required node selector term
    (terms are ORed, expressions within a term ANDed); keep everything else."""
    ours = {"key": HOSTNAME_LABEL, "operator": "In", "values": hostnames}
    out = copy.deepcopy(dict(placement))
    affinity = out.setdefault("nodeAffinity", {})
    required = affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    new_terms = []
    for term in terms:
        term = dict(term)
        exprs = [e for e in term.get("matchExpressions") or [] if e != ours]
        term["matchExpressions"] = [*exprs, ours]
        new_terms.append(term)
    required["nodeSelectorTerms"] = new_terms
    return out


# ---------------------------------------------------------------- reprovisioning

def needs_reprovision(original_cephconfig: Mapping[str, Any], plan: RunPlan) -> bool:
    """True when an OSD's planned crimson reactor layout (CPU set, else reactor count)
    differs from the one in the cephConfig its OSDs were deployed with. Crimson cannot
    change its CPU allocation without purging and re-creating the OSD.

    The deployed value of osd.N is looked up as Ceph does: osd.N, then osd, then global;
    either option family counts. No crimson option at all (crimson's default: every CPU)
    also differs from a planned layout. Classic plans never need it."""
    for section, options in plan.ceph.config.items():
        if not section.startswith("osd."):
            continue
        wanted = _layout(options)
        if wanted is None:
            continue
        deployed = _layout(_effective(original_cephconfig, section))
        if deployed != wanted:
            return True
    return False


def _effective(cephconfig: Mapping[str, Any], section: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for who in ("global", section.split(".")[0], section):
        out.update({str(k): str(v) for k, v in (cephconfig.get(who) or {}).items()})
    return out


def _layout(options: Mapping[str, str]) -> tuple[str, frozenset[int] | int] | None:
    for set_key in CPU_SET_OPTIONS:
        if set_key in options:
            try:
                return ("set", parse_cpuset(options[set_key]))
            except ValueError:
                return ("set", frozenset({-1}))  # unparsable: never equal to a plan
    for num_key in COUNT_OPTIONS:
        if num_key in options:
            try:
                return ("num", int(options[num_key]))
            except ValueError:
                return ("num", -1)
    return None


# ---------------------------------------------------------------- JSON merge patches


def merge_patch(original_spec: Mapping[str, Any], new_spec: Mapping[str, Any]) -> dict[str, Any]:
    """The RFC 7386 JSON merge patch turning original_spec into new_spec: changed and new
    keys with their new values, removed keys as None (JSON null), objects recursively.
    Lists are replaced whole, as merge patches do.

    new_spec must not contain None values: a merge patch cannot set a JSON null."""
    _reject_none(new_spec, "new_spec")
    return _diff(original_spec, new_spec)


def restore_patch(
    original_spec: Mapping[str, Any],
    current_spec: Mapping[str, Any],
    *,
    ours: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The merge patch bringing current_spec back to original_spec exactly:
    apply_merge_patch(current_spec, restore_patch(original_spec, current_spec)) equals
    original_spec, including keys we added (removed again), emptied objects and lists.

    ours: the merge patch this run applied. When given, only the paths it touched are
    restored, so changes others made elsewhere in the spec during the run survive."""
    full = merge_patch(current_spec, original_spec)
    return full if ours is None else _restrict(full, ours)


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 MergePatch(target, patch), without modifying either argument."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(copy.deepcopy(target)) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = apply_merge_patch(out.get(key), value)
    return out


def _diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        if key not in old:
            patch[key] = copy.deepcopy(value)
        elif isinstance(value, Mapping) and isinstance(old[key], Mapping):
            sub = _diff(old[key], value)
            if sub:
                patch[key] = sub
        elif not _same(old[key], value):
            patch[key] = copy.deepcopy(value)
    return patch


def _same(a: Any, b: Any) -> bool:
    """Equality that tells 1, 1.0 and True apart, and 0.0 from -0.0 (they serialize
    differently)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return repr(a) == repr(b)
    if isinstance(a, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _restrict(full: Mapping[str, Any], ours: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in ours.items():
        if key not in full:
            continue
        if isinstance(value, Mapping) and isinstance(full[key], Mapping):
            sub = _restrict(full[key], value)
            if sub:
                out[key] = sub
        else:
            out[key] = copy.deepcopy(full[key])
    return out


def _reject_none(value: Any, where: str) -> None:
    if value is None:
        raise ValueError(f"{where} is null; a JSON merge patch cannot set null values")
    if isinstance(value, Mapping):
        for k, v in value.items():
            _reject_none(v, f"{where}.{k}")


# ---------------------------------------------------------------- after the restore


def restore_cleanup_commands(
    plan: RunPlan, original_cephconfig: Mapping[str, Any] | None = None
) -> list[list[str]]:
    """ceph CLI argument lists (without the leading `ceph`, like CephSetup.commands) that
    remove the options this run put into the mon database: [["config", "rm", who, key]].

    Run them after restore_patch is applied. Rook re-applies what the original cephConfig
    still holds, so keys present there (same section) are left alone. The crimson
    prerequisites in `global` are never removed: a crimson cluster needs them to start its
    OSDs again, and they were either there before the run or the OSDs could not have been
    crimson. Values set by hand with `ceph config set` before the run are not known here;
    the operator should record `ceph config dump` first if it must restore those too."""
    original = original_cephconfig or {}
    commands: list[list[str]] = []
    for section, options in plan.ceph.config.items():
        kept = original.get(section) or {}
        for key in options:
            if key in kept:
                continue
            if section == "global" and key in CRIMSON_GLOBAL:
                continue
            commands.append(["config", "rm", section, key])
    return commands
