"""The repository root is the operator's Helm chart: lint, render and check what it renders.

The API server half (the same objects applied to a real kube-apiserver) is
test_chart_apply.py. In the k8s tier, beside it: every test here runs the real helm, which
a fresh machine builds first (minutes): the quick tier stays unit tests."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_rbac import render as render_rbac_rules
from chartlib import FULL_VALUES, ROOT, Render, run_helm

from crimsonbench.controller.settings import Settings
from crimsonbench.manifests.rbac import operator_rbac
from crimsonbench.manifests.targets import RookGrant, TargetPolicy

pytestmark = pytest.mark.k8s

OUR_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
             "Service", "Deployment", "ValidatingAdmissionPolicy",
             "ValidatingAdmissionPolicyBinding"}  # fmt: skip


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def ours(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chart's own objects."""
    return [
        d for d in docs
        if (d["metadata"].get("labels") or {}).get("helm.sh/chart", "").startswith("crimsonbench-")
    ]  # fmt: skip


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deploy,) = by_kind(ours(docs), "Deployment")
    (c,) = deploy["spec"]["template"]["spec"]["containers"]
    return dict(c)


POD_IP = "10.244.1.7"  # what the downward API would give


def env_of(c: dict[str, Any], namespace: str) -> dict[str, str]:
    from_pod = {"metadata.namespace": namespace, "status.podIP": POD_IP}
    out = {}
    for e in c["env"]:
        if "valueFrom" in e:
            out[e["name"]] = from_pod[e["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            out[e["name"]] = e["value"]
    return out


def rule_set(rules: list[dict[str, Any]]) -> Counter[tuple[str, str, frozenset[str]]]:
    return Counter(
        (g, r, frozenset(rule["verbs"]))
        for rule in rules for g in rule["apiGroups"] for r in rule["resources"]
    )  # fmt: skip


@pytest.mark.parametrize("values", [[], [FULL_VALUES]], ids=["default", "full"])
def test_lint(helm: Path, values: list[Path]) -> None:
    args = [a for v in values for a in ("-f", str(v))]
    out = run_helm(helm, "lint", ".", "--strict", *args).stdout
    assert "0 chart(s) failed" in out, out


def test_default_render(render: Render) -> None:
    docs = render()
    assert {d["kind"] for d in docs} == OUR_KINDS  # no ServiceMonitor, rules, dashboards, Rook
    c = container(docs)
    assert c["image"] == "crimsonbench-operator:0.1.0"
    assert c["command"] == ["kopf"]
    assert c["args"] == [
        "run", "-m", "crimsonbench.controller.main", "--all-namespaces", "--standalone",
        "--liveness=http://0.0.0.0:8080/healthz", "--log-format=json",
    ]  # fmt: skip
    for probe in (c["livenessProbe"], c["readinessProbe"]):
        assert probe["httpGet"] == {"path": "/healthz", "port": "health"}
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {"health": 8080, "metrics": 9464}
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] and sc["runAsUser"] == 65532 and sc["readOnlyRootFilesystem"]
    assert sc["capabilities"] == {"drop": ["ALL"]} and not sc["allowPrivilegeEscalation"]
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["resources"]["requests"]["memory"] == "128Mi"
    assert c["resources"]["limits"]["memory"] == "256Mi"  # RSS ≈100 MiB
    (deploy,) = by_kind(docs, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "hostNetwork" not in pod
    assert deploy["spec"]["strategy"] == {"type": "Recreate"}  # never two standalone operators
    assert deploy["spec"]["replicas"] == 1
    (svc,) = by_kind(docs, "Service")
    assert svc["spec"]["ports"] == [
        {"name": "metrics", "port": 9464, "targetPort": "metrics", "protocol": "TCP"}
    ]
    pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()


@pytest.mark.parametrize("values", [[], [FULL_VALUES]], ids=["default", "full"])
def test_env_is_what_the_operator_reads(
    render: Render, values: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = env_of(container(render(values, namespace="bench-ops")), "bench-ops")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = Settings()  # the operator's own parsing: fails on a malformed value
    assert settings.operator_namespace == "bench-ops"  # the release namespace
    assert settings.metrics_port == 9464
    assert settings.metrics_address == POD_IP  # what the Service reaches, not 0.0.0.0
    if not values:
        assert settings.fio_image == "crimsonbench-fio:0.1.0"
        assert settings.host_network is False and settings.job_tolerations == []
        assert settings.namespace is None
        assert settings.target_policy() == TargetPolicy()  # the same safe default
        defaults = Settings.model_fields  # the chart's defaults are the operator's
        assert settings.error_timeout_seconds == defaults["error_timeout_seconds"].default
        assert settings.restore_timeout_seconds == defaults["restore_timeout_seconds"].default
        return
    assert settings.target_policy() == TargetPolicy(
        (RookGrant("rook-ceph", "rook-ceph", ("bench",)), RookGrant("storage", "prod")), ("ext",)
    )
    assert settings.fio_image == "localhost/crimsonbench-fio:dev"
    assert settings.image_pull_policy == "Never"
    assert settings.host_network is True
    assert settings.job_tolerations == [
        {"key": "node-role.kubernetes.io/storage", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert (settings.tick_seconds, settings.step_grace_seconds) == (2.5, 60)
    assert (settings.rollout_timeout_seconds, settings.finished_run_ttl_seconds) == (900, 3600)
    assert (settings.error_timeout_seconds, settings.restore_timeout_seconds) == (300, 5400)
    assert env["TZ"] == "UTC"  # extraEnv


def _policy(values: dict[str, Any]) -> TargetPolicy:
    return TargetPolicy(
        rook=tuple(RookGrant.parse(t["cephCluster"], t.get("allowedNamespaces") or ())
                   for t in values["rook"]),
        external_namespaces=tuple(values["externalNamespaces"]),
    )  # fmt: skip


def _rbac(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    kinds = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    return [d for d in docs if d["kind"] in kinds]


def _strip(obj: dict[str, Any]) -> dict[str, Any]:
    """Without labels: the chart's carry helm's, Python's its own."""
    return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "labels"}}


@pytest.mark.parametrize("values", [[], [FULL_VALUES]], ids=["default", "full"])
def test_rbac_is_pythons_for_the_same_targets(render: Render, values: list[Path]) -> None:
    """Every RBAC object the chart renders is operator_rbac()'s for the same `targets`:
    the same Roles in the same namespaces, the same rules (tests/chart/test_chart_apply.py
    asks the real authorizer what they grant)."""
    docs = render(values, namespace="ops")
    merged = yaml.safe_load((ROOT / "values.yaml").read_text())["targets"]
    for v in values:
        merged.update(yaml.safe_load(v.read_text()).get("targets") or {})
    python = operator_rbac("ops", "crimsonbench-operator", _policy(merged))

    def key(d: dict[str, Any]) -> tuple[str, str, str]:
        return (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])

    chart = sorted((_strip(d) for d in _rbac(docs)), key=key)
    assert chart == sorted((_strip(d) for d in python), key=key)


def test_rbac_of_the_full_values_reaches_only_the_listed_namespaces(render: Render) -> None:
    docs = render([FULL_VALUES], namespace="ops")
    roles = sorted((d["metadata"]["name"], d["metadata"]["namespace"])
                   for d in by_kind(docs, "Role"))  # fmt: skip
    assert roles == [
        ("crimsonbench-operator", "ops"),
        ("crimsonbench-operator-jobs", "ext"), ("crimsonbench-operator-jobs", "rook-ceph"),
        ("crimsonbench-operator-jobs", "storage"),
        ("crimsonbench-operator-rook", "rook-ceph"), ("crimsonbench-operator-rook", "storage"),
        ("crimsonbench-operator-runs", "bench"), ("crimsonbench-operator-runs", "ext"),
        ("crimsonbench-operator-runs", "rook-ceph"), ("crimsonbench-operator-runs", "storage"),
    ]  # fmt: skip
    (cluster_role,) = by_kind(docs, "ClusterRole")
    kept_local = {"secrets", "configmaps", "jobs", "pods/exec", "cephclusters"}
    assert not [r for r in cluster_role["rules"] if kept_local & set(r["resources"])]
    # pods cluster-wide: list only (preflight adds up what the pods on a node request)
    assert [r["verbs"] for r in cluster_role["rules"] if "pods" in r["resources"]] == [["list"]]


def named(docs: list[dict[str, Any]], kind: str, suffix: str) -> list[dict[str, Any]]:
    return [d for d in by_kind(docs, kind) if d["metadata"]["name"].endswith(suffix)]


def test_admission_policy_carries_the_targets(render: Render) -> None:
    """CEL cannot read chart values: they are written into the policy's expressions (the
    real API server applies it in test_chart_apply.py)."""
    (policy,) = named(render([FULL_VALUES]), "ValidatingAdmissionPolicy", "-targets")
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert json.loads(variables["allowed"]) == {
        "rook-ceph/rook-ceph": ["rook-ceph", "bench"], "storage/prod": ["storage"]}  # fmt: skip
    assert json.loads(variables["external"]) == ["ext"]
    (binding,) = named(render([FULL_VALUES]), "ValidatingAdmissionPolicyBinding", "-targets")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"],
                               "validationActions": ["Deny"]}  # fmt: skip
    (default,) = named(render(), "ValidatingAdmissionPolicy", "-targets")
    assert json.loads({v["name"]: v["expression"] for v in default["spec"]["variables"]}[
        "allowed"]) == {"rook-ceph/rook-ceph": ["rook-ceph"]}  # fmt: skip
    off = render(sets=["targets.admissionPolicy=false"])
    assert not named(off, "ValidatingAdmissionPolicy", "-targets")


def test_reach_policies_carry_the_operator_and_the_driver_names(render: Render) -> None:
    """The reach policies (templates/reachpolicy.yaml; applied to the real API server in
    tests/k8s/test_reach.py) match the release's ServiceAccount alone, spell the driver's
    pod names as manifests/fio_driver.py makes them, and write the listed Rook namespaces
    and jobs.hostNetwork into the Jobs' rules."""
    from crimsonbench.manifests.fio_driver import DRIVER_POD_NAME_RE

    docs = render([FULL_VALUES], release="bench", namespace="ops")
    policies = {d["metadata"]["name"]: d for d in by_kind(docs, "ValidatingAdmissionPolicy")
                if "-reach-" in d["metadata"]["name"]}  # fmt: skip
    kinds = ("pods", "jobs", "networkpolicies", "rookobjects")
    assert sorted(policies) == sorted(f"bench-crimsonbench-operator-reach-{k}" for k in kinds)
    bindings = [b["spec"]["policyName"] for b in by_kind(docs, "ValidatingAdmissionPolicyBinding")]
    assert set(policies) <= set(bindings)
    for policy in policies.values():
        (cond,) = policy["spec"]["matchConditions"]
        assert cond["expression"] == (
            "request.userInfo.username == 'system:serviceaccount:ops:bench-crimsonbench-operator'"
        )
        assert policy["spec"]["failurePolicy"] == "Fail"
    exec_rule = policies["bench-crimsonbench-operator-reach-pods"]["spec"]["validations"][0]
    assert f"request.name.matches('{DRIVER_POD_NAME_RE}')" in exec_rule["expression"]
    jobs = policies["bench-crimsonbench-operator-reach-jobs"]["spec"]
    assert {v["name"]: v["expression"] for v in jobs["variables"]}["rook"] == (
        'request.namespace in ["rook-ceph","storage"]'
    )
    host = "!(has(variables.pod.hostNetwork) && variables.pod.hostNetwork)"
    assert not any(host in v["expression"] for v in jobs["validations"])  # values-full: on
    refused = render([FULL_VALUES], sets=["jobs.hostNetwork=false"])
    jobs = next(d for d in by_kind(refused, "ValidatingAdmissionPolicy")
                if d["metadata"]["name"].endswith("-reach-jobs"))  # fmt: skip
    assert any(host in v["expression"] for v in jobs["spec"]["validations"])
    off = render(sets=["rbac.reachPolicy=false"])
    assert not [d for d in by_kind(off, "ValidatingAdmissionPolicy")
                if "-reach-" in d["metadata"]["name"]]  # fmt: skip


@pytest.mark.parametrize(
    "value",
    [
        "targets.rook[0].cephCluster=rook-ceph",  # no namespace
        "targets.rook[0].cephCluster=Rook/x",
        "targets.rook[0].allowedNamespaces={*}",  # no wildcard
        "targets.externalNamespaces={a_b}",
    ],
)
def test_values_schema_rejects_bad_targets(helm: Path, value: str) -> None:
    proc = subprocess.run(
        [str(helm), "template", "x", ".", "--set", value],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode != 0 and "targets" in proc.stderr, proc.stderr


def test_rbac_rules_template_is_generated() -> None:
    assert (ROOT / "templates" / "_rbac-rules.tpl").read_text() == render_rbac_rules(), (
        "templates/_rbac-rules.tpl drifted from crimsonbench/manifests/rbac.py: "
        "run e2e/render-manifests.sh"
    )


def test_full_render(render: Render) -> None:
    docs = render([FULL_VALUES], release="cb")
    mine = ours(docs)
    c = container(docs)
    assert c["command"][:2] == ["/bin/sh", "-c"] and "--priority" in c["command"][2]
    assert "--peering=cb-crimsonbench" in c["args"] and "--standalone" not in c["args"]
    assert c["args"][-2:] == ["--verbose", "--log-refkey=crimsonbench"]
    assert c["image"] == "localhost/crimsonbench-operator:dev" and c["imagePullPolicy"] == "Never"
    (deploy,) = by_kind(mine, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    assert deploy["spec"]["replicas"] == 2 and deploy["spec"]["strategy"]["type"] == "RollingUpdate"
    assert pod["hostNetwork"] and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["tolerations"][0]["key"] == "node-role.kubernetes.io/control-plane"
    assert "nodeAffinity" in pod["affinity"] and pod["imagePullSecrets"] == [{"name": "regcred"}]
    (peering,) = by_kind(mine, "ClusterKopfPeering")
    assert peering["metadata"]["name"] == "cb-crimsonbench"
    (sm,) = by_kind(mine, "ServiceMonitor")
    assert sm["metadata"]["labels"]["release"] == "prom"
    assert sm["metadata"]["labels"]["team"] == "storage"
    assert sm["spec"]["endpoints"][0]["port"] == "metrics"
    (svc,) = by_kind(mine, "Service")
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    rules_file = ROOT / "dashboards" / "rules.yaml"
    rules = yaml.safe_load(rules_file.read_text()) if rules_file.is_file() else None
    if rules and rules.get("groups"):
        (pr,) = by_kind(mine, "PrometheusRule")
        assert pr["spec"]["groups"] == rules["groups"]
        assert pr["metadata"]["labels"]["release"] == "prom"
    else:
        assert not by_kind(mine, "PrometheusRule")
    dashboards = sorted((ROOT / "dashboards").glob("*.json"))
    cms = by_kind(mine, "ConfigMap")
    assert len(cms) == len(dashboards)
    for cm, path in zip(sorted(cms, key=lambda d: next(iter(d["data"]))), dashboards, strict=True):
        assert cm["data"] == {path.name: path.read_text().rstrip("\n")}
        assert json.loads(cm["data"][path.name]) == json.loads(path.read_text())
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert cm["metadata"]["annotations"] == {"grafana_folder": "Ceph"}
    # no Rook in this chart: Rook comes from its own chart repository
    assert not {"CephCluster", "CustomResourceDefinition"} & {d["kind"] for d in docs}


def test_watch_namespace_uses_a_namespaced_peering(render: Render) -> None:
    docs = render(sets=["replicas=3", "watchNamespace=runs"], release="cb")
    c = container(docs)
    assert "--namespace=runs" in c["args"] and "--all-namespaces" not in c["args"]
    assert env_of(c, "x")["CRIMSONBENCH_NAMESPACE"] == "runs"
    (peering,) = by_kind(docs, "KopfPeering")
    assert peering["metadata"] == {**peering["metadata"], "name": "cb-crimsonbench",
                                   "namespace": "runs"}  # fmt: skip
    assert not by_kind(docs, "ClusterKopfPeering")


def test_values_schema_rejects_typos(helm: Path) -> None:
    proc = subprocess.run(
        [str(helm), "template", "x", ".", "--set", "settings.tickSecond=3"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode != 0 and "tickSecond" in proc.stderr


def _chart_copy(tmp_path: Path, dashboards: dict[str, str]) -> Path:
    chart = tmp_path / "chart"
    chart.mkdir()
    for name in ("Chart.yaml", "values.yaml", "values.schema.json", ".helmignore"):
        shutil.copy(ROOT / name, chart / name)
    for d in ("templates", "crds", "charts"):
        shutil.copytree(ROOT / d, chart / d)
    (chart / "dashboards").mkdir()
    for name, text in dashboards.items():
        (chart / "dashboards" / name).write_text(text)
    return chart


@pytest.mark.parametrize("n", [0, 2])
def test_dashboards_and_rules_for_any_number_of_files(helm: Path, tmp_path: Path, n: int) -> None:
    files = {f"board-{i}.json": json.dumps({"title": f"b{i}", "panels": []}) for i in range(n)}
    if n:
        files["rules.yaml"] = yaml.safe_dump(
            {"groups": [{"name": "g", "rules": [{"record": "r", "expr": "up"}]}]}
        )
    chart = _chart_copy(tmp_path, files)
    sets = "dashboards.enabled=true,metrics.serviceMonitor.enabled=true,"
    sets += "metrics.prometheusRule.enabled=true"
    out = run_helm(helm, "template", "x", str(chart), "--set", sets).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert len(by_kind(docs, "ConfigMap")) == n
    assert len(by_kind(docs, "PrometheusRule")) == (1 if n else 0)  # no rules.yaml: nothing


def test_package_holds_only_chart_files(helm: Path, tmp_path: Path) -> None:
    run_helm(helm, "package", ".", "--destination", str(tmp_path))
    (tgz,) = tmp_path.glob("crimsonbench-*.tgz")
    with tarfile.open(tgz) as tar:
        names = [n.split("/", 1)[1] for n in tar.getnames()]
    top = {n.split("/")[0] for n in names}
    assert top <= {"Chart.yaml", "values.yaml", "values.schema.json", ".helmignore", "LICENSE",
                   "README.md", "templates", "crds", "charts", "dashboards"}, top  # fmt: skip
    assert {"crds/benchmarkrun.yaml", "crds/kopf-peering.yaml"} <= set(names)
    assert not [n for n in names if n.startswith("charts/")]  # nothing vendored
    for n in names:
        if n.startswith("dashboards/"):
            assert n.endswith(".json") or n == "dashboards/rules.yaml", n
    for path in (ROOT / "dashboards").glob("*.json"):
        assert f"dashboards/{path.name}" in names


def test_checked_in_manifests_are_a_fresh_render(helm: Path, tmp_path: Path) -> None:
    subprocess.run(
        ["bash", str(ROOT / "e2e" / "render-manifests.sh"), str(tmp_path)],
        cwd=ROOT, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    for rel in ("templates/_rbac-rules.tpl", "manifests/rbac.yaml", "manifests/crimsonbench.yaml"):
        assert (tmp_path / rel).read_text() == (ROOT / rel).read_text(), (
            f"{rel} drifted: run e2e/render-manifests.sh"
        )
    docs = [d for d in yaml.safe_load_all((ROOT / "manifests/crimsonbench.yaml").read_text()) if d]
    assert docs[0] == {"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": "crimsonbench"}}  # fmt: skip
    crds = {d["metadata"]["name"] for d in by_kind(docs, "CustomResourceDefinition")}
    assert crds == {"benchmarkruns.bench.crimson.ceph.io",
                    "benchmarkstudies.bench.crimson.ceph.io", "clusterkopfpeerings.kopf.dev",
                    "kopfpeerings.kopf.dev"}  # fmt: skip
    assert {d["kind"] for d in docs} == OUR_KINDS | {"Namespace", "CustomResourceDefinition"}


DIGEST = "sha256:" + "ab" * 32


def test_metrics_are_served_on_the_pod_ip_or_the_address_given(
    render: Render, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator served its metrics on 0.0.0.0: with hostNetwork, on every interface of
    the node. Default now: the pod's IP from the downward API; metrics.address overrides."""
    (addr,) = [e for e in container(render())["env"] if e["name"] == "CRIMSONBENCH_METRICS_ADDRESS"]
    assert addr["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    env = env_of(container(render(sets=["metrics.address=127.0.0.1"])), "x")
    assert env["CRIMSONBENCH_METRICS_ADDRESS"] == "127.0.0.1"
    monkeypatch.delenv("CRIMSONBENCH_METRICS_ADDRESS", raising=False)
    assert Settings().metrics_address == "127.0.0.1"  # `crimsonbench operator` on a desk


def test_images_by_digest_when_given(render: Render, monkeypatch: pytest.MonkeyPatch) -> None:
    c = container(render(sets=[f"image.digest={DIGEST}", f"fio.image.digest={DIGEST}"]))
    assert c["image"] == f"crimsonbench-operator@{DIGEST}"
    monkeypatch.setenv("CRIMSONBENCH_FIO_IMAGE", env_of(c, "x")["CRIMSONBENCH_FIO_IMAGE"])
    assert Settings().fio_image == f"crimsonbench-fio@{DIGEST}"


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("image.tag=latest", ["at '/image/tag'"]),
        ("fio.image.tag=latest", ["at '/fio/image/tag'"]),
        ("image.digest=sha256:abc", ["at '/image/digest'"]),
        ("fio.image.digest=md5:" + "0" * 32, ["at '/fio/image/digest'"]),
        ("metrics.address=0.0.0.0;rm", ["at '/metrics/address'"]),
    ],
)
def test_values_schema_rejects_mutable_tags_and_bad_digests(
    helm: Path, value: str, words: list[str]
) -> None:
    proc = subprocess.run(
        [str(helm), "template", "x", ".", "--set", value],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode != 0, proc.stdout[-300:]
    for word in words:
        assert word in proc.stderr, proc.stderr


@pytest.mark.parametrize("ref", ["crimsonbench-fio:latest", "crimsonbench-fio",
                                 "registry:5000/crimsonbench-fio", "r.io/fio:latest@"])  # fmt: skip
def test_the_operator_refuses_a_fio_image_without_a_fixed_version(
    ref: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic import ValidationError

    monkeypatch.setenv("CRIMSONBENCH_FIO_IMAGE", ref)
    with pytest.raises(ValidationError, match="CRIMSONBENCH_FIO_IMAGE .* names no fixed version"):
        Settings()
    monkeypatch.setenv("CRIMSONBENCH_FIO_IMAGE", "registry:5000/crimsonbench-fio:0.1.0")
    assert Settings().fio_image.endswith(":0.1.0")
