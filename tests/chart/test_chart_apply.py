"""The chart's objects accepted by a real kube-apiserver: CRDs, RBAC, Deployment, Service,
ServiceMonitor and PrometheusRule (validated against prometheus-operator's real CRD schemas,
fetched from the Go module proxy at test time), dashboard ConfigMaps, the kopf peering
object and the targets' ValidatingAdmissionPolicy. Then the real RBAC authorizer says what
the chart grants, namespace by namespace (nothing outside `targets`, no Secrets), and the
real admission chain refuses a run whose target the chart does not allow."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import Any

import kubernetes.client
import pytest
import yaml
from chartlib import FULL_VALUES, ROOT, Render, prometheus_operator_crds
from harness import ControlPlane
from harness.builds import environmental

from crimsonbench.manifests.rbac import ALL_RULES, CLUSTER_RULES, OPERATOR_NAMESPACE_RULES

pytestmark = pytest.mark.k8s
RELEASE, NS = "chartest", "chartest"
WANTED_CRDS = (
    "monitoring.coreos.com_servicemonitors.yaml",
    "monitoring.coreos.com_prometheusrules.yaml",
)


def _wait_established(cp: ControlPlane, docs: list[dict[str, Any]], timeout: float = 60) -> None:
    names = [d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"]
    deadline = time.monotonic() + timeout
    with cp.admin_api_client() as api:
        ext = kubernetes.client.ApiextensionsV1Api(api)
        for name in names:
            while True:
                conds = ext.read_custom_resource_definition(name).status.conditions or []
                if any(c.type == "Established" and c.status == "True" for c in conds):
                    break
                assert time.monotonic() < deadline, f"CRD {name} not Established: {conds}"
                time.sleep(0.1)


# values-full.yaml's targets: rook-ceph/rook-ceph (runs from rook-ceph and bench),
# storage/prod (runs from storage), external runs from ext; nobody lists intruder or rook-b
NAMESPACES = (NS, "rook-ceph", "bench", "storage", "ext", "intruder", "rook-b")


@pytest.fixture(scope="module")
def applied(control_plane: ControlPlane, render: Render) -> Iterator[list[dict[str, Any]]]:
    try:
        crd_files = [p for p in prometheus_operator_crds() if p.name in WANTED_CRDS]
    except RuntimeError as exc:
        if not environmental(exc):  # no Go, or the module proxy unreachable: nothing else
            raise
        print(f"\ntests/chart skipped: {exc}", file=sys.stderr)
        pytest.skip(f"no prometheus-operator CRDs: {exc}")
    assert len(crd_files) == len(WANTED_CRDS), crd_files
    for path in crd_files:
        _wait_established(control_plane, control_plane.apply_yaml(path))
    for ns in NAMESPACES:  # the chart makes Roles in those `targets` names
        control_plane.apply_yaml([{"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": ns}}])  # fmt: skip
    # our objects (Rook's CRDs are already here, from Rook's crds.yaml)
    docs = render(
        [FULL_VALUES],
        sets=["dashboards.enabled=true"],
        release=RELEASE, namespace=NS, crds=True,
    )  # fmt: skip
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    _wait_established(control_plane, control_plane.apply_yaml(crds))
    rest = [d for d in docs if d["kind"] != "CustomResourceDefinition"]
    before = len(control_plane.apply_warnings)
    out = control_plane.apply_yaml(rest)  # server-side apply; raises on any rejection
    assert control_plane.apply_warnings[before:] == []
    yield out
    # the admission policy applies to every BenchmarkRun of this (shared) API server: the
    # other k8s tests create runs this release's targets do not allow
    with control_plane.admin_api_client() as api:
        adm = kubernetes.client.AdmissionregistrationV1Api(api)
        for doc in out:
            name = doc["metadata"]["name"]
            with contextlib.suppress(kubernetes.client.ApiException):
                if doc["kind"] == "ValidatingAdmissionPolicyBinding":
                    adm.delete_validating_admission_policy_binding(name)
                elif doc["kind"] == "ValidatingAdmissionPolicy":
                    adm.delete_validating_admission_policy(name)
        # the API server drops a deleted policy from its cache a moment later: wait until
        # a run it refused is admitted again, or the next module's runs meet the policy
        custom = kubernetes.client.CustomObjectsApi(api)
        probe = _run("a", {"rook": {"clusterName": "rook-ceph", "namespace": "rook-ceph"}})
        deadline = time.monotonic() + 60
        while _refusal(custom, "intruder", probe):
            assert time.monotonic() < deadline, "the admission policy outlived its deletion"
            time.sleep(0.5)


def test_every_object_is_accepted(applied: list[dict[str, Any]]) -> None:
    kinds = {d["kind"] for d in applied}
    assert {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
            "Service", "Deployment", "ServiceMonitor", "ClusterKopfPeering",
            "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} <= kinds  # fmt: skip
    # the alert rules ship with the chart (dashboards/rules.yaml, checked in): always there
    groups = yaml.safe_load((ROOT / "dashboards" / "rules.yaml").read_text())["groups"]
    assert groups
    (pr,) = [d for d in applied if d["kind"] == "PrometheusRule"]
    assert pr["spec"]["groups"] == groups
    dashboards = list((ROOT / "dashboards").glob("*.json"))
    assert sum(d["kind"] == "ConfigMap" for d in applied) == len(dashboards)
    (deploy,) = [d for d in applied if d["kind"] == "Deployment"]
    assert deploy["spec"]["replicas"] == 2  # defaults filled in by the server, nothing lost
    assert deploy["spec"]["template"]["spec"]["containers"][0]["securityContext"][
        "readOnlyRootFilesystem"
    ]


def _allowed(api: kubernetes.client.ApiClient, sa: str, verb: str, group: str, resource: str,
             namespace: str, name: str | None = None) -> bool:  # fmt: skip
    res, _, sub = resource.partition("/")
    review = kubernetes.client.V1SubjectAccessReview(
        spec=kubernetes.client.V1SubjectAccessReviewSpec(
            user=f"system:serviceaccount:{NS}:{sa}",
            groups=["system:serviceaccounts", f"system:serviceaccounts:{NS}"],
            resource_attributes=kubernetes.client.V1ResourceAttributes(
                verb=verb, group=group, resource=res, subresource=sub or None,
                namespace=namespace or None, name=name,
            ),
        )
    )  # fmt: skip
    out = kubernetes.client.AuthorizationV1Api(api).create_subject_access_review(review)
    return bool(out.status.allowed)


def test_rbac_grants_only_inside_the_targets(
    applied: list[dict[str, Any]], control_plane: ControlPlane
) -> None:
    """Asked of the real authorizer for the operator's ServiceAccount: what every scope
    needs is granted where `targets` says, and nowhere else."""
    (sa,) = [d["metadata"]["name"] for d in applied if d["kind"] == "ServiceAccount"]
    with control_plane.admin_api_client() as api:

        def can(verb: str, group: str, resource: str, ns: str, name: str | None = None) -> bool:
            return _allowed(api, sa, verb, group, resource, ns, name)

        def where(verb: str, group: str, resource: str, name: str | None = None) -> set[str]:
            return {ns for ns in NAMESPACES if can(verb, group, resource, ns, name)}

        for rule in CLUSTER_RULES:  # in every namespace, and cluster-wide
            for resource in rule.resources:
                for verb in rule.verbs:
                    assert where(verb, rule.group, resource) == set(NAMESPACES), (verb, resource)
        for rule in OPERATOR_NAMESPACE_RULES:
            for resource in rule.resources:
                for verb in rule.verbs:
                    assert can(verb, rule.group, resource, NS), (verb, resource)
        # leases: external clusters' in the operator's namespace, each Rook cluster's beside
        # it (every install acting on that cluster sees the same one)
        assert where("create", "coordination.k8s.io", "leases") == {NS, "rook-ceph", "storage"}
        # results: where runs may live; Jobs and exec: beside a listed cluster, or ext
        assert where("create", "", "configmaps") == {NS, "rook-ceph", "bench", "storage", "ext"}
        assert where("create", "batch", "jobs") == {NS, "rook-ceph", "storage", "ext"}
        for verb in ("create", "get"):
            assert where(verb, "", "pods/exec") == {"rook-ceph", "storage", "ext"}
        assert where("delete", "", "pods") == {"rook-ceph", "storage"}  # OSD restarts only
        assert where("list", "metrics.k8s.io", "pods") == {"rook-ceph", "storage", "ext"}
        # the named CephClusters, nothing else of Rook's kind; never deleted
        assert where("patch", "ceph.rook.io", "cephclusters", "rook-ceph") == {"rook-ceph"}
        assert where("patch", "ceph.rook.io", "cephclusters", "prod") == {"storage"}
        assert not can("patch", "ceph.rook.io", "cephclusters", "rook-ceph", "other")
        assert not can("list", "ceph.rook.io", "cephclusters", "rook-ceph")
        assert where("delete", "ceph.rook.io", "cephclusters", "rook-ceph") == set()
        assert where("create", "ceph.rook.io", "cephblockpools") == {"rook-ceph", "storage"}
        # no Secrets, no RBAC, anywhere
        for verb in ("get", "list", "watch"):
            assert where(verb, "", "secrets") == set()
            assert not can(verb, "", "secrets", "")
        assert where("create", "rbac.authorization.k8s.io", "roles") == set()
        # every rule Python lists is granted somewhere
        for rule in ALL_RULES:
            for resource in rule.resources:
                name = "rook-ceph" if rule.named_clusters else None
                assert where(rule.verbs[0], rule.group, resource, name), rule


def _run(name: str, target: dict[str, Any]) -> dict[str, Any]:
    spec = {"target": target, "osd": {"count": 1}, "client": {"node": "node-a", "pool": "bench"}}
    return {"apiVersion": "bench.crimson.ceph.io/v1alpha1", "kind": "BenchmarkRun",
            "metadata": {"name": name}, "spec": spec}  # fmt: skip


def _refusal(custom: Any, ns: str, body: dict[str, Any]) -> str:
    """'' when the API server admits body (dry run), else its message."""
    try:
        custom.create_namespaced_custom_object("bench.crimson.ceph.io", "v1alpha1", ns,
                                               "benchmarkruns", body, dry_run="All")  # fmt: skip
    except kubernetes.client.ApiException as exc:
        assert exc.status in (403, 422), exc
        return str(exc.body)
    return ""


def test_admission_refuses_targets_the_chart_does_not_allow(
    applied: list[dict[str, Any]], control_plane: ControlPlane
) -> None:
    rook = {"rook": {"clusterName": "rook-ceph", "namespace": "rook-ceph"}}
    prod = {"rook": {"clusterName": "prod", "namespace": "storage"}}
    external = {
        "external": {"user": "admin", "monHost": "10.0.0.1", "keyringSecret": {"name": "k"}}
    }
    with control_plane.admin_api_client() as api:
        custom = kubernetes.client.CustomObjectsApi(api)
        adm = kubernetes.client.AdmissionregistrationV1Api(api)
        (policy,) = [d["metadata"]["name"] for d in applied
                     if d["kind"] == "ValidatingAdmissionPolicy"
                     and d["metadata"]["name"].endswith("-targets")]  # fmt: skip
        deadline = time.monotonic() + 60
        while not _refusal(custom, "intruder", _run("a", rook)):  # the policy is loaded
            assert time.monotonic() < deadline, "the admission policy never took effect"
            time.sleep(0.5)
        # the API server type-checked every expression against the CRD's schema (it
        # reports so in the policy's status a moment after the policy takes effect)
        while (
            checked := adm.read_validating_admission_policy(policy).status
        ).type_checking is None:
            assert time.monotonic() < deadline, "the API server never type-checked the policy"
            time.sleep(0.5)
        assert not checked.type_checking.expression_warnings, checked.type_checking

        assert _refusal(custom, "bench", _run("a", rook)) == ""
        assert _refusal(custom, "rook-ceph", _run("a", rook)) == ""
        assert _refusal(custom, "storage", _run("a", prod)) == ""
        assert _refusal(custom, "ext", _run("a", external)) == ""
        said = _refusal(custom, "intruder", _run("a", rook))
        assert (
            "spec.target.rook.namespace: BenchmarkRuns in namespace intruder may not target "
            "CephCluster rook-ceph/rook-ceph (allowed: runs in rook-ceph, bench)"
        ) in said
        assert "adds intruder to its allowedNamespaces in the crimsonbench chart value " \
            "targets.rook" in said  # fmt: skip
        said = _refusal(custom, "bench", _run("a", prod))  # a listed cluster, not for bench
        assert "namespace bench may not target CephCluster storage/prod" in said
        unlisted = {"rook": {"clusterName": "x", "namespace": "rook-b"}}
        said = _refusal(custom, "rook-b", _run("a", unlisted))  # not even from its own ns
        assert "spec.target.rook: the operator may not act on CephCluster rook-b/x" in said
        assert "targets.rook names (rook-ceph/rook-ceph, storage/prod)" in said
        said = _refusal(custom, "bench", _run("a", external))
        assert "spec.target.external: BenchmarkRuns in namespace bench may not" in said
        assert "targets.externalNamespaces" in said

        # a run let in: the operator's own updates pass, a changed target does not
        g, v, plural = "bench.crimson.ceph.io", "v1alpha1", "benchmarkruns"
        custom.create_namespaced_custom_object(g, v, "bench", plural, _run("kept", rook))
        try:
            custom.patch_namespaced_custom_object(
                g, v, "bench", plural, "kept",
                {"metadata": {"finalizers": ["bench.crimson.ceph.io/finalizer"],
                              "annotations": {"bench.crimson.ceph.io/x": "y"}}})  # fmt: skip
            with pytest.raises(kubernetes.client.ApiException) as err:
                custom.patch_namespaced_custom_object(g, v, "bench", plural, "kept",
                                                      {"spec": {"target": prod}})  # fmt: skip
            assert "may not target CephCluster storage/prod" in str(err.value.body)
        finally:
            custom.patch_namespaced_custom_object(g, v, "bench", plural, "kept",
                                                  {"metadata": {"finalizers": None}})  # fmt: skip
            custom.delete_namespaced_custom_object(g, v, "bench", plural, "kept")
