"""Where an operator run acts, resolved once from spec.target (manifests/targets.py), and
the lease the operator names after the cluster (controller/run_context.lease_name)."""

from __future__ import annotations

from crimsonbench.controller.run_context import lease_name
from crimsonbench.manifests.targets import kube_target
from crimsonbench.spec.models import validate_spec

CLIENT = {"node": "n1"}


def test_rook_target_acts_in_rooks_namespace() -> None:
    spec = validate_spec({
        "target": {"rook": {"clusterName": "my-cluster", "namespace": "storage",
                            "allowReprovision": True}},
        "client": CLIENT,
    })  # fmt: skip
    t = kube_target(spec, "runs")
    assert (t.kind, t.rook_namespace, t.cluster_name) == ("rook", "storage", "my-cluster")
    assert t.jobs_namespace == "storage"  # Rook's Secrets mount only there
    assert t.allow_reprovision and t.external is None
    assert t.where == "CephCluster storage/my-cluster"


def test_external_target_acts_beside_the_run() -> None:
    spec = validate_spec({
        "target": {"external": {"user": "admin", "monHost": "10.0.0.1:6789",
                                "keyringSecret": {"name": "kr", "key": "keyring"}}},
        "client": {**CLIENT, "pool": "bench"},
    })  # fmt: skip
    t = kube_target(spec, "runs")
    assert (t.kind, t.jobs_namespace, t.rook_namespace, t.cluster_name) == (
        "external", "runs", None, None)  # fmt: skip
    assert t.external is not None and t.external.mon_host == "10.0.0.1:6789"
    assert not t.allow_reprovision
    assert t.where == "the external cluster at 10.0.0.1:6789"


def test_a_lease_is_named_after_the_clusters_identity_alone() -> None:
    """issue 36 #8: one cluster, one lease, however a spec spells it (a CephCluster's uid,
    an external cluster's fsid); two clusters never share one."""
    uid = "0f5b1c2e-7d4a-4b1e-9c1d-2a3b4c5d6e7f"
    assert lease_name(uid) == lease_name(uid) != lease_name(uid.replace("0f", "1f"))
    assert lease_name(uid).startswith("crimsonbench-") and len(lease_name(uid)) == 25
