"""The CephCluster (ceph.rook.io/v1, Rook v1.17) spec a run needs, and how to undo it.

What a run changes in `spec` (everything else is kept exactly as found):

- `cephConfig`: one `osd.N` section per planned OSD with the plan's crimson CPU options
  and spec.osd.cephConfig (never the `osd` section: it reaches every OSD of the cluster,
  the ones the run does not plan too; cephcluster_sections). Not the crimson prerequisites the
  plan puts in `global` for clusters it builds (local mode): on Rook, preflight found the
  OSDs crimson, so the mons allow crimson already (however they were told: a conf file,
  the command line, the mon db), and a copy in the mon db would outlive the run (seen on
  kind: `enable_experimental_..._features` left behind after restore). Rook applies
  cephConfig with `ceph config assimilate-conf` after the mgr is
  up and before it updates the OSDs, so the OSDs start with them. Values are strings
  (the CRD says so). Option names the mons do not know make Rook's reconcile fail, which
  is why the operator asks the cluster which names it knows before planning.
- `resources.osd` (and every `osd-<deviceClass>` key already present, which would
  otherwise win for OSDs of that class): requests == limits with whole CPUs, so the OSD
  containers are Guaranteed and a kubelet with the static CPU manager may give them
  exclusive cores. When the log collector sidecar runs (logCollector.enabled) its
  `logcollector` resources get requests == limits too: one Burstable container makes the
  whole pod Burstable. Rook derives osd_memory_target from the memory limit for classic
  OSDs (POD_MEMORY_LIMIT). Rook sizes every OSD pod alike (per daemon type), so OSDs the
  run does not plan get the same resources.
- `placement` is never touched: OSDs stay on the nodes they run on (their data is there).
  An earlier version pinned every OSD to one node and left the OSDs of other nodes
  Pending; the operator now records where every OSD runs before the patch and fails the
  run if one is seen elsewhere after the rollout.

Rook caveats the operator has to handle (see also restore_cleanup_commands):

- Rook never unsets a cephConfig key that disappears from the spec ("The operator does not
  unset any removed config options"): restoring the spec leaves our keys in the mon
  database until `ceph config rm` removes them.
- Startup-only options (all crimson CPU options are) need an OSD restart. Rook rolls the
  OSD deployments when `resources` change; a cephConfig-only change restarts nothing.
- A crimson OSD's reactor layout is fixed when it is deployed (needs_reprovision).
- Rook can only provision bluestore OSDs (`storage.store.type`: bluestore|bluestore-rdr)
  with `ceph-osd`; crimson needs an image whose ceph-osd is crimson, and seastore or
  cyanstore OSDs cannot be created by Rook today (rook issue 16678). Preflight compares
  the OSDs' own metadata with the spec before anything is patched.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from crimsonbench.plan.ceph_options import COUNT_OPTIONS, CPU_SET_OPTIONS, CRIMSON_GLOBAL
from crimsonbench.plan.types import OsdCpus, RunPlan
from crimsonbench.spec.cpuset import parse_cpuset

# The spec's top-level keys a run changes (cephcluster_patch writes nothing else). The
# restore writes these and nothing else either: whatever the saved original holds, it
# cannot reach the image, dataDirHostPath, cleanupPolicy, storage or placement.
RUN_KEYS = ("cephConfig", "resources")

# The log collector sidecar (logrotate every period) in every Ceph pod. Only set when the
# original has no limits for it, so a user's own sizing stays.
LOGCOLLECTOR_RESOURCES = {"cpu": "100m", "memory": "128Mi"}


# ---------------------------------------------------------------- the desired spec


def cephcluster_patch(original: Mapping[str, Any], plan: RunPlan) -> dict[str, Any]:
    """The CephCluster's new, complete `spec` for this run, derived from `original` (the
    whole CephCluster object as read, or at least {"spec": ...})."""
    new = copy.deepcopy(dict(original.get("spec") or {}))

    sections = cephcluster_sections(plan)
    if sections:
        cephconfig = new.setdefault("cephConfig", {})
        for section, options in sections.items():
            cephconfig[section] = {**dict(cephconfig.get(section) or {}), **options}

    guaranteed = {"cpu": str(plan.osd_resources.cpu), "memory": plan.osd_resources.memory}
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
    return new


def cephcluster_sections(plan: RunPlan) -> dict[str, dict[str, str]]:
    """What the run puts into cephConfig (section -> option -> value, strings as the CRD
    says): the plan's, with spec.osd.cephConfig (the plan's `osd` section) written into
    each planned `osd.N` instead of `osd`, which would reach every OSD of the cluster, the
    ones the run does not plan too; the plan's own options of an osd.N (its CPU layout)
    win over the spec's. Without the crimson prerequisites of `global` (see above)."""
    config = plan.ceph.config
    extra = {k: str(v) for k, v in (config.get("osd") or {}).items()}
    out: dict[str, dict[str, str]] = {}
    for section, options in config.items():
        if section == "osd":
            continue
        if section == "global":
            options = {k: v for k, v in options.items() if k not in CRIMSON_GLOBAL}
        if options:
            out[section] = {k: str(v) for k, v in options.items()}
    if extra:
        for osd in plan.osds:
            section = f"osd.{osd.osd_id}"
            out[section] = {**extra, **out.get(section, {})}
    return out


def _log_collector_enabled(spec: Mapping[str, Any]) -> bool:
    # No CRD default: absent means off (Rook's example cluster.yaml turns it on).
    return bool((spec.get("logCollector") or {}).get("enabled", False))


# ---------------------------------------------------------------- reprovisioning


def needs_reprovision(
    original_cephconfig: Mapping[str, Any], crimson_osds: Sequence[OsdCpus]
) -> bool:
    """True when an OSD's planned crimson reactor layout (CPU set, else reactor count)
    differs from the one in the cephConfig its OSDs were deployed with. Crimson cannot
    change its CPU allocation without purging and re-creating the OSD.

    The deployed value of osd.N is looked up as Ceph does: osd.N, then osd, then global;
    either option family counts. No crimson option at all (crimson's default: every CPU)
    also differs from a planned layout. Classic OSDs never need it (pass none). Read from
    the planned CPU sets, not option names, so it is decided before the names are known."""
    for osd in crimson_osds:
        deployed = _layout(_effective(original_cephconfig, f"osd.{osd.osd_id}"))
        if deployed != ("set", frozenset(osd.reactors)):
            return True
    return False


def has_crimson_layout(cephconfig: Mapping[str, Any], osd_ids: Sequence[int]) -> bool:
    """True when the cephConfig sets a crimson reactor layout (CPU set or count, either
    family) for any of these OSDs: the OSDs were evidently deployed crimson. Without one
    the cluster may as well be classic, which only the OSDs' own metadata can tell."""
    return any(_layout(_effective(cephconfig, f"osd.{i}")) is not None for i in osd_ids)


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
    prerequisites in `global` are never removed: cephcluster_patch never writes them, and
    a crimson cluster needs them to start its OSDs again. Values set by hand with `ceph config
    set` before the run are not known here;
    the operator should record `ceph config dump` first if it must restore those too."""
    original = original_cephconfig or {}
    commands: list[list[str]] = []
    for section, options in cephcluster_sections(plan).items():
        kept = original.get(section) or {}
        commands += [["config", "rm", section, key] for key in options if key not in kept]
    return commands
