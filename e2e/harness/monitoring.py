"""The monitoring chain as users run it, in a kind cluster (e2e/harness/kind.py): the real
prometheus-operator (built here from its Go module, e2e/build-prometheus-operator.sh) and
a Prometheus it runs from a `Prometheus` object, Debian's prometheus in an image of ours
(e2e/monitoring/build-images.sh). Nothing of the scrape or rule configuration is written
here: the Prometheus selects ServiceMonitors and PrometheusRules by the label
kube-prometheus-stack's Prometheus selects by (`release: kube-prometheus-stack`, what our
chart's `metrics.prometheusRelease` puts on them), in every namespace, as that stack does.

    m = install_monitoring(kind)          # CRDs, operator, Prometheus object: not waited for
    ...                                   # (Rook comes up meanwhile)
    m.wait_ready(600)                     # the operator rolled out, Prometheus answers
    m.query("up")                         # Prometheus' HTTP API, from the host (NodePort)
    m.rss()                               # the stack's processes, seen from the host

Where it runs: every pod of the stack on the control-plane node (toleration + node
selector), away from the workers whose CPUs a BenchmarkRun plans; the images are loaded
into that node only. Its CRDs are read from the operator's module at run time (Go's module
cache), never committed; the operator's RBAC and Deployment are upstream's
example/rbac/prometheus-operator/*.yaml from the same module, with our images and node.
Prometheus is reached from the host on a NodePort Service of ours (the host reaches node
IPs on our docker network, not pod or Service IPs).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.builds import REPO, go_module_dir, run_build
from harness.kind import KindCluster
from harness.run_recorder import RunRecorder
from harness.waiting import wait_for

VERSION = "v0.93.0"  # github.com/prometheus-operator/prometheus-operator
MODULE = "github.com/prometheus-operator/prometheus-operator"
BUILD_IMAGES = REPO / "e2e" / "monitoring" / "build-images.sh"
NAMESPACE = "monitoring"
PROMETHEUS = "crimsonbench"  # the Prometheus object: pod prometheus-crimsonbench-0
# what kube-prometheus-stack's Prometheus selects ServiceMonitors and PrometheusRules by (its
# release name; serviceMonitorSelectorNilUsesHelmValues) and our chart's default
# metrics.prometheusRelease
RELEASE_LABEL = {"release": "kube-prometheus-stack"}
SCRAPE_INTERVAL = "2s"  # steps of the kind run last seconds: a scrape during each
NODE_PORT = 30990
CONTROL_PLANE_ROLE = "node-role.kubernetes.io/control-plane"


class MonitoringUnavailable(RuntimeError):
    """The monitoring stack cannot be built on this machine (the message says why)."""


@dataclass(frozen=True)
class Images:
    archive: Path
    operator: str
    reloader: str
    prometheus: str
    prometheus_version: str  # v2.53.3: the Prometheus object's spec.version

    @classmethod
    def build(cls, timeout: float = 45 * 60) -> Images:
        """e2e/monitoring/build-images.sh (cold: the operator's Go build and a debootstrap,
        ~10 min; warm: seconds)."""
        out = run_build(BUILD_IMAGES, MonitoringUnavailable, failure=MonitoringUnavailable,
                        timeout=timeout)  # fmt: skip
        archive = Path(out.split()[-1])
        env = dict(
            line.split("=", 1)
            for line in archive.with_suffix(".env").read_text().splitlines()
            if "=" in line
        )
        return cls(archive, env["PROMETHEUS_OPERATOR_IMAGE"], env["CONFIG_RELOADER_IMAGE"],
                   env["PROMETHEUS_IMAGE"], env["PROMETHEUS_VERSION"])  # fmt: skip


def module_dir(version: str = VERSION) -> Path:
    """The operator module's source (Go's module cache, outside the repository)."""
    return go_module_dir(MODULE, version, MonitoringUnavailable)


def _on_control_plane(pod_spec: dict[str, Any]) -> None:
    pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), CONTROL_PLANE_ROLE: ""}
    pod_spec["tolerations"] = [
        *(pod_spec.get("tolerations") or []),
        {"key": CONTROL_PLANE_ROLE, "operator": "Exists", "effect": "NoSchedule"},
    ]


def operator_manifests(source: Path, images: Images) -> list[dict[str, Any]]:
    """Upstream's example/rbac/prometheus-operator (ServiceAccount, ClusterRole, binding,
    Deployment, Service) and example/rbac/prometheus (the Prometheus pods' ServiceAccount
    and RBAC), in NAMESPACE, with our images, on the control-plane node."""
    docs: list[dict[str, Any]] = []
    for sub in ("prometheus-operator", "prometheus"):
        for path in sorted((source / "example" / "rbac" / sub).glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if not doc or doc["kind"] in ("ServiceMonitor", "Prometheus"):
                    continue  # the operator's self-monitoring and the example Prometheus
                docs.append(doc)
    for doc in docs:
        meta = doc["metadata"]
        if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            meta["namespace"] = NAMESPACE
        for subject in doc.get("subjects") or []:
            subject["namespace"] = NAMESPACE
        if doc["kind"] == "Deployment":
            pod = doc["spec"]["template"]["spec"]
            (c,) = pod["containers"]
            c["image"] = images.operator
            c["imagePullPolicy"] = "Never"
            c["args"] = [
                f"--prometheus-config-reloader={images.reloader}"
                if a.startswith("--prometheus-config-reloader=")
                else a
                for a in c["args"]
            ]
            _on_control_plane(pod)
    kinds = sorted(d["kind"] for d in docs)
    if kinds.count("Deployment") != 1 or "ClusterRole" not in kinds:
        raise RuntimeError(f"{source}/example/rbac changed: {kinds}")
    return docs


def prometheus_manifests(images: Images) -> list[dict[str, Any]]:
    """The Prometheus object (what a kube-prometheus-stack user has, narrowed to what we
    need) and a NodePort Service for the host to reach it."""
    prometheus: dict[str, Any] = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "Prometheus",
        "metadata": {"name": PROMETHEUS, "namespace": NAMESPACE},
        "spec": {
            "image": images.prometheus,
            "version": images.prometheus_version,
            "imagePullPolicy": "Never",
            "replicas": 1,
            "serviceAccountName": "prometheus",
            "scrapeInterval": SCRAPE_INTERVAL,
            "evaluationInterval": SCRAPE_INTERVAL,
            "retention": "1d",
            "serviceMonitorSelector": {"matchLabels": dict(RELEASE_LABEL)},
            "serviceMonitorNamespaceSelector": {},
            "ruleSelector": {"matchLabels": dict(RELEASE_LABEL)},
            "ruleNamespaceSelector": {},
            "resources": {"requests": {"memory": "100Mi"}},
        },
    }
    _on_control_plane(prometheus["spec"])
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{PROMETHEUS}-nodeport", "namespace": NAMESPACE},
        "spec": {
            "type": "NodePort",
            "selector": {"operator.prometheus.io/name": PROMETHEUS},
            "ports": [
                {"name": "web", "port": 9090, "targetPort": "web", "nodePort": NODE_PORT}
            ],  # fmt: skip
        },
    }
    return [prometheus, service]


def chart_values() -> dict[str, Any]:
    """Our chart's values that hand the operator to this Prometheus: the ServiceMonitor
    and the PrometheusRule (labelled `release: kube-prometheus-stack` by the chart's
    default metrics.prometheusRelease), scraped every SCRAPE_INTERVAL."""
    return {
        "metrics": {
            "serviceMonitor": {
                "enabled": True,
                "interval": SCRAPE_INTERVAL,
                "scrapeTimeout": SCRAPE_INTERVAL,
            },
            "prometheusRule": {"enabled": True},
            "prometheusRelease": RELEASE_LABEL["release"],
        }
    }


class PrometheusError(RuntimeError):
    pass


@dataclass
class Monitoring:
    kind: KindCluster
    images: Images
    url: str
    timings: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.time)  # when install_monitoring began
    recorder: RunRecorder | None = None

    # ------------------------------------------------------------------ Prometheus' API
    def api(self, path: str, **params: Any) -> Any:
        """GET /api/v1/PATH; its `data` (PrometheusError on an error status)."""
        query = urllib.parse.urlencode(params, doseq=True)
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=30) as resp:
                body = json.load(resp)
        except urllib.error.HTTPError as exc:
            raise PrometheusError(f"{path} {params}: {exc.code} {exc.read()[:500]!r}") from exc
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {body}")
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": expr} | ({"time": f"{at:.3f}"} if at is not None else {})
        return list(self.api("query", **params)["result"])

    def targets(self) -> list[dict[str, Any]]:
        return list(self.api("targets", state="active")["activeTargets"])

    # ------------------------------------------------------------------ bring-up
    def wait_ready(self, timeout: float = 900) -> None:
        t = time.monotonic()
        self.kind.kubectl("-n", NAMESPACE, "rollout", "status", "deploy/prometheus-operator",
                          f"--timeout={int(timeout)}s", timeout=timeout + 60)  # fmt: skip

        def answers() -> bool:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=5) as resp:
                return bool(resp.status == 200)

        wait_for(answers, timeout, f"Prometheus {NAMESPACE}/{PROMETHEUS} ready at {self.url}",
                 self.diagnostics, interval=2)  # fmt: skip
        self.timings["monitoring_wait_s"] = time.monotonic() - t
        # bring-up as the cluster recorded it (it overlaps Rook's): install -> pod Ready
        for key, pod in (("operator", "-l app.kubernetes.io/name=prometheus-operator"),
                         ("prometheus", f"prometheus-{PROMETHEUS}-0")):  # fmt: skip
            doc = self.kind.kubectl_json("-n", NAMESPACE, "get", "pods", *pod.split())
            ready = _ready_since(doc["items"][0] if "items" in doc else doc)
            if ready is not None:
                self.timings[f"monitoring_{key}_ready_after_s"] = ready - self.started

    def wait_target_up(self, job_substring: str, timeout: float = 300) -> dict[str, Any]:
        """The active target whose scrape pool names JOB_SUBSTRING, once it is up."""

        def up() -> dict[str, Any] | None:
            for t in self.targets():
                if job_substring in t["scrapePool"] and t["health"] == "up":
                    return t
            return None

        got: dict[str, Any] = wait_for(up, timeout, f"a target {job_substring!r} up",
                                       lambda: json.dumps(self.targets())[:3000])  # fmt: skip
        return got

    def diagnostics(self) -> str:
        out = []
        for args in (("get", "pods", "-o", "wide"), ("get", "prometheus", "-o", "yaml"),
                     ("logs", "deploy/prometheus-operator", "--tail=30")):  # fmt: skip
            with contextlib.suppress(Exception):
                out.append(self.kind.kubectl("-n", NAMESPACE, *args, check=False)[-3000:])
        with contextlib.suppress(Exception):
            logs = self.kind.kubectl("-n", NAMESPACE, "logs", f"prometheus-{PROMETHEUS}-0",
                                     "-c", "prometheus", "--tail=30", check=False)  # fmt: skip
            out.append(logs[-3000:])
        return "\n".join(out)

    # ------------------------------------------------------------------ cost
    def cost(self) -> dict[str, float]:
        """rss() in MiB, for the stack's timings."""
        out = {}
        for name, mem in sorted(self.rss().items()):
            out[f"monitoring_{name}_rss_mib"] = mem["rss"] / 2**20
            out[f"monitoring_{name}_peak_rss_mib"] = mem["peak"] / 2**20
        return out

    def rss(self) -> dict[str, dict[str, int]]:
        """RSS and peak RSS (VmRSS, VmHWM in bytes) of the stack's processes, read from
        the host's /proc (a kind node's processes are the host's): prometheus-operator,
        prometheus, the config reloader."""
        out: dict[str, dict[str, int]] = {}
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                status = (proc / "status").read_text()
            except OSError:
                continue
            name = _stack_process(argv)
            if name is None:
                continue
            fields = dict(
                (k, int(v.split()[0]) * 1024)
                for k, v in (ln.split(":", 1) for ln in status.splitlines() if ":" in ln)
                if k in ("VmRSS", "VmHWM")
            )
            out[name] = {"rss": fields.get("VmRSS", 0), "peak": fields.get("VmHWM", 0)}
        return out


