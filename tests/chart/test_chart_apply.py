"""The chart's objects accepted by a real kube-apiserver: CRDs, RBAC, Deployment, Service,
ServiceMonitor and PrometheusRule (validated against prometheus-operator's real CRD schemas,
fetched from the Go module proxy at test time), dashboard ConfigMaps and the kopf peering
object. Then the real RBAC authorizer says the chart grants exactly Python's rules."""

from __future__ import annotations

import sys
import time
from typing import Any

import kubernetes.client
import pytest
import yaml
from chartlib import FULL_VALUES, ROOT, Render, prometheus_operator_crds
from harness import ControlPlane

from crimsonbench.manifests.rbac import RULES

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


@pytest.fixture(scope="module")
def applied(control_plane: ControlPlane, render: Render) -> list[dict[str, Any]]:
    try:
        crd_files = [p for p in prometheus_operator_crds() if p.name in WANTED_CRDS]
    except RuntimeError as exc:
        print(f"\ntests/chart skipped: {exc}", file=sys.stderr)
        pytest.skip(f"no prometheus-operator CRDs: {exc}")
    assert len(crd_files) == len(WANTED_CRDS), crd_files
    for path in crd_files:
        _wait_established(control_plane, control_plane.apply_yaml(path))
    for ns in (NS, "rook-ceph"):  # rook-ceph: the default rbac.fioNamespaces
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
    return out


def test_every_object_is_accepted(applied: list[dict[str, Any]]) -> None:
    kinds = {d["kind"] for d in applied}
    assert {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
            "Service", "Deployment", "ServiceMonitor", "ClusterKopfPeering"} <= kinds  # fmt: skip
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
             namespace: str) -> bool:  # fmt: skip
    res, _, sub = resource.partition("/")
    review = kubernetes.client.V1SubjectAccessReview(
        spec=kubernetes.client.V1SubjectAccessReviewSpec(
            user=f"system:serviceaccount:{NS}:{sa}",
            groups=["system:serviceaccounts", f"system:serviceaccounts:{NS}"],
            resource_attributes=kubernetes.client.V1ResourceAttributes(
                verb=verb, group=group, resource=res, subresource=sub or None,
                namespace=namespace or None,
            ),
        )
    )  # fmt: skip
    out = kubernetes.client.AuthorizationV1Api(api).create_subject_access_review(review)
    return bool(out.status.allowed)


def test_rbac_grants_pythons_rules_and_no_more(
    applied: list[dict[str, Any]], control_plane: ControlPlane
) -> None:
    (sa,) = [d["metadata"]["name"] for d in applied if d["kind"] == "ServiceAccount"]
    with control_plane.admin_api_client() as api:
        for group, resources, verbs, _why in RULES:
            for resource in resources:
                own_ns_only = (group, resource) == ("coordination.k8s.io", "leases")
                for verb in verbs:
                    assert _allowed(api, sa, verb, group, resource, NS), (verb, group, resource)
                    elsewhere = _allowed(api, sa, verb, group, resource, "bench")
                    assert elsewhere != own_ns_only, (verb, group, resource)
        for verb in ("create", "get"):  # exec: in the fio namespace only
            assert _allowed(api, sa, verb, "", "pods/exec", "rook-ceph")
            assert not _allowed(api, sa, verb, "", "pods/exec", "bench")
            assert not _allowed(api, sa, verb, "", "pods/exec", NS)
        assert not _allowed(api, sa, "list", "", "secrets", "bench")
        assert not _allowed(api, sa, "delete", "ceph.rook.io", "cephclusters", "rook-ceph")
        assert not _allowed(api, sa, "create", "rbac.authorization.k8s.io", "roles", NS)
