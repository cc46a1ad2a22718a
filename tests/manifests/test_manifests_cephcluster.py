"""The CephCluster spec of a run (golden files for the reference configurations), the merge
patches that apply and undo it, and when crimson OSDs need re-provisioning."""

from __future__ import annotations

import copy
import functools
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.builds import environmental
from harness.rook import RookUnavailable, rook_crds_yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from manifest_inputs import NODE, SEASTORE_56, bluestore_8x5, original_cephcluster, plan_of

from crimsonbench.manifests.cephcluster import (
    RUN_KEYS,
    apply_merge_patch,
    cephcluster_patch,
    merge_patch,
    needs_reprovision,
    restore_cleanup_commands,
    restore_patch,
)
from crimsonbench.plan.ceph_options import CRIMSON_GLOBAL
from crimsonbench.plan.resources import default_osd_memory, osd_cpu_count
from crimsonbench.spec.cpuset import format_cpuset
from crimsonbench.spec.models import validate_spec

OURS = ("cephConfig", "resources")  # placement is never touched: OSDs never move


def reference(which: str) -> tuple[Any, Any, dict[str, Any]]:
    original = original_cephcluster()
    if which == "a":
        spec, plan = plan_of("seastore-1osd-56reactor", SEASTORE_56)
    else:
        spec, plan = plan_of(f"blue-8osd-5reactor-{which}", bluestore_8x5(which))
        original["spec"]["cephVersion"]["image"] = "quay.io/ceph/ceph:v20.2.4"
    return spec, plan, {"original": original}


CASES = {
    "a": "cephcluster-a-seastore-1osd-56reactors-osd-19.2.1.yaml",
    "default": "cephcluster-b-bluestore-8osd-5reactors-default-20.2.4.yaml",
    "osd": "cephcluster-b-bluestore-8osd-5reactors-osd-20.2.4.yaml",
    "socket": "cephcluster-b-bluestore-8osd-5reactors-socket-20.2.4.yaml",
}


@pytest.mark.parametrize("which", list(CASES))
def test_golden_cephcluster_specs(which: str, golden: Any) -> None:
    spec, plan, ctx = reference(which)
    original = ctx["original"]
    new = cephcluster_patch(original, plan)
    patch = merge_patch(original["spec"], new)
    golden(
        CASES[which],
        [
            {
                "spec": new,
                "mergePatch": patch,
                "restoreCleanupCommands": [
                    "ceph " + " ".join(c)
                    for c in restore_cleanup_commands(plan, original["spec"]["cephConfig"])
                ],
            }
        ],
    )
    assert apply_merge_patch(original["spec"], patch) == new


def test_reference_a_config_and_resources() -> None:
    spec, plan, ctx = reference("a")
    new = cephcluster_patch(ctx["original"], plan)
    assert new["cephConfig"]["osd.0"] == {"crimson_seastar_cpu_cores": "0-27,56-83"}
    # the original global keys stay; the crimson prerequisites of the plan are not copied
    # into the mon db (the OSDs run crimson, so the mons allow it already), so nothing of
    # them can outlive the run
    assert set(CRIMSON_GLOBAL) <= set(plan.ceph.config["global"])
    assert new["cephConfig"]["global"] == {
        "mon_warn_on_pool_no_redundancy": "false",
        "osd_pool_default_size": "1",
    }
    guaranteed = {"cpu": "56", "memory": "60Gi"}
    for key in ("osd", "osd-nvme"):  # osd-nvme would otherwise win for NVMe OSDs
        assert new["resources"][key] == {"requests": guaranteed, "limits": guaranteed}
    # the log collector sidecar must be Guaranteed too, or the whole pod is Burstable
    lc = new["resources"]["logcollector"]
    assert lc["requests"] == lc["limits"]
    assert new["resources"]["mgr"] == ctx["original"]["spec"]["resources"]["mgr"]