def _ready_since(pod: dict[str, Any]) -> float | None:
    """When the pod's Ready condition last turned True (Unix time), None if it is not."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c["type"] == "Ready" and c["status"] == "True":
            stamp = datetime.datetime.fromisoformat(c["lastTransitionTime"].replace("Z", "+00:00"))
            return stamp.timestamp()
    return None


def _stack_process(argv: list[bytes]) -> str | None:
    prog = argv[0].decode(errors="replace") if argv else ""
    args = [a.decode(errors="replace") for a in argv[1:]]
    if prog == "/bin/operator" and any(a.startswith("--prometheus-config-reloader=") for a in args):
        return "prometheus-operator"
    if prog == "/usr/bin/prometheus" and any("config_out" in a for a in args):
        return "prometheus"
    if prog == "/bin/prometheus-config-reloader" and any("config_out" in a for a in args):
        return "config-reloader"
    return None


def install_monitoring(kind: KindCluster, images: Images | None = None) -> Monitoring:
    """CRDs (server-side apply: they are too big for the last-applied annotation), the
    operator and the Prometheus object, applied; readiness is `Monitoring.wait_ready`."""
    t0, started = time.monotonic(), time.time()
    source = module_dir()
    images = images or Images.build()
    t = time.monotonic()
    kind.load_image_archive(images.archive, nodes=[kind.control_plane])
    timings = {"monitoring_images_s": t - t0, "monitoring_images_load_s": time.monotonic() - t}
    t = time.monotonic()
    crds = sorted((source / "example" / "prometheus-operator-crd").glob("*.yaml"))
    if not crds:
        raise RuntimeError(f"no CRDs in {source}/example/prometheus-operator-crd")
    for crd in crds:
        kind.kubectl("apply", "--server-side", "--field-manager=crimsonbench-e2e",
                     "-f", str(crd), timeout=300)  # fmt: skip
    # names from the file names (group_plural.yaml): PyYAML cannot read every one of them
    # (alertmanagerconfigs holds a bare `=`, YAML's value tag; kubectl reads it)
    names = [".".join(reversed(p.stem.split("_", 1))) for p in crds]
    kind.kubectl("wait", "--for=condition=Established", "--timeout=120s",
                 *(f"crd/{n}" for n in names), timeout=180)  # fmt: skip
    kind.kubectl("create", "namespace", NAMESPACE)
    kind.apply(operator_manifests(source, images))
    kind.apply(prometheus_manifests(images))
    url = f"http://{kind.node_ip(kind.control_plane)}:{NODE_PORT}"
    timings["monitoring_apply_s"] = time.monotonic() - t
    return Monitoring(kind, images, url, timings, started=started)
