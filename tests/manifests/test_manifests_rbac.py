"""The checked-in RBAC is what the generator prints, and it stays least privilege: nothing
cluster-wide beyond runs, events, nodes and kopf; Rook's objects and Jobs only in the
namespaces the trust boundary (the chart's `targets`) names; no Secrets anywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from crimsonbench.manifests.rbac import operator_rbac, render
from crimsonbench.manifests.targets import RookGrant, TargetPolicy

ROOT = Path(__file__).resolve().parents[2]
KNOWN_VERBS = {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
WRITE = {"create", "update", "patch", "delete", "deletecollection"}
POLICY = TargetPolicy(
    rook=(RookGrant("rook-ceph", "rook-ceph", ("bench",)), RookGrant("rook-ceph", "second"),
          RookGrant("storage", "prod")),
    external_namespaces=("ext",),
)  # fmt: skip


def test_checked_in_rbac_matches_the_generator() -> None:
    assert (ROOT / "manifests" / "rbac.yaml").read_text() == render(), (
        "manifests/rbac.yaml drifted: run "
        "`python -m crimsonbench.manifests.rbac > manifests/rbac.yaml`"
    )


def test_rendered_yaml_is_the_objects() -> None:
    assert list(yaml.safe_load_all(render())) == operator_rbac()


def grants(objects: list[dict[str, Any]]) -> dict[str | None, dict[tuple[str, str], set[str]]]:
    """namespace (None: cluster-wide) -> (group, resource) -> verbs, over every role."""
    out: dict[str | None, dict[tuple[str, str], set[str]]] = {}
    for obj in objects:
        if obj["kind"] not in ("Role", "ClusterRole"):
            continue
        where = out.setdefault(obj["metadata"].get("namespace"), {})
        for rule in obj["rules"]:
            assert set(rule) <= {"apiGroups", "resources", "verbs", "resourceNames"}, rule
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    assert "*" not in (group, resource, *rule["verbs"]), rule
                    assert set(rule["verbs"]) <= KNOWN_VERBS, rule
                    where.setdefault((group, resource), set()).update(rule["verbs"])
    return out


def test_every_role_is_bound_to_the_operator_alone() -> None:
    objects = operator_rbac("ops", "bench-op", POLICY)
    roles = {(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in objects
             if o["kind"] in ("Role", "ClusterRole")}  # fmt: skip
    bindings = [o for o in objects if o["kind"].endswith("Binding")]
    assert len(bindings) == len(roles)
    for b in bindings:
        kind = b["roleRef"]["kind"]
        assert (kind, b["roleRef"]["name"], b["metadata"].get("namespace")) in roles
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": "bench-op", "namespace": "ops"}]


def test_least_privilege_scoped_by_the_targets() -> None:
    objects = operator_rbac("ops", "bench-op", POLICY)
    by_ns = grants(objects)
    assert set(by_ns) == {None, "ops", "rook-ceph", "storage", "bench", "ext"}
    cluster = by_ns[None]
    # cluster-wide: the runs and studies (any namespace), events, nodes, listing pods
    # (preflight: what the pods on a node request) and kopf's needs, nothing else
    assert set(cluster) == {
        ("bench.crimson.ceph.io", "benchmarkruns"), ("bench.crimson.ceph.io",
        "benchmarkruns/status"), ("bench.crimson.ceph.io", "benchmarkruns/finalizers"),
        ("bench.crimson.ceph.io", "benchmarkstudies"),
        ("bench.crimson.ceph.io", "benchmarkstudies/status"),
        ("", "events"), ("", "nodes"), ("", "namespaces"), ("", "pods"),
        ("apiextensions.k8s.io", "customresourcedefinitions"),
        ("kopf.dev", "clusterkopfpeerings"), ("kopf.dev", "kopfpeerings"),
    }  # fmt: skip
    assert cluster[("", "nodes")] == {"get", "list"}
    # a study creates its runs; it deletes none (the garbage collector does, by owner)
    assert "create" in cluster[("bench.crimson.ceph.io", "benchmarkruns")]
    assert "delete" not in cluster[("bench.crimson.ceph.io", "benchmarkruns")]
    assert not {"create", "delete"} & cluster[("bench.crimson.ceph.io", "benchmarkstudies")]
    assert cluster[("", "pods")] == {"list"}  # neither get, watch, nor any write
    assert not cluster[("", "namespaces")] & WRITE
    # no Secrets anywhere (Jobs mount them; nothing reads one), no RBAC, no impersonation
    for where in by_ns.values():
        assert not {r for _, r in where} & {"secrets", "roles", "clusterroles", "rolebindings",
                                            "clusterrolebindings", "users", "serviceaccounts",
                                            "serviceaccounts/token"}  # fmt: skip
    # the operator's namespace: leases, topology cache and saved originals, the probe
    assert by_ns["ops"][("coordination.k8s.io", "leases")] >= {"get", "create", "delete"}
    assert ("", "configmaps") in by_ns["ops"] and ("batch", "jobs") in by_ns["ops"]
    assert ("", "pods/exec") not in by_ns["ops"]
    # a namespace whose runs may target a cluster, and nothing more: results ConfigMaps
    assert by_ns["bench"] == {("", "configmaps"): {"get", "list", "create", "update", "patch"}}
    # an external run's namespace: its ConfigMaps and Jobs (they run there), no Rook objects
    assert ("batch", "jobs") in by_ns["ext"] and ("", "pods/exec") in by_ns["ext"]
    assert "delete" not in by_ns["ext"][("", "pods")]
    assert not any(g == "ceph.rook.io" for g, _ in by_ns["ext"])
    # a Rook namespace: the named CephClusters only, get and patch, never delete
    rook = [o for o in objects if o["kind"] == "Role" and o["metadata"]["name"] == "bench-op-rook"]
    assert [r["metadata"]["namespace"] for r in rook] == ["rook-ceph", "storage"]
    (named,) = [r for r in rook[0]["rules"] if r["resources"] == ["cephclusters"]]
    assert named == {"apiGroups": ["ceph.rook.io"], "resources": ["cephclusters"],
                     "resourceNames": ["rook-ceph", "second"],
                     "verbs": ["get", "patch"]}  # fmt: skip
    (named,) = [r for r in rook[1]["rules"] if r["resources"] == ["cephclusters"]]
    assert named["resourceNames"] == ["prod"]
    assert by_ns["rook-ceph"][("", "pods")] == {"get", "list", "delete"}  # OSD restarts
    assert ("", "pods/exec") in by_ns["rook-ceph"] and ("", "pods/exec") in by_ns["storage"]
    # ConfigMaps in a Rook namespace only because runs may live there (its own)
    assert ("", "configmaps") in by_ns["rook-ceph"] and ("", "configmaps") in by_ns["storage"]


def test_the_default_is_one_rook_cluster_for_runs_in_its_own_namespace() -> None:
    by_ns = grants(operator_rbac())
    assert set(by_ns) == {None, "crimsonbench", "rook-ceph"}