@pytest.mark.parametrize("policy", ["default", "osd", "socket"])
def test_reference_b_alien_share(policy: str) -> None:
    spec, plan, ctx = reference(policy)
    new = cephcluster_patch(ctx["original"], plan)
    assert plan.hosts[0].cpu.alien_threads == 160
    assert len(plan.osds[0].alien) == 56
    # 5 reactors + 56 shared alien CPUs / 8 OSDs: 8 pods x 12 CPUs = the 96 OSD CPUs
    assert new["resources"]["osd"]["limits"]["cpu"] == "12"
    for osd in range(8):
        section = new["cephConfig"][f"osd.{osd}"]
        # tentacle (20.2.4): crimson_seastar_* names; the reactor count is never written
        assert section["crimson_alien_op_num_threads"] == "160"
        assert section["crimson_seastar_cpu_cores"] == format_cpuset(plan.osds[osd].reactors)
        assert not set(section) & {"crimson_seastar_num_threads", "crimson_cpu_num"}


def test_everything_else_is_untouched() -> None:
    spec, plan, ctx = reference("socket")
    original = ctx["original"]
    before = copy.deepcopy(original)
    new = cephcluster_patch(original, plan)
    assert original == before  # the input is not modified
    for key, value in original["spec"].items():
        if key not in OURS:
            assert new[key] == value, key
    assert set(new) == set(original["spec"])
    # placement is exactly as found: OSDs stay on their nodes (an earlier version pinned
    # every OSD to one node and left the other nodes' OSDs Pending)
    assert new["placement"] == original["spec"]["placement"]


@pytest.mark.parametrize("which", list(CASES))
def test_a_run_changes_only_the_keys_its_restore_may_write(which: str) -> None:
    """RUN_KEYS bound what the restore writes (a saved original cannot reach the image or
    dataDirHostPath through it): the patch must never change anything else."""
    spec, plan, ctx = reference(which)
    original = ctx["original"]["spec"]
    changed = set(merge_patch(original, cephcluster_patch(ctx["original"], plan)))
    assert changed and changed <= set(RUN_KEYS), changed


def test_minimal_original_gets_only_what_the_run_needs() -> None:
    spec, plan, _ = reference("osd")
    new = cephcluster_patch({"spec": {"dataDirHostPath": "/var/lib/rook"}}, plan)
    assert set(new) == {"dataDirHostPath", "cephConfig", "resources"}  # no placement
    assert set(new["resources"]) == {"osd"}  # log collector is off when not enabled
    # the 8 OSDs of the node share its alien CPUs
    assert new["resources"]["osd"]["requests"]["cpu"] == "12"


