"""The repository root is the operator's Helm chart: lint, render and check what it renders.

The API server half (the same objects applied to a real kube-apiserver) is
test_chart_apply.py."""

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

OUR_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
             "Service", "Deployment"}  # fmt: skip


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


def env_of(c: dict[str, Any], namespace: str) -> dict[str, str]:
    out = {}
    for e in c["env"]:
        if "valueFrom" in e:
            assert e["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}, e
            out[e["name"]] = namespace
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
    if not values:
        assert settings.fio_image == "crimsonbench-fio:0.1.0"
        assert settings.host_network is False and settings.job_tolerations == []
        assert settings.namespace is None
        return
    assert settings.fio_image == "localhost/crimsonbench-fio:dev"
    assert settings.image_pull_policy == "Never"
    assert settings.host_network is True
    assert settings.job_tolerations == [
        {"key": "node-role.kubernetes.io/storage", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert (settings.tick_seconds, settings.step_grace_seconds) == (2.5, 60)
    assert (settings.rollout_timeout_seconds, settings.finished_run_ttl_seconds) == (900, 3600)
    assert env["TZ"] == "UTC"  # extraEnv


def test_rbac_is_pythons_rules(render: Render) -> None:
    docs = render(namespace="ops")
    (cluster_role,) = by_kind(docs, "ClusterRole")
    role, fio_role = by_kind(docs, "Role")
    python_rules = operator_rbac()[1]["rules"]
    # pods/exec only in the fio namespaces (values: rbac.fioNamespaces, default Rook's)
    assert fio_role["metadata"]["namespace"] == "rook-ceph"
    assert fio_role["rules"] == operator_rbac()[3]["rules"]
    assert rule_set(cluster_role["rules"]) + rule_set(role["rules"]) == rule_set(python_rules)
    # only the leases are namespace-scoped: they live in the operator's own namespace
    assert rule_set(role["rules"]) == Counter(
        {("coordination.k8s.io", "leases", frozenset({"get", "create", "update", "delete"})): 1}
    )
    assert role["metadata"]["namespace"] == "ops"
    (sa,) = by_kind(docs, "ServiceAccount")
    subject = {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": "ops"}
    for binding, ref in ((by_kind(docs, "ClusterRoleBinding")[0], cluster_role),
                         (by_kind(docs, "RoleBinding")[0], role),
                         (by_kind(docs, "RoleBinding")[1], fio_role)):  # fmt: skip
        assert binding["subjects"] == [subject]
        assert binding["roleRef"]["kind"] == ref["kind"]
        assert binding["roleRef"]["name"] == ref["metadata"]["name"]


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
    assert crds == {"benchmarkruns.bench.crimson.ceph.io", "clusterkopfpeerings.kopf.dev",
                    "kopfpeerings.kopf.dev"}  # fmt: skip
    assert {d["kind"] for d in docs} == OUR_KINDS | {"Namespace", "CustomResourceDefinition"}
