"""Where an operator run acts, resolved once from spec.target (manifests/targets.py), and
the lease the operator names after the cluster (controller/run_context.lease_name)."""

from __future__ import annotations

import pytest

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
        "target": {"external": {"monHost": "10.0.0.1:6789",
                                "keyringSecret": {"name": "kr", "key": "keyring"}}},
        "client": CLIENT,
    })  # fmt: skip
    t = kube_target(spec, "runs")
    assert (t.kind, t.jobs_namespace, t.rook_namespace, t.cluster_name) == (
        "external", "runs", None, None)  # fmt: skip
    assert t.external is not None and t.external.mon_host == "10.0.0.1:6789"
    assert not t.allow_reprovision
    assert t.where == "the external cluster at 10.0.0.1:6789"


@pytest.mark.parametrize(
    ("target", "lease"),
    [
        # the names the operator's leases had before this module (captured from
        # controller/run_context.target_key at 21c66ef): a run in flight across an
        # operator upgrade keeps its lease, and no second run takes the cluster meanwhile
        ({"rook": {"clusterName": "my-cluster"}}, "crimsonbench-f05803c444be"),
        ({"external": {"monHost": "10.0.0.1:6789",
                       "keyringSecret": {"name": "kr", "key": "keyring"}}},
         "crimsonbench-2178ad339633"),
    ],
)  # fmt: skip
def test_lease_names_are_stable_across_versions(target: dict, lease: str) -> None:
    spec = validate_spec({"target": target, "client": CLIENT})
    assert lease_name(kube_target(spec, "x")) == lease


def test_two_rook_clusters_never_share_a_lease() -> None:
    def lease(ns: str, name: str) -> str:
        body = {"target": {"rook": {"clusterName": name, "namespace": ns}}, "client": CLIENT}
        return lease_name(kube_target(validate_spec(body), "runs"))

    assert lease("a", "c") != lease("b", "c") != lease("b", "d")
    assert lease("a", "c") == lease("a", "c")