def test_alien_share_follows_the_nodes() -> None:
    """Each host plans its own alien CPUs (its OSD CPUs minus reactors); an OSD pod asks
    for its reactors plus its host's alien share, and Rook sizes every OSD pod alike."""
    cases = {
        ("n1",): 5 + 56 // 8,  # 8 OSDs: 96 - 40 reactor CPUs = 56 alien, 7 each
        ("n1", "n2"): 5 + 76 // 4,  # 4 per node: 96 - 20 = 76 alien, 19 each
        tuple(f"n{i}" for i in range(8)): 5 + 91,  # 1 per node: all 91 others alien
    }
    for nodes, cpus in cases.items():
        _, plan = plan_of("b", bluestore_8x5("osd"), nodes)
        assert [len(h.osd_ids) for h in plan.hosts] == [8 // len(nodes)] * len(nodes)
        assert osd_cpu_count(plan.hosts) == cpus, nodes
        assert plan.osd_resources.cpu == cpus


def test_memory_defaults_by_store() -> None:
    spec_a, _, _ = reference("a")
    assert default_osd_memory(spec_a) == "60Gi"  # 4 + 56 x 1
    cyan = validate_spec({**SEASTORE_56, "osd": {**SEASTORE_56["osd"], "objectStore": "cyanstore"}})
    assert default_osd_memory(cyan) == "140Gi"  # + 32 x 2 GiB x 1.25 of data in memory
    classic = validate_spec(
        {
            "target": {"rook": {"clusterName": "c"}},
            "osd": {"flavor": "classic", "count": 2},
            "client": {"node": NODE},
        }
    )
    assert default_osd_memory(classic) == "8Gi"
    _, plan, ctx = reference("default")
    new = cephcluster_patch(ctx["original"], plan)
    assert new["resources"]["osd"]["limits"]["memory"] == plan.osd_resources.memory


# ---------------------------------------------------------------- re-provisioning


def test_same_layout_needs_no_reprovision() -> None:
    spec, plan, ctx = reference("socket")
    deployed = cephcluster_patch(ctx["original"], plan)["cephConfig"]
    assert not needs_reprovision(deployed, plan.osds)


def test_other_policy_needs_reprovision() -> None:
    spec, plan, ctx = reference("socket")
    deployed = cephcluster_patch(ctx["original"], plan)["cephConfig"]
    _, other = plan_of("x", bluestore_8x5("osd"))
    assert needs_reprovision(deployed, other.osds)


def test_no_crimson_options_deployed_needs_reprovision() -> None:
    _, plan, ctx = reference("a")
    assert needs_reprovision(ctx["original"]["spec"]["cephConfig"], plan.osds)
    assert needs_reprovision({}, plan.osds)


def test_layout_from_the_other_option_family_and_from_the_osd_section() -> None:
    _, plan, _ = reference("a")  # legacy names, 0-27,56-83
    assert not needs_reprovision({"osd.0": {"crimson_cpu_set": "56-83,0-27"}}, plan.osds)
    assert not needs_reprovision({"osd": {"crimson_seastar_cpu_cores": "0-27,56-83"}}, plan.osds)
    assert needs_reprovision({"osd": {"crimson_seastar_cpu_cores": "0-55"}}, plan.osds)
    # the per-OSD section wins over `osd`
    assert not needs_reprovision(
        {"osd": {"crimson_cpu_set": "0-3"}, "osd.0": {"crimson_cpu_set": "0-27,56-83"}},
        plan.osds,
    )
    # alien (BlueStore thread) settings alone do not force it
    spec, plan_b, ctx = reference("osd")
    deployed = cephcluster_patch(ctx["original"], plan_b)["cephConfig"]
    for osd in range(8):
        deployed[f"osd.{osd}"]["crimson_alien_op_num_threads"] = "7"
    assert not needs_reprovision(deployed, plan_b.osds)


def test_classic_never_needs_reprovision() -> None:
    spec, plan = plan_of(
        "c",
        {
            "target": {"rook": {"clusterName": "c"}},
            "osd": {"flavor": "classic", "count": 2, "cpuSet": "0-7"},
            "client": {"cpuSet": "8-11", "node": NODE},
        },
    )
    assert plan.flavor == "classic"
    assert not needs_reprovision({}, ())  # the operator passes no crimson OSDs


# ---------------------------------------------------------------- cleanup commands


def test_cleanup_commands_leave_original_keys_and_crimson_prerequisites() -> None:
    _, plan, ctx = reference("osd")
    original = {"osd.3": {"crimson_seastar_cpu_cores": "1-5"}}
    commands = restore_cleanup_commands(plan, original)
    assert ["config", "rm", "osd.0", "crimson_seastar_cpu_cores"] in commands
    # Rook re-applies what the original holds
    assert ["config", "rm", "osd.3", "crimson_seastar_cpu_cores"] not in commands
    assert ["config", "rm", "osd.3", "crimson_alien_op_num_threads"] in commands
    assert not [c for c in commands if c[2] == "global"]
    assert len(commands) == 8 * 3 - 1


def test_spec_options_go_to_the_planned_osds_only() -> None:
    """spec.osd.cephConfig lands in each planned osd.N, never in `osd` (every OSD of the
    cluster, the ones the run does not plan too); the plan's CPU layout wins over a spec
    value for the same option; the restore removes exactly what was written."""
    doc = copy.deepcopy(SEASTORE_56)
    doc["osd"]["cephConfig"] = {"osd_op_num_shards": "4", "crimson_seastar_cpu_cores": "9"}
    _, plan = plan_of("scoped", doc)
    assert plan.ceph.config["osd"] == doc["osd"]["cephConfig"]  # the plan's own view
    original = original_cephcluster()
    new = cephcluster_patch(original, plan)
    written = set(new["cephConfig"]) - set(original["spec"].get("cephConfig") or {})
    assert written == {"osd.0"} and "osd" not in new["cephConfig"]
    assert new["cephConfig"]["osd.0"]["osd_op_num_shards"] == "4"
    assert new["cephConfig"]["osd.0"]["crimson_seastar_cpu_cores"] == plan.osds[0].cpuset
    commands = restore_cleanup_commands(plan, original["spec"].get("cephConfig"))
    assert ["config", "rm", "osd.0", "osd_op_num_shards"] in commands
    assert not [c for c in commands if c[2] == "osd"]


# ---------------------------------------------------------------- merge patches

_scalars = st.one_of(
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False, width=16),
    st.text(max_size=3),
)
_keys = st.sampled_from(["a", "b", "c", "d", "cephConfig", "osd.0"])
# JSON documents without nulls (a merge patch cannot set null), nested dicts and lists
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=12,
)
_docs = st.dictionaries(_keys, _values, max_size=5)


