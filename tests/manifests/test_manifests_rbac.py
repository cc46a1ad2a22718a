"""The checked-in RBAC is what the generator prints, and it stays least privilege."""

from __future__ import annotations

from pathlib import Path

import yaml

from crimsonbench.manifests.rbac import operator_rbac, render

ROOT = Path(__file__).resolve().parents[2]
KNOWN_VERBS = {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}


def test_checked_in_rbac_matches_the_generator() -> None:
    assert (ROOT / "manifests" / "rbac.yaml").read_text() == render(), (
        "manifests/rbac.yaml drifted: run "
        "`python -m crimsonbench.manifests.rbac > manifests/rbac.yaml`"
    )


def test_rendered_yaml_is_the_objects() -> None:
    assert list(yaml.safe_load_all(render())) == operator_rbac()


def test_least_privilege() -> None:
    sa, role, binding, *fio = operator_rbac("ops", "bench-op", ("rook-ceph", "bench"))
    assert sa["kind"] == "ServiceAccount" and sa["metadata"]["namespace"] == "ops"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "bench-op",
    }  # fmt: skip
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "bench-op", "namespace": "ops"}
    ]
    grants: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        assert set(rule) == {"apiGroups", "resources", "verbs"}  # no nonResourceURLs, names
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                assert "*" not in (group, resource)
                assert set(rule["verbs"]) <= KNOWN_VERBS, rule
                grants.setdefault((group, resource), set()).update(rule["verbs"])
    assert grants[("", "secrets")] == {"get"}  # never list or watch Secrets
    assert grants[("ceph.rook.io", "cephclusters")] == {"get", "list", "watch", "patch"}
    assert "delete" not in grants[("ceph.rook.io", "cephclusters")]
    assert grants[("", "pods/log")] == {"get"}
    assert grants[("", "nodes")] == {"get", "list"}
    assert grants[("coordination.k8s.io", "leases")] >= {"get", "create", "update"}
    for kopf_needs in [("apiextensions.k8s.io", "customresourcedefinitions"),
                       ("", "namespaces"), ("kopf.dev", "clusterkopfpeerings"),
                       ("kopf.dev", "kopfpeerings")]:  # fmt: skip
        assert {"list", "watch"} <= grants[kopf_needs]
    assert ("bench.crimson.ceph.io", "benchmarkruns/status") in grants
    assert ("bench.crimson.ceph.io", "benchmarkruns/finalizers") in grants
    assert ("", "events") in grants
    # nothing that could escalate cluster-wide: no RBAC objects, no pods/exec, no
    # impersonation
    resources = {r for _, r in grants}
    assert not resources & {"roles", "clusterroles", "rolebindings", "clusterrolebindings",
                            "pods/exec", "users", "serviceaccounts/token"}  # fmt: skip
    assert "delete" not in grants[("", "pods")]  # cluster-wide: never
    # exec (and the crimson OSD restart after a restore) only where the fio pods run, by a
    # Role there, bound to the operator only
    assert [(d["kind"], d["metadata"]["namespace"]) for d in fio] == [
        ("Role", "rook-ceph"), ("RoleBinding", "rook-ceph"), ("Role", "bench"),
        ("RoleBinding", "bench"),
    ]  # fmt: skip
    for fio_role, fio_binding in zip(fio[::2], fio[1::2], strict=True):
        assert fio_role["rules"] == [
            {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]},
        ]
        assert fio_binding["roleRef"]["name"] == fio_role["metadata"]["name"] == "bench-op-fio"
        assert fio_binding["subjects"] == binding["subjects"]
