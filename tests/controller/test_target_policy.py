"""The operator's trust boundary, without a cluster: which runs may act on which Rook
cluster (or an external one), what a refusal says, and the namespaces the RBAC is scoped
to. The same decision on the real API server, under the chart's RBAC: tests/k8s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from crimsonbench.controller.settings import Settings
from crimsonbench.manifests.targets import (
    DEFAULT_ROOK_TARGETS,
    RookGrant,
    TargetPolicy,
    kube_target,
    target_refusal,
)
from crimsonbench.spec.models import validate_spec

ROOT = Path(__file__).resolve().parents[2]
POLICY = TargetPolicy(
    rook=(RookGrant("rook-ceph", "rook-ceph", ("bench",)), RookGrant("storage", "prod")),
    external_namespaces=("ext",),
)


def spec(target: dict[str, Any]) -> Any:
    return validate_spec({"target": target, "osd": {"count": 1},
                          "client": {"node": "n", "pool": "bench"}})  # fmt: skip


def rook(namespace: str = "rook-ceph", name: str = "rook-ceph") -> Any:
    return spec({"rook": {"clusterName": name, "namespace": namespace}})


EXTERNAL = {"external": {"user": "admin", "monHost": "10.0.0.1", "keyringSecret": {"name": "k"}}}


@pytest.mark.parametrize(
    ("run_ns", "target", "allowed"),
    [
        ("rook-ceph", rook(), True),  # a run in the cluster's own namespace
        ("bench", rook(), True),  # listed in its allowedNamespaces
        ("storage", rook("storage", "prod"), True),  # own namespace, nothing else listed
        ("bench", rook("storage", "prod"), False),  # another cluster's allowed namespace
        ("intruder", rook(), False),  # a namespace nobody listed
        ("rook-ceph", rook("rook-ceph", "other"), False),  # an unlisted cluster, even beside
        ("bench", rook("elsewhere", "rook-ceph"), False),  # same name, other namespace
        ("ext", spec(EXTERNAL), True),
        ("bench", spec(EXTERNAL), False),  # a Rook run's namespace is not an external one
    ],
)
def test_who_may_target_what(run_ns: str, target: Any, allowed: bool) -> None:
    refused = target_refusal(kube_target(target, run_ns), run_ns, POLICY)
    assert (refused is None) is allowed, refused


def test_a_refusal_names_the_field_the_cluster_and_the_chart_value() -> None:
    unlisted = target_refusal(kube_target(rook("b", "other"), "a"), "a", POLICY)
    assert unlisted is not None and unlisted.field == "spec.target.rook"
    assert str(unlisted).startswith("spec.target.rook: the operator may not act on CephCluster "
                                    "b/other")  # fmt: skip
    assert "targets.rook names (rook-ceph/rook-ceph, storage/prod)" in str(unlisted)
    assert "{cephCluster: b/other, allowedNamespaces: [a]}" in str(unlisted)

    namespace = target_refusal(kube_target(rook(), "a"), "a", POLICY)
    assert namespace is not None and namespace.field == "spec.target.rook.namespace"
    assert "namespace a may not target CephCluster rook-ceph/rook-ceph" in str(namespace)
    assert "(allowed: runs in rook-ceph, bench)" in str(namespace)
    assert "adds a to its allowedNamespaces in the chart's targets.rook" in str(namespace)

    external = target_refusal(kube_target(spec(EXTERNAL), "a"), "a", POLICY)
    assert external is not None and external.field == "spec.target.external"
    assert "adds a to the chart's targets.externalNamespaces" in str(external)
    assert "mount its keyringSecret; allowed: ext" in str(external)


def test_the_safe_default_a_run_targets_only_its_own_namespace() -> None:
    default = TargetPolicy()
    assert default.rook == DEFAULT_ROOK_TARGETS == (RookGrant("rook-ceph", "rook-ceph"),)
    assert target_refusal(kube_target(rook(), "rook-ceph"), "rook-ceph", default) is None
    assert target_refusal(kube_target(rook(), "bench"), "bench", default) is not None
    assert target_refusal(kube_target(spec(EXTERNAL), "bench"), "bench", default) is not None
    # the chart's default values say the same
    values = yaml.safe_load((ROOT / "values.yaml").read_text())["targets"]
    assert [RookGrant.parse(t["cephCluster"], t["allowedNamespaces"]) for t in values["rook"]] \
        == list(DEFAULT_ROOK_TARGETS)  # fmt: skip
    assert values["externalNamespaces"] == []


def test_the_namespaces_the_rbac_is_scoped_to() -> None:
    policy = TargetPolicy(
        rook=(RookGrant("rook-ceph", "a", ("bench", "lab")), RookGrant("rook-ceph", "b"),
              RookGrant("storage", "c", ("bench",))),
        external_namespaces=("ext", "bench"),
    )  # fmt: skip
    assert policy.rook_namespaces == ("rook-ceph", "storage")
    assert policy.job_namespaces == ("rook-ceph", "storage", "ext", "bench")
    assert policy.run_namespaces == ("rook-ceph", "bench", "lab", "storage", "ext")


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ('[{"cephCluster": "rook-ceph"}]', "write it as namespace/name"),
        ('[{"cephCluster": "Rook/x"}]', "'Rook' is not a namespace"),
        ('[{"cephCluster": "a/b_c"}]', "'b_c' is not an object name"),
        ('[{"cephCluster": "a/b", "allowedNamespaces": ["*"]}]', "'*' is not a namespace"),
        ('[{"cephCluster": "a/b", "namespaces": []}]', "namespaces"),  # a typo
    ],
)
def test_the_operator_refuses_to_start_on_a_bad_targets_value(
    monkeypatch: pytest.MonkeyPatch, value: str, words: str
) -> None:
    monkeypatch.setenv("CRIMSONBENCH_ROOK_TARGETS", value)
    with pytest.raises(ValidationError, match=words.replace("*", r"\*")):
        Settings()


def test_settings_read_the_charts_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "CRIMSONBENCH_ROOK_TARGETS",
        '[{"allowedNamespaces":["bench"],"cephCluster":"rook-ceph/rook-ceph"}]',
    )
    monkeypatch.setenv("CRIMSONBENCH_EXTERNAL_NAMESPACES", '["ext"]')  # fmt: skip
    assert Settings().target_policy() == TargetPolicy(
        (RookGrant("rook-ceph", "rook-ceph", ("bench",)),), ("ext",)
    )
    monkeypatch.setenv("CRIMSONBENCH_EXTERNAL_NAMESPACES", '["a b"]')
    with pytest.raises(ValidationError, match="'a b' is not a namespace"):
        Settings()