def _exact(x: Any) -> str:
    return json.dumps(x, sort_keys=True)  # tells 1, 1.0 and true apart


@settings(max_examples=400, deadline=None)
@given(_docs, _docs)
def test_merge_patch_turns_original_into_new(original: dict[str, Any], new: dict[str, Any]) -> None:
    patch = merge_patch(original, new)
    assert _exact(apply_merge_patch(original, patch)) == _exact(new)


@settings(max_examples=400, deadline=None)
@given(_docs, _docs)
def test_restore_patch_brings_back_the_original(
    original: dict[str, Any], current: dict[str, Any]
) -> None:
    restored = apply_merge_patch(current, restore_patch(original, current))
    assert _exact(restored) == _exact(original)


@settings(max_examples=300, deadline=None)
@given(_docs, _docs, _docs)
def test_restore_of_our_paths_keeps_other_changes(
    original: dict[str, Any], ours_new: dict[str, Any], theirs: dict[str, Any]
) -> None:
    # we change key "cephConfig" only; someone else changes other top-level keys meanwhile
    ours_spec = {**original, "cephConfig": ours_new}
    ours = merge_patch(original, ours_spec)
    others = {k: v for k, v in theirs.items() if k != "cephConfig"}
    current = apply_merge_patch(ours_spec, others)
    restored = apply_merge_patch(current, restore_patch(original, current, ours=ours))
    expected = {**current}
    if "cephConfig" in original:
        expected["cephConfig"] = original["cephConfig"]
    else:
        expected.pop("cephConfig", None)
    assert _exact(restored) == _exact(expected)


@pytest.mark.parametrize(
    ("original", "current"),
    [
        ({}, {"cephConfig": {"osd.0": {"k": "v"}}}),  # key that did not exist
        ({"resources": {}}, {"resources": {"osd": {"limits": {"cpu": "5"}}}}),  # empty dict
        ({"resources": {"osd": {}}}, {}),
        ({"a": [1, {"b": 2}]}, {"a": [1]}),  # lists are replaced whole
        ({"a": {"b": {}}}, {"a": []}),  # object replaced by a list and back
        ({"a": 1}, {"a": True}),  # 1 == True in Python, not in JSON
        ({"a": 1}, {"a": 1.0}),
        ({"a": {"b": {"c": {}}}}, {"a": {"b": {"c": {"d": "x"}, "e": []}}}),
        ({"a": "x"}, {"a": {"x": "y"}}),
    ],
)
def test_restore_patch_cases(original: dict[str, Any], current: dict[str, Any]) -> None:
    patch = restore_patch(original, current)
    assert _exact(apply_merge_patch(current, patch)) == _exact(original)
    assert _exact(apply_merge_patch(original, merge_patch(original, current))) == _exact(current)


def test_restore_of_the_reference_patch_is_byte_exact() -> None:
    spec, plan, ctx = reference("socket")
    original = ctx["original"]["spec"]
    new = cephcluster_patch(ctx["original"], plan)
    current = apply_merge_patch(original, merge_patch(original, new))
    back = apply_merge_patch(current, restore_patch(original, current))
    assert json.dumps(back, sort_keys=True) == json.dumps(original, sort_keys=True)


def test_merge_patch_rejects_null_values() -> None:
    with pytest.raises(ValueError, match="new_spec.a.b is null"):
        merge_patch({}, {"a": {"b": None}})


def test_no_change_no_patch() -> None:
    spec = original_cephcluster()["spec"]
    assert merge_patch(spec, copy.deepcopy(spec)) == {}


# ---------------------------------------------------------------- Rook's own CRD schema


@functools.cache
def _rook_crds() -> Path:
    """ROOK_CRDS_YAML, else Rook's module fetched from the Go module proxy (once per
    machine: the Rook tier's build shares the module cache). A skip only when the machine
    cannot fetch it (no Go, no network); a fresh machine used to skip these tests."""
    if os.environ.get("ROOK_CRDS_YAML"):
        return Path(os.environ["ROOK_CRDS_YAML"])
    try:
        return rook_crds_yaml()
    except RookUnavailable as exc:
        if not environmental(exc):
            raise
        print(f"\nRook schema tests skipped: {exc}", file=sys.stderr)
        pytest.skip(f"Rook v1.17 crds.yaml cannot be fetched here: {exc}")


def rook_schema(kind: str) -> dict[str, Any]:
    """The openAPIV3Schema of a Rook CRD from Rook's own crds.yaml (v1.17, fetched from the
    Go module proxy, or ROOK_CRDS_YAML). Not committed: it is Rook's file."""
    path = _rook_crds()
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc["spec"]["names"]["kind"] == kind:
            return dict(doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    raise AssertionError(f"no CRD of kind {kind} in {path}")


def unknown_fields(schema: dict[str, Any], obj: Any, path: str = "") -> list[str]:
    """Keys the API server would silently prune: not in a structural schema's properties."""
    if isinstance(obj, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if schema.get("x-kubernetes-preserve-unknown-fields") and props is extra is None:
            return []  # anything goes here (nested schemas still prune)
        out = []
        for key, value in obj.items():
            if props is not None and key in props:
                out += unknown_fields(props[key], value, f"{path}.{key}")
            elif isinstance(extra, dict):
                out += unknown_fields(extra, value, f"{path}.{key}")
            elif props is not None and path not in ("", ".metadata"):
                out.append(f"{path}.{key}")
        return out
    if isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return [
            u for i, v in enumerate(obj) for u in unknown_fields(schema["items"], v, f"{path}[{i}]")
        ]
    return []


def validate_against(kind: str, obj: dict[str, Any]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = rook_schema(kind)
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(obj), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])
    assert not unknown_fields(schema, obj), f"fields {kind} does not know (pruned)"


@pytest.mark.parametrize("which", list(CASES))
def test_patched_spec_is_valid_for_rook(which: str) -> None:
    spec, plan, ctx = reference(which)
    new = cephcluster_patch(ctx["original"], plan)
    validate_against("CephCluster", {**ctx["original"], "spec": new})


def test_rook_schema_check_catches_a_wrong_field() -> None:
    bad = original_cephcluster()
    bad["spec"]["resources"]["osd"] = {"limits": {"cpu": "five"}}
    with pytest.raises(AssertionError, match="resources"):
        validate_against("CephCluster", bad)


def test_rook_schema_check_catches_an_unknown_field() -> None:
    bad = original_cephcluster()
    bad["spec"]["placement"]["osd"]["nodeAfinity"] = {}
    with pytest.raises(AssertionError, match="does not know"):
        validate_against("CephCluster", bad)


def test_empty_cephconfig_of_the_original_stays() -> None:
    spec, plan = plan_of(
        "c",
        {
            "target": {"rook": {"clusterName": "c"}},
            "osd": {"flavor": "classic", "count": 2, "cpuSet": "0-7"},
            "client": {"cpuSet": "8-11", "node": NODE},
        },
    )
    assert plan.ceph.config == {}
    new = cephcluster_patch({"spec": {"cephConfig": {}}}, plan)
    assert new["cephConfig"] == {}
    assert "cephConfig" not in cephcluster_patch({"spec": {}}, plan)
    assert new["resources"]["osd"]["limits"]["cpu"] == "4"  # the classic affinity set
