"""The operator against a real API server, running under the chart's least-privilege RBAC
(rendered by helm from the chart, for targets: rook-ceph/rook-ceph, runs from bench).

No kubelet runs here, so pods never start: these tests drive the run up to the first pod
it needs (the cluster-facts Job of preflight) from real API objects (a Node, Rook's OSD
pods bound to it, the node's cached topology), every refusal that must come before any
pod, and the cleanup path. Patching a CephCluster that a real Rook rolls out, restoring
it and the steps are proven against live Rook on kind (tests/kind).
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import kubernetes.client
import pytest
import yaml
from harness import ControlPlane
from harness.builds import ensure_helm, environmental
from kopf.testing import KopfRunner
from kubernetes.client.exceptions import ApiException

from crimsonbench.manifests.naming import OWNER_LEN, child_name

pytestmark = pytest.mark.k8s
ROOT = Path(__file__).resolve().parents[2]
G, V = "bench.crimson.ceph.io", "v1alpha1"
OP_NS, RUN_NS, ROOK_NS = "crimsonbench", "bench", "rook-ceph"
# Outside the trust boundary: a namespace nobody lists (A), and another Rook cluster the
# chart does not name (B), with its own admin Secret
INTRUDER_NS, OTHER_ROOK_NS = "intruder", "rook-b"
NODE = "node-a"
# The chart's `targets` of these tests (and the operator's CRIMSONBENCH_ROOK_TARGETS)
TARGETS = {"rook": [{"cephCluster": f"{ROOK_NS}/rook-ceph", "allowedNamespaces": [RUN_NS]}],
           "externalNamespaces": []}  # fmt: skip


def chart_rbac(namespace: str = OP_NS, targets: dict[str, Any] = TARGETS) -> list[dict[str, Any]]:
    """The chart's ServiceAccount and RBAC for `targets`, as `helm template` renders them
    (release crimsonbench: the ServiceAccount is crimsonbench-operator), with the admission
    policies on that ServiceAccount (templates/reachpolicy.yaml): the operator here runs
    under both. Not the targets' policy on BenchmarkRuns: these tests create runs it would
    refuse, to see the operator refuse them too."""
    try:
        helm = ensure_helm()
    except RuntimeError as exc:
        if environmental(exc):
            print(f"\ntests/k8s/test_operator.py skipped: no helm: {exc}", file=sys.stderr)
            pytest.skip(f"no helm on this machine: {exc}")
        raise
    out = subprocess.run(
        [str(helm), "template", "crimsonbench", str(ROOT), "--namespace", namespace,
         "--set-json", f"targets={json.dumps(targets)}"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    kinds = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    docs = [d for d in yaml.safe_load_all(out) if d]
    return [d for d in docs if d["kind"] in kinds or "-reach-" in d["metadata"]["name"]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture()
def metrics_port() -> int:
    """Chosen when the operator starts, not at import: a port free at collection time may
    be taken by the time a module runs (other tests run for minutes in between)."""
    return _free_port()


# An input document shaped like Rook's deploy/examples/cluster.yaml.
CEPHCLUSTER: dict[str, Any] = {
    "apiVersion": "ceph.rook.io/v1",
    "kind": "CephCluster",
    "metadata": {"name": "rook-ceph", "namespace": ROOK_NS},
    "spec": {
        "cephVersion": {"image": "quay.io/ceph/ceph:v19.2.1", "allowUnsupported": False},
        "dataDirHostPath": "/var/lib/rook",
        "mon": {"count": 1, "allowMultiplePerNode": True},
        "mgr": {"count": 1, "modules": [{"name": "rook", "enabled": True}]},
        "dashboard": {"enabled": False},
        "storage": {
            "useAllNodes": False,
            "useAllDevices": False,
            "nodes": [{"name": NODE, "devices": [{"name": "nvme0n1"}]}],
        },
        "resources": {"mgr": {"requests": {"cpu": "500m", "memory": "512Mi"}}},
    },
}


OSD_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "rook-ceph-osd-0-abc",
        "namespace": ROOK_NS,
        "labels": {"app": "rook-ceph-osd", "ceph-osd-id": "0"},
    },
    "spec": {
        "nodeName": NODE,
        "containers": [{"name": "osd", "image": "quay.io/ceph/ceph:v19.2.1"}],
    },
}


def run_body(name: str, **osd: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{G}/{V}",
        "kind": "BenchmarkRun",
        "metadata": {"name": name, "namespace": RUN_NS},
        "spec": {
            "target": {
                "rook": {"clusterName": "rook-ceph", "namespace": ROOK_NS, "allowReprovision": True}
            },
            "osd": {
                "flavor": "crimson",
                "objectStore": "seastore",
                "count": 1,
                "reactors": 56,
                "cpuPolicy": "osd",
                "cpuSet": "0-27,56-83",
                **osd,
            },
            "client": {"cpuSet": "28-55,84-111", "node": NODE, "images": 4},
            "sweep": {"iodepths": [1, 4], "runtimeSeconds": 5},
        },
    }


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


@pytest.fixture(scope="module")
def admin(control_plane: ControlPlane) -> Iterator[kubernetes.client.ApiClient]:
    with control_plane.admin_api_client() as api:
        core = kubernetes.client.CoreV1Api(api)
        for ns in (OP_NS, RUN_NS, ROOK_NS, INTRUDER_NS, OTHER_ROOK_NS):
            try:
                core.create_namespace({"metadata": {"name": ns}})
            except ApiException as exc:
                assert exc.status == 409
        control_plane.apply_yaml(chart_rbac())

        def default_sa() -> bool:  # a pod needs it; the controller makes it a moment later
            names = {sa.metadata.name for sa in core.list_namespaced_service_account(ROOK_NS).items}
            return "default" in names

        wait_for("the default ServiceAccount of rook-ceph", default_sa)
        # The topology probe's result for node-a, as the probe Job would have cached it:
        # the real lscpu output of the reference machine (pods cannot run here).
        lscpu = (ROOT / "tests/fixtures/lscpu/xeon-8276m-2s.json").read_text()
        from crimsonbench.manifests.topology_cache import cache_configmap

        control_plane.apply_yaml(
            [
                {
                    **cache_configmap(NODE, lscpu),
                    "metadata": {**cache_configmap(NODE, lscpu)["metadata"], "namespace": OP_NS},
                },
                # the node, and Rook's OSD pod bound to it (as the scheduler would bind it)
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}},
                OSD_POD,
            ]
        )
        yield api


@pytest.fixture()
def cephcluster(admin: kubernetes.client.ApiClient) -> Iterator[dict[str, Any]]:
    custom = kubernetes.client.CustomObjectsApi(admin)
    created = custom.create_namespaced_custom_object(
        "ceph.rook.io", "v1", ROOK_NS, "cephclusters", copy.deepcopy(CEPHCLUSTER)
    )
    yield created
    custom.delete_namespaced_custom_object(
        "ceph.rook.io", "v1", ROOK_NS, "cephclusters", "rook-ceph"
    )


@pytest.fixture()
def operator(
    control_plane: ControlPlane,
    admin: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    metrics_port: int,
) -> Callable[[], KopfRunner]:
    token = control_plane.service_account_token(OP_NS, "crimsonbench-operator", create=False)
    monkeypatch.setenv("KUBECONFIG", str(control_plane.kubeconfig(tmp_path / "kc", token)))
    monkeypatch.setenv("CRIMSONBENCH_OPERATOR_NAMESPACE", OP_NS)
    monkeypatch.setenv("CRIMSONBENCH_METRICS_PORT", str(metrics_port))
    monkeypatch.setenv("CRIMSONBENCH_ROOK_TARGETS", json.dumps(TARGETS["rook"]))
    monkeypatch.setenv(
        "CRIMSONBENCH_EXTERNAL_NAMESPACES", json.dumps(TARGETS["externalNamespaces"])
    )

    def start() -> KopfRunner:
        return KopfRunner(
            ["run", "-m", "crimsonbench.controller.main", "--standalone",
             "--namespace", RUN_NS, "--namespace", INTRUDER_NS],
            timeout=60,
        )  # fmt: skip

    return start


def get_run(api: Any, name: str, namespace: str = RUN_NS) -> dict[str, Any]:
    return dict(
        kubernetes.client.CustomObjectsApi(api).get_namespaced_custom_object(
            G, V, namespace, "benchmarkruns", name
        )
    )


def get_cluster(api: Any) -> dict[str, Any]:
    return dict(
        kubernetes.client.CustomObjectsApi(api).get_namespaced_custom_object(
            "ceph.rook.io", "v1", ROOK_NS, "cephclusters", "rook-ceph"
        )
    )


def status_of(api: Any, name: str, namespace: str = RUN_NS) -> dict[str, Any]:
    return dict(get_run(api, name, namespace).get("status") or {})


def ctx_of(
    name: str, spec: Any, api: Any, settings: Any, status: dict[str, Any] | None = None,
    uid: str = "uid-1",
) -> Any:  # fmt: skip
    """A tick's context, as the operator makes it from the run's status."""
    import logging

    from crimsonbench.controller.kube import Kube
    from crimsonbench.controller.record import RunRecord
    from crimsonbench.controller.run_context import RunContext

    record = RunRecord.load(status or {})
    return RunContext(name, RUN_NS, uid, record, Kube(api), settings, logging.getLogger("t"),
                      spec=spec)  # fmt: skip


def carried(status: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """The status after a tick's patch, as the API server would hold it."""
    from crimsonbench.manifests.cephcluster import apply_merge_patch

    return apply_merge_patch(status, ctx.record.status_patch())


def xeon_plan(name: str, spec: Any, uid: str | None = None) -> Any:
    """The run's plan on one node of the captured 2-socket Xeon 8276M (112 CPUs); with the
    run's uid, as the operator makes it (its children named from it)."""
    from crimsonbench.manifests.naming import owner_tag
    from crimsonbench.plan.build import build_plan
    from crimsonbench.plan.hosts import ClusterLayout
    from crimsonbench.plan.topology import parse_lscpu_json

    topo = parse_lscpu_json((ROOT / "tests/fixtures/lscpu/xeon-8276m-2s.json").read_text())
    layout = ClusterLayout({NODE: topo}, {0: NODE}, (NODE,))
    if uid is None:
        return build_plan(name, spec, layout, option_family="legacy")
    return build_plan(child_name(name, uid), spec, layout, option_family="legacy",
                      owner=owner_tag(uid))  # fmt: skip


def undo_of(plan: Any, **fields: Any) -> dict[str, Any]:
    """The undo record the operator keeps for a run on ROOK_NS/rook-ceph (status.record.undo)
    once it planned: where it acts, what it creates."""
    from crimsonbench.spec.status import UndoRecord

    undo = UndoRecord(
        target="rook", where=f"CephCluster {ROOK_NS}/rook-ceph", rook_namespace=ROOK_NS,
        cluster_name="rook-ceph", jobs_namespace=ROOK_NS, lease=[ROOK_NS, "crimsonbench-t"],
        pool=plan.pool.name, pool_object=plan.pool.name, client_object=plan.pool.user,
        user=plan.pool.user, images=list(plan.pool.images), **fields,
    )  # fmt: skip
    return undo.model_dump(mode="json", by_alias=True, exclude_none=True)


def patched_by_run(api: Any, run: str, uid: str, run_patch: dict[str, Any]) -> dict[str, Any]:
    """Patch the module's CephCluster as run (uid) does, and return the undo record's
    part of it (specChanges, specDigest, clusterUid) as the patch stage records it."""
    from crimsonbench.controller.decisions.restore_steps import PATCHED_BY, UNDO_DIGEST
    from crimsonbench.manifests.cephcluster import apply_merge_patch
    from crimsonbench.manifests.cephcluster_undo import changes_digest, spec_changes

    found = get_cluster(api)
    changes = spec_changes(found["spec"], apply_merge_patch(found["spec"], run_patch))
    digest = changes_digest(changes)
    kubernetes.client.CustomObjectsApi(api).patch_namespaced_custom_object(
        "ceph.rook.io", "v1", ROOK_NS, "cephclusters", "rook-ceph",
        {"spec": run_patch, "metadata": {"annotations": {
            PATCHED_BY: f"{RUN_NS}/{run}/{uid}", UNDO_DIGEST: digest}}})  # fmt: skip
    recorded = [{"path": list(c.path), "before": c.before, "after": c.after} for c in changes]
    return {"specChanges": recorded, "specDigest": digest, "clusterUid": found["metadata"]["uid"]}


def jobs_of(api: Any, run: str) -> list[str]:
    """The Jobs of the run named `run` (whatever its uid), each named as <run>-<what>: the
    operator names and labels them <run>-<owner tag>-<what> (manifests.naming.child_name)."""
    batch = kubernetes.client.BatchV1Api(api)
    mine = re.compile(rf"^{re.escape(run)}-[0-9a-f]{{{OWNER_LEN}}}$")
    out = []
    for ns in (ROOK_NS, OP_NS, RUN_NS, INTRUDER_NS, OTHER_ROOK_NS):
        for j in batch.list_namespaced_job(ns, label_selector=f"{G}/run").items:
            child = j.metadata.labels[f"{G}/run"]
            if mine.match(child):
                out.append(j.metadata.name.replace(f"{child}-", f"{run}-", 1))
    return sorted(out)


def leases(api: Any) -> list[tuple[str, str, str]]:
    """Every Lease of ours (namespace, name, holder): Rook clusters' beside them, external
    clusters' in OP_NS."""
    coord = kubernetes.client.CoordinationV1Api(api)
    return [(ns, x.metadata.name, x.spec.holder_identity)
            for ns in (OP_NS, ROOK_NS) for x in coord.list_namespaced_lease(ns).items]  # fmt: skip


def child_of(api: Any, run: str, namespace: str = RUN_NS) -> str:
    """What the live run's children are named after (<run>-<owner tag>)."""
    return child_name(run, get_run(api, run, namespace)["metadata"]["uid"])


def network_policies_of(api: Any, run: str) -> list[str]:
    net = kubernetes.client.NetworkingV1Api(api)
    found = net.list_namespaced_network_policy(ROOK_NS, label_selector=f"{G}/run={run}").items
    return sorted(p.metadata.name for p in found)


def test_observe_records_where_everything_runs_then_waits_for_preflight(
    admin: Any,
    cephcluster: dict[str, Any],
    operator: Callable[[], KopfRunner],
    metrics_port: int,
) -> None:
    custom = kubernetes.client.CustomObjectsApi(admin)
    original = json.dumps(cephcluster["spec"], sort_keys=True)
    custom.create_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", run_body("ref56"))
    with operator() as runner:
        status = wait_for(
            "the facts Job",
            lambda: (
                "reading the cluster" in status_of(admin, "ref56").get("message", "")
                and status_of(admin, "ref56")
            ),
        )
        scrape = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10)
        metrics = scrape.read().decode()
    assert runner.exit_code == 0, runner.output
    assert status["stage"] == "observe" and status["phase"] == "Preparing"
    assert status["osdPlacement"] == {"0": NODE}  # from Rook's OSD pod, never decided by us
    assert status["clientNodes"] == [NODE]
    assert status["startedAt"].endswith("Z")
    # the first pod of the run reads the cluster as Rook's admin, read-only commands
    assert jobs_of(admin, "ref56") == ["ref56-facts"]
    batch = kubernetes.client.BatchV1Api(admin)
    facts = batch.read_namespaced_job(f"{child_of(admin, 'ref56')}-facts", ROOK_NS)
    script = facts.spec.template.spec.containers[0].command[2]
    assert "osd metadata --format json" in script and "config ls --format json" in script
    assert json.dumps(get_cluster(admin)["spec"], sort_keys=True) == original  # untouched
    core = kubernetes.client.CoreV1Api(admin)
    events = wait_for(
        "a phase event",
        lambda: [
            e
            for e in core.list_namespaced_event(
                RUN_NS, field_selector="involvedObject.name=ref56"
            ).items
            if "phase" in (e.message or "")
        ],
    )
    assert any("Preparing" in e.message for e in events), [e.message for e in events]
    mine = [line for line in metrics.splitlines() if 'run="ref56"' in line]
    current = [
        line
        for line in mine
        if line.startswith("crimsonbench_run_phase{") and line.endswith(" 1.0")
    ]
    assert len(current) == 1 and 'phase="Preparing"' in current[0]
    assert all('namespace="bench"' in line and 'reactors="56"' in line for line in current)

    # Restart: the new operator keeps waiting on the same Job; it creates nothing twice,
    # and its handlers really ran without failing (not just an idle process).
    with operator():
        wait_for("the new operator to reconcile", lambda: _reconciles(metrics_port) >= 3)
        reconciled = _reconciles(metrics_port)
        errors = _reconcile_errors(metrics_port)
    assert reconciled >= 3 and errors == {}, errors
    assert jobs_of(admin, "ref56") == ["ref56-facts"]
    assert status_of(admin, "ref56")["osdPlacement"] == {"0": NODE}

    with operator():
        custom.delete_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", "ref56")
        wait_for("run gone", lambda: _gone(admin, "ref56"))
    assert jobs_of(admin, "ref56") == []
    assert json.dumps(get_cluster(admin)["spec"], sort_keys=True) == original
    assert leases(admin) == []


def _scrape(port: int) -> list[str]:
    """The metrics lines; none while the operator's endpoint is not up yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            return str(resp.read().decode()).splitlines()
    except OSError:
        return []


def _reconciles(port: int) -> float:
    for line in _scrape(port):
        if line.startswith("crimsonbench_operator_reconcile_duration_seconds_count"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _reconcile_errors(port: int) -> dict[str, float]:
    """error class -> count of reconcile ticks that raised it (empty: none raised)."""
    out = {}
    for line in _scrape(port):
        if line.startswith("crimsonbench_operator_reconcile_errors_total{"):
            out[line.split('error="')[1].split('"')[0]] = float(line.rsplit(" ", 1)[1])
    return out


def _gone(api: Any, name: str, namespace: str = RUN_NS) -> bool:
    try:
        get_run(api, name, namespace)
    except ApiException as exc:
        return exc.status == 404
    return False


def test_under_a_crd_that_drops_the_record_the_run_waits_saying_why(
    control_plane: ControlPlane, admin: Any, cephcluster: dict[str, Any],
    operator: Callable[[], KopfRunner],
) -> None:  # fmt: skip
    """helm does not upgrade CRDs: under the previous CRD (no status.record) the API server
    prunes the record the operator writes. The run does nothing more (no second Job),
    saying why in a condition, until this version's CRD is applied (and the operator
    restarted, as an upgrade does); then it goes on."""
    crd = yaml.safe_load((ROOT / "crds" / "benchmarkrun.yaml").read_text())
    older = copy.deepcopy(crd)
    schema = older["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    del schema["properties"]["status"]["properties"]["record"]
    # that CRD had no rule reading the record either (the frozen spec)
    schema["x-kubernetes-validations"] = [
        r for r in schema["x-kubernetes-validations"] if "status.record" not in r["rule"]
    ]
    custom = kubernetes.client.CustomObjectsApi(admin)
    control_plane.apply_yaml([older])
    try:
        with operator() as runner:
            custom.create_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns",
                                                   run_body("oldcrd"))  # fmt: skip
            st = wait_for("the refusal", lambda: {c["type"]: c for c in status_of(
                admin, "oldcrd").get("conditions", [])}.get("RecordKept"))  # fmt: skip
            assert st["status"] == "False" and st["reason"] == "CrdTooOld"
            assert "apply crds/benchmarkrun.yaml" in st["message"]
            time.sleep(3)  # more ticks: nothing more is done
            assert jobs_of(admin, "oldcrd") == ["oldcrd-facts"]  # the first tick's only
            assert "record" not in status_of(admin, "oldcrd")
        assert runner.exit_code == 0, runner.output
        control_plane.apply_yaml([crd])  # then the operator restarted, as on an upgrade
        with operator():
            wait_for("the record kept", lambda: "record" in status_of(admin, "oldcrd") and {
                c["type"]: c["status"] for c in status_of(admin, "oldcrd")["conditions"]
            }["RecordKept"] == "True")  # fmt: skip
            custom.delete_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", "oldcrd")
            wait_for("run gone", lambda: _gone(admin, "oldcrd"))
    finally:
        control_plane.apply_yaml([crd])


def test_second_run_waits_for_the_first(
    admin: Any, cephcluster: dict[str, Any], operator: Callable[[], KopfRunner]
) -> None:
    custom = kubernetes.client.CustomObjectsApi(admin)
    with operator():
        custom.create_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", run_body("first"))
        wait_for(
            "first holds the cluster", lambda: status_of(admin, "first").get("stage") == "observe"
        )
        custom.create_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", run_body("second"))
        st = wait_for(
            "second pending",
            lambda: status_of(admin, "second").get("conditions") and status_of(admin, "second"),
        )
        conds = {c["type"]: c for c in st["conditions"]}
        assert st["phase"] == "Pending"
        assert conds["ClusterFree"]["reason"] == "ClusterBusy"
        assert f"{RUN_NS}/first" in conds["ClusterFree"]["message"]
        custom.delete_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", "first")
        wait_for(
            "second takes over",
            lambda: status_of(admin, "second").get("stage") == "observe",
            timeout=90,
        )
        custom.delete_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", "second")
        wait_for("second gone", lambda: _gone(admin, "second"))


@pytest.mark.parametrize(
    ("name", "body_fix", "field", "words"),
    [
        # 64 reactors on the 56 CPUs of osd.cpuSet: the planner refuses, naming the field
        ("toomany", {"osd": {"count": 1, "reactors": 64}}, "spec.osd", "need"),
        # the cluster runs 1 OSD; the spec plans 2: never create or move OSDs
        ("count", {"osd": {"count": 2, "reactors": 8}}, "spec.osd.count", "1 are selected"),
        ("nonode", {"client": {"node": "node-zz"}}, "spec.client.node", "no node named node-zz"),
        (
            "osdnodes",
            {"target": {"rook": {"osdNodes": ["node-zz"]}}},
            "spec.target.rook.osdNodes",
            "no OSD of the cluster runs on node-zz",
        ),
        # deployed crimson with another layout (cephConfig says so): refused before any
        # pod; without a crimson layout there, preflight reads the OSDs first (tests/kind)
        (
            "noconsent",
            {
                "target": {"rook": {"allowReprovision": False}},
                "cephConfig": {"osd.0": {"crimson_seastar_cpu_cores": "0-3"}},
            },
            "spec.target.rook.allowReprovision",
            "reactor layout differs",
        ),
    ],
)
def test_a_run_that_cannot_be_planned_fails_before_any_pod_naming_the_field(
    admin: Any,
    cephcluster: dict[str, Any],
    operator: Callable[[], KopfRunner],
    name: str,
    body_fix: dict[str, Any],
    field: str,
    words: str,
) -> None:
    custom = kubernetes.client.CustomObjectsApi(admin)
    body = run_body(name)
    for section, values in body_fix.items():
        if section == "target":
            body["spec"]["target"]["rook"].update(values["rook"])
        elif section == "cephConfig":  # the CephCluster's, before the run
            patched = custom.patch_namespaced_custom_object(  # a JSON merge patch
                "ceph.rook.io", "v1", ROOK_NS, "cephclusters", "rook-ceph",
                {"spec": {"cephConfig": values}})  # fmt: skip
            cephcluster = cast(dict[str, Any], patched)
        else:
            body["spec"][section].update(values)
    with operator():
        custom.create_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", body)
        st = wait_for(
            "failed",
            lambda: status_of(admin, name).get("phase") == "Failed" and status_of(admin, name),
        )
        assert field in st["message"] and words in st["message"], st["message"]
        assert st["finishedAt"] and st["stage"] == "done"
        conds = {c["type"]: c for c in st["conditions"]}
        assert conds["Succeeded"]["reason"] == "InvalidSpec"
        # nothing touched: no Job ever made (the topology is cached), the cluster as found
        assert jobs_of(admin, name) == []
        assert json.dumps(get_cluster(admin)["spec"], sort_keys=True) == json.dumps(
            cephcluster["spec"], sort_keys=True
        )
        custom.delete_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", name)
        wait_for("gone", lambda: _gone(admin, name))
    assert leases(admin) == []


def test_every_object_the_operator_creates_is_accepted_by_the_real_api(
    control_plane: ControlPlane, admin: Any
) -> None:
    """Every object the operator creates passes the real API server's validation, created
    (server-side dry run) as the operator's own ServiceAccount, so RBAC is exercised too."""
    from step_results import result

    from crimsonbench.controller.decisions.decide import ClusterFacts
    from crimsonbench.manifests import fio, fio_driver, maintenance, rook_objects
    from crimsonbench.manifests.ceph_access import rook_access, rook_client_access
    from crimsonbench.manifests.pods import PodOptions
    from crimsonbench.manifests.results import run_configmap, step_configmaps
    from crimsonbench.plan.summary import plan_summary
    from crimsonbench.results.types import RunInfo
    from crimsonbench.spec.models import validate_spec

    del ClusterFacts
    spec = validate_spec(run_body("dryrun")["spec"])
    plan = xeon_plan("dryrun", spec)
    opts = PodOptions(image="crimsonbench-fio:test")
    admin_access = rook_access(ROOK_NS)
    user = rook_client_access(ROOK_NS, plan.pool.user)
    info = RunInfo.from_spec("dryrun", spec)
    objects = [
        maintenance.topology_probe_job("dryrun", NODE, OP_NS, opts),
        maintenance.cluster_facts_job("dryrun", admin_access, opts),
        maintenance.ceph_commands_job("dryrun", "setup", plan.ceph.commands, admin_access, opts),
        maintenance.create_images_job(
            "dryrun", "rbd", plan.pool.images, 2**30, "uid-1", user, opts
        ),
        maintenance.remove_images_job("dryrun", "rbd", plan.pool.images, "uid-1", user, opts),
        maintenance.mon_restore_job(
            "dryrun",
            [{"who": "osd.0", "key": "k", "value": "1", "before": None}],
            admin_access,
            opts,
        ),
        maintenance.cluster_fsid_job("dryrun", admin_access, opts),
        fio.fio_server_job("dryrun", plan.clients[0], plan, user, opts),
        fio_driver.fio_driver_job("dryrun", ROOK_NS, opts, node=NODE, lifetime_s=600),
        run_configmap("dryrun", info, plan_summary(plan), namespace=RUN_NS),
        *step_configmaps("dryrun", result(0, "randread4k", 1, 1000.0), namespace=RUN_NS),
        rook_objects.ceph_client("dryrun", plan.pool, namespace=ROOK_NS),
        rook_objects.cephblockpool("dryrun", plan.pool, namespace=ROOK_NS),
    ]
    token = control_plane.service_account_token(OP_NS, "crimsonbench-operator", create=False)
    with control_plane.api_client(token) as op:
        batch, core = kubernetes.client.BatchV1Api(op), kubernetes.client.CoreV1Api(op)
        custom = kubernetes.client.CustomObjectsApi(op)
        for obj in objects:
            ns = obj["metadata"]["namespace"]
            if obj["kind"] == "Job":
                created = batch.create_namespaced_job(ns, obj, dry_run="All")
                name = created.metadata.name
            elif obj["kind"] == "ConfigMap":
                name = core.create_namespaced_config_map(ns, obj, dry_run="All").metadata.name
            else:
                plural = {"CephClient": "cephclients", "CephBlockPool": "cephblockpools"}[
                    obj["kind"]
                ]
                made = custom.create_namespaced_custom_object(
                    "ceph.rook.io", "v1", ns, plural, obj, dry_run="All"
                )
                name = made["metadata"]["name"]
            assert name == obj["metadata"]["name"]
        # the fio driver's execs: allowed where the fio pods run (Rook's namespace), and
        # nowhere else (a Role there, not the ClusterRole)
        authz = kubernetes.client.AuthorizationV1Api(op)
        for ns, allowed in ((ROOK_NS, True), (RUN_NS, False), (OP_NS, False)):
            review = authz.create_self_subject_access_review(
                {"spec": {"resourceAttributes": {"verb": "create", "resource": "pods",
                                                 "subresource": "exec", "namespace": ns}}}
            )  # fmt: skip
            assert review.status.allowed is allowed, ns


def test_exec_outside_the_fio_namespaces_names_the_chart_value(
    admin: kubernetes.client.ApiClient, control_plane: ControlPlane
) -> None:
    """The fio driver's exec, refused by the real API server where the chart granted no
    pods/exec: the run fails naming the chart's targets, not with a bare handshake error."""
    from types import SimpleNamespace

    from crimsonbench.controller import driver
    from crimsonbench.controller.kube import Kube
    from crimsonbench.controller.kube_errors import Gone
    from crimsonbench.errors import ExecutionError
    from crimsonbench.manifests.fio_driver import poll_command

    token = control_plane.service_account_token(OP_NS, "crimsonbench-operator", create=False)
    with control_plane.api_client(token) as op:
        ctx: Any = SimpleNamespace(kube=Kube(op))
        with pytest.raises(ExecutionError, match=f"namespace {RUN_NS}: the chart's targets.rook "
                                                 f".* must name {RUN_NS}"):  # fmt: skip
            driver.poll(ctx, RUN_NS, "some-driver-pod", poll_command("000-step"))
        # allowed in Rook's namespace, into a fio driver's pod (the chart's admission
        # policy lets no other through): the API server goes on to look for the pod
        with pytest.raises(Gone, match='pods "some-fio-driver-x2b4z" not found'):
            driver.poll(ctx, ROOK_NS, "some-fio-driver-x2b4z", poll_command("000-step"))


def test_a_pool_rook_keeps_failing_ends_the_run_in_time(
    admin: kubernetes.client.ApiClient,
) -> None:
    """Rook retries a failed CephBlockPool for ever (seen in kind: `rbd pool init` stuck
    behind an OSD's slow ops): the run waits, saying so, then fails (and restores)."""
    from crimsonbench.controller import rook_pool
    from crimsonbench.controller.settings import Settings
    from crimsonbench.errors import ExecutionError, NotReady
    from crimsonbench.manifests.rook_objects import cephblockpool
    from crimsonbench.spec.models import validate_spec

    spec = validate_spec(run_body("poolfail")["spec"])
    plan = xeon_plan("poolfail", spec, "uid-1")
    custom = kubernetes.client.CustomObjectsApi(admin)
    name = cephblockpool("poolfail", plan.pool)["metadata"]["name"]

    def ctx(status: dict[str, Any]) -> Any:
        return ctx_of("poolfail", spec, admin, Settings(rollout_timeout_seconds=60), status)

    first = ctx({})
    with pytest.raises(NotReady, match="waiting 0 s for Rook to create pool"):
        rook_pool.ensure_pool(first, plan)  # creates the CephBlockPool, as Rook's input
    status = carried({}, first)  # the wait's start, in the run's record
    since = status["record"]["waits"]["pool"]
    custom.patch_namespaced_custom_object_status(
        "ceph.rook.io", "v1", ROOK_NS, "cephblockpools", name, {"status": {"phase": "Failure"}}
    )
    try:
        with pytest.raises(NotReady, match="phase Failure"):
            rook_pool.ensure_pool(ctx(status), plan)
        late = ctx({"record": {"waits": {"pool": since - 61}}})
        with pytest.raises(ExecutionError, match="gave up .rolloutTimeoutSeconds.*ceph health"):
            rook_pool.ensure_pool(late, plan)
    finally:
        custom.delete_namespaced_custom_object("ceph.rook.io", "v1", ROOK_NS, "cephblockpools",
                                               name)  # fmt: skip


def test_cleanup_stops_waiting_for_a_pool_rook_cannot_remove(
    admin: kubernetes.client.ApiClient,
) -> None:
    """Rook retries a CephBlockPool it cannot delete for ever (seen on the real node: its
    image listing stuck behind an OSD's delayed op): cleanup waits, saying so, then gives
    up naming what is left, so the run ends and the cluster's lease is released. The wait's
    start is kept in the run's record (the delete handler writes it too)."""
    from crimsonbench.controller import rook_pool
    from crimsonbench.controller.settings import Settings
    from crimsonbench.errors import NotReady
    from crimsonbench.manifests.rook_objects import cephblockpool
    from crimsonbench.spec.models import validate_spec

    spec = validate_spec(run_body("poolstuck")["spec"])
    plan = xeon_plan("poolstuck", spec, "uid-1")
    custom = kubernetes.client.CustomObjectsApi(admin)
    pool = cephblockpool(child_name("poolstuck", "uid-1"), plan.pool, namespace=ROOK_NS)
    pool["metadata"]["finalizers"] = ["test.crimsonbench/rook-cannot-delete"]  # Rook's stand-in
    name = pool["metadata"]["name"]
    custom.create_namespaced_custom_object("ceph.rook.io", "v1", ROOK_NS, "cephblockpools", pool)

    undo = undo_of(plan)

    def ctx(status: dict[str, Any]) -> Any:
        status = {**status, "record": {**status.get("record", {}), "undo": undo}}
        return ctx_of("poolstuck", spec, admin, Settings(rollout_timeout_seconds=60), status)

    try:
        first = ctx({})
        with pytest.raises(NotReady, match=f"waiting 0 s for Rook to remove cephblockpools/{name}"):
            rook_pool.remove_pool_and_user(first)
        got = custom.get_namespaced_custom_object("ceph.rook.io", "v1", ROOK_NS,
                                                  "cephblockpools", name)  # fmt: skip
        assert got["metadata"].get("deletionTimestamp"), "the run did not delete its pool"
        status = carried({}, first)
        since = status["record"]["waits"]["removal"]
        again = ctx(status)
        with pytest.raises(NotReady, match="for Rook to remove"):
            rook_pool.remove_pool_and_user(again)  # a later tick: still waiting
        assert again.record.status_patch() == {}  # the wait's start is not moved
        late = ctx({"record": {"waits": {"removal": since - 61}}})
        rook_pool.remove_pool_and_user(late)  # gives up: returns, cleanup goes on
        cond = late.record.conditions()["RookObjectsRemoved"]
        assert cond.status == "False" and cond.reason == "RemovalTimeout", cond
        assert f"cephblockpools/{name}" in cond.message and "ceph health" in cond.message
    finally:
        custom.patch_namespaced_custom_object("ceph.rook.io", "v1", ROOK_NS, "cephblockpools",
                                              name, {"metadata": {"finalizers": None}})  # fmt: skip


def test_cleanup_removes_the_runs_images_before_it_restores_the_cluster(
    admin: kubernetes.client.ApiClient, cephcluster: dict[str, Any]
) -> None:
    """The restore restarts OSDs (Rook rolls every OSD back to the original resources;
    crimson ones once more for their layout). Seen on kind: cyanstore's osd.0, restarted
    while the run's pool still held its data, came back without that pool's PGs, and the
    images' removal Job then waited on them until it failed. So cleanup removes the run's
    images (and pool) first: while their removal Job is pending, the CephCluster still
    carries the run's patch and the restore has not begun."""
    from crimsonbench.controller import stages
    from crimsonbench.controller.decisions.restore_steps import PATCHED_BY
    from crimsonbench.controller.settings import RookTargetValue, Settings
    from crimsonbench.errors import NotReady
    from crimsonbench.spec.models import validate_spec

    batch = kubernetes.client.BatchV1Api(admin)
    spec = validate_spec(run_body("order")["spec"])
    plan = xeon_plan("order", spec, "uid-1")
    run_patch = {"cephConfig": {"osd.0": {"crimson_seastar_cpu_cores": "0-27"}}}
    undo = undo_of(plan, **patched_by_run(admin, "order", "uid-1", run_patch))
    status: dict[str, Any] = {"stage": "restore", "imagesCreated": True,
                              "osdPlacement": {"0": NODE}, "record": {"undo": undo}}  # fmt: skip
    grant = RookTargetValue(cephCluster=f"{ROOK_NS}/rook-ceph", allowedNamespaces=[RUN_NS])
    settings = Settings(operator_namespace=OP_NS, rook_targets=[grant])
    ctx = ctx_of("order", spec, admin, settings, status)
    assert ctx.refusal is None
    selector = f"{G}/run={child_name('order', 'uid-1')}"
    try:
        with pytest.raises(NotReady, match=f"removing {len(plan.pool.images)} RBD images"):
            stages.cleanup(ctx)
        jobs = batch.list_namespaced_job(ROOK_NS, label_selector=selector).items
        assert [j.metadata.name for j in jobs] == [f"{child_name('order', 'uid-1')}-rbd-cleanup"]
        # the restore has not begun: the run's patch and marks are still on the cluster
        got = get_cluster(admin)
        assert got["spec"]["cephConfig"]["osd.0"] == run_patch["cephConfig"]["osd.0"]
        assert PATCHED_BY in got["metadata"]["annotations"]
        assert not carried(status, ctx)["record"].get("restore")  # no restore mark yet
    finally:
        for job in batch.list_namespaced_job(ROOK_NS, label_selector=selector).items:
            batch.delete_namespaced_job(job.metadata.name, ROOK_NS, propagation_policy="Background")


def test_crimson_osds_restart_after_the_restore(
    admin: kubernetes.client.ApiClient,
    control_plane: ControlPlane,
    cephcluster: dict[str, Any],
) -> None:
    """Crimson reads its reactor layout only at start and Rook rolls the OSDs back before
    `config rm` (seen on kind: osd.0 kept the run's CPU): the restore deletes the planned
    OSD's pod, under the operator's own RBAC, waits for Rook's next one to be Ready, and
    only then records the restore as over (the run's marks leave the CephCluster, the saved
    original goes). Driven through restore.restore_cluster from the point the run's record
    says it reached (spec back, `config rm` done), each tick's record carried to the next."""
    from crimsonbench.controller.decisions.restore_steps import PATCHED_BY, UNDO_DIGEST
    from crimsonbench.controller.restore import restore_cluster
    from crimsonbench.controller.settings import Settings
    from crimsonbench.errors import NotReady
    from crimsonbench.spec.models import validate_spec

    core = kubernetes.client.CoreV1Api(admin)
    spec = validate_spec(run_body("restart")["spec"])
    plan = xeon_plan("restart", spec, "uid-1")
    run_patch = {"cephConfig": {"osd.7": {"crimson_seastar_cpu_cores": "0"}}}
    undo = undo_of(plan, crimson_osds=[7], **patched_by_run(admin, "restart", "uid-1", run_patch))
    # the spec back already (the restore's first part): only the marks stay on the cluster
    kubernetes.client.CustomObjectsApi(admin).patch_namespaced_custom_object(
        "ceph.rook.io", "v1", ROOK_NS, "cephclusters", "rook-ceph",
        {"spec": {"cephConfig": {"osd.7": None}}})  # fmt: skip
    marks_on_cluster = {k: get_cluster(admin)["metadata"]["annotations"][k]
                        for k in (PATCHED_BY, UNDO_DIGEST)}  # fmt: skip

    def saved() -> None:
        """The run's marks on the cluster, as its patch left them."""
        kubernetes.client.CustomObjectsApi(admin).patch_namespaced_custom_object(
            "ceph.rook.io", "v1", ROOK_NS, "cephclusters", "rook-ceph",
            {"metadata": {"annotations": marks_on_cluster}})  # fmt: skip

    # osd.0 of the module never turns Ready here (no kubelet): the rollback wait gave up
    # long ago, as it does after rolloutTimeoutSeconds
    marks = {"started": time.time() - 10_000, "configCleaned": "done"}
    status: dict[str, Any] = {"osdPlacement": {"7": NODE},
                              "record": {"restore": marks, "undo": undo}}  # fmt: skip

    def osd_pod(name: str) -> dict[str, Any]:  # osd.7: none of the module's other pods
        pod = copy.deepcopy(OSD_POD)
        pod["metadata"].update(name=name, labels={"app": "rook-ceph-osd", "ceph-osd-id": "7"})
        return pod

    def cluster_marks() -> set[str]:
        return set(get_cluster(admin)["metadata"].get("annotations") or {}) & {
            PATCHED_BY, UNDO_DIGEST}  # fmt: skip

    core.create_namespaced_pod(ROOK_NS, osd_pod("rook-ceph-osd-7-run"))
    token = control_plane.service_account_token(OP_NS, "crimsonbench-operator", create=False)
    settings = Settings(rollout_timeout_seconds=600, operator_namespace=OP_NS)

    def tick() -> Any:
        nonlocal status
        ctx = ctx_of("restart", spec, op, settings, status)
        try:
            assert restore_cluster(ctx)
        finally:
            status = carried(status, ctx)
        return ctx

    try:
        with control_plane.api_client(token) as op:
            with pytest.raises(NotReady, match="restarting osd.7"):
                tick()
            # deleted (no kubelet here: it stays Terminating), and the record kept with the
            # run so a restarted operator does not delete the next pod again
            got = core.read_namespaced_pod("rook-ceph-osd-7-run", ROOK_NS)
            assert got.metadata.deletion_timestamp is not None
            assert status["record"]["restore"]["osdsRestarted"]["uids"] == [got.metadata.uid]
            with pytest.raises(NotReady, match="waiting .* for osd.7 to restart"):
                tick()
            assert "over" not in status["record"]["restore"]
            # Rook's Deployment makes the next pod; once Ready, the restore is over
            core.create_namespaced_pod(ROOK_NS, osd_pod("rook-ceph-osd-7-next"))
            ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
            core.patch_namespaced_pod_status("rook-ceph-osd-7-next", ROOK_NS, ready)
            cond = tick().record.conditions()
            assert cond["OsdsRestarted"].status == "True", cond
            assert "osd.7 restarted" in cond["OsdsRestarted"].message
            assert "RolledBack" not in cond  # decided before `config rm`, not looked at again
            assert status["record"]["restore"]["over"] == "done"
            # over: the run's marks are off the CephCluster
            assert cluster_marks() == set()
            assert tick().record.status_patch() == {}  # restored: nothing more is done
            # a pod that never comes back: given up after the rollout timeout, said so
            core.delete_namespaced_pod("rook-ceph-osd-7-next", ROOK_NS, grace_period_seconds=0)
            late = {"since": time.time() - 601, "uids": [got.metadata.uid]}
            restore = {**marks, "osdsRestarted": late}
            status = {"osdPlacement": {"7": NODE}, "record": {"restore": restore, "undo": undo}}
            saved()
            cond = tick().record.conditions()["OsdsRestarted"]
            assert cond.status == "False" and "keep the run's reactor layout" in cond.message
            assert cluster_marks() == set()
    finally:
        for pod in ("rook-ceph-osd-7-run", "rook-ceph-osd-7-next"):
            with contextlib.suppress(ApiException):
                core.delete_namespaced_pod(pod, ROOK_NS, grace_period_seconds=0)


def test_a_crimson_osd_rook_did_not_restart_is_restarted_before_the_steps(
    admin: kubernetes.client.ApiClient, control_plane: ControlPlane
) -> None:
    """Rook restarts an OSD only when its Deployment changes: with resources already as
    planned (another policy, same reactor count) a crimson OSD would keep its old reactor
    layout and the run would measure it. The rollout restarts any planned OSD still in the
    pod it had at the patch, under the operator's RBAC, and waits for the next one."""
    from crimsonbench.controller import osd_restarts
    from crimsonbench.controller.kube import Kube
    from crimsonbench.controller.settings import Settings
    from crimsonbench.errors import NotReady
    from crimsonbench.spec.models import validate_spec

    core = kubernetes.client.CoreV1Api(admin)
    spec = validate_spec(run_body("samelayout")["spec"])

    def osd_pod(name: str) -> dict[str, Any]:  # osd.8: none of the module's other pods
        pod = copy.deepcopy(OSD_POD)
        pod["metadata"].update(name=name, labels={"app": "rook-ceph-osd", "ceph-osd-id": "8"})
        return pod

    core.create_namespaced_pod(ROOK_NS, osd_pod("rook-ceph-osd-8-old"))
    token = control_plane.service_account_token(OP_NS, "crimsonbench-operator", create=False)
    try:
        with control_plane.api_client(token) as op:
            kube = Kube(op)
            at_patch = {p.osd_id: p.incarnation for p in kube.list_osd_pods(ROOK_NS)}
            plan = xeon_plan("samelayout", spec, "uid-1")
            status = {"record": {"osdIncarnations": {"8": at_patch[8]}, "undo": undo_of(plan)}}
            ctx = ctx_of("samelayout", spec, op, Settings(), status)

            def progress() -> Any:
                pods = kube.list_osd_pods(ROOK_NS)
                return osd_restarts.started_after_patch(ctx, {8: NODE}, pods)

            with pytest.raises(NotReady, match="restarting osd.8: Rook did not"):  # I/O raises
                progress()
            old = core.read_namespaced_pod("rook-ceph-osd-8-old", ROOK_NS)
            assert old.metadata.deletion_timestamp is not None  # deleted, Terminating
            core.create_namespaced_pod(ROOK_NS, osd_pod("rook-ceph-osd-8-new"))
            assert "started with the run's layout" in progress()  # its pod started after it
    finally:
        for pod in ("rook-ceph-osd-8-old", "rook-ceph-osd-8-new"):
            with contextlib.suppress(ApiException):
                core.delete_namespaced_pod(pod, ROOK_NS, grace_period_seconds=0)


def test_a_job_whose_pod_never_ran_fails_the_run_saying_why(
    admin: kubernetes.client.ApiClient,
) -> None:
    """Seen on the real node: a Guaranteed pod beside the run left too little CPU, the
    kubelet rejected the facts Job's pod (OutOfcpu), and the run failed with only "the pod
    never ran". Here the kubelet's part is played by writing the pod's status as a kubelet
    does; the Job controller (the real kube-controller-manager) then fails the Job."""
    from crimsonbench.controller.jobs import job_log
    from crimsonbench.controller.kube import Kube
    from crimsonbench.errors import ExecutionError

    name = "rejected-facts"
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ROOK_NS},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {
                "nodeName": NODE, "restartPolicy": "Never",
                "containers": [{"name": "facts", "image": "localhost/none:0"}],
            }},
        },
    }  # fmt: skip
    core, batch = kubernetes.client.CoreV1Api(admin), kubernetes.client.BatchV1Api(admin)
    batch.create_namespaced_job(ROOK_NS, body)
    try:
        pod = wait_for(
            "the Job's pod",
            lambda: core.list_namespaced_pod(ROOK_NS, label_selector=f"job-name={name}").items,
        )[0]
        reason = "OutOfcpu"
        message = ("Pod was rejected: Node didn't have enough resource: cpu, "
                   "requested: 1000, used: 1600, capacity: 2000")  # fmt: skip
        core.patch_namespaced_pod_status(
            pod.metadata.name, ROOK_NS,
            {"status": {"phase": "Failed", "reason": reason, "message": message}},
        )  # fmt: skip
        kube = Kube(admin)
        wait_for("the Job failed", lambda: kube.job_state(ROOK_NS, name) == "failed")
        with pytest.raises(ExecutionError) as err:
            job_log(kube, body, "reading the cluster")
        text = str(err.value)
        assert f"the pod never ran: pod {pod.metadata.name} Failed: {reason}: {message}" in text
    finally:
        batch.delete_namespaced_job(name, ROOK_NS, propagation_policy="Background")


# ---------------------------------------------------------------- the trust boundary

OTHER_CLUSTER: dict[str, Any] = {
    **copy.deepcopy(CEPHCLUSTER),
    "metadata": {"name": "other", "namespace": OTHER_ROOK_NS},
}


@pytest.fixture()
def other_cluster(admin: kubernetes.client.ApiClient) -> Iterator[dict[str, Any]]:
    """Namespace B: a Rook cluster the chart does not name, with its admin Secret."""
    custom, core = kubernetes.client.CustomObjectsApi(admin), kubernetes.client.CoreV1Api(admin)
    created = custom.create_namespaced_custom_object(
        "ceph.rook.io", "v1", OTHER_ROOK_NS, "cephclusters", copy.deepcopy(OTHER_CLUSTER)
    )
    core.create_namespaced_secret(OTHER_ROOK_NS, {
        "metadata": {"name": "rook-ceph-mon"},
        "stringData": {"ceph-username": "client.admin", "ceph-secret": "AQB-not-a-real-key=="},
    })  # fmt: skip
    yield dict(created)
    custom.delete_namespaced_custom_object("ceph.rook.io", "v1", OTHER_ROOK_NS, "cephclusters",
                                           "other")  # fmt: skip
    core.delete_namespaced_secret("rook-ceph-mon", OTHER_ROOK_NS)


def _cluster_state(api: Any, namespace: str, name: str) -> str:
    """The CephCluster as a run may change it: spec and annotations."""
    got = kubernetes.client.CustomObjectsApi(api).get_namespaced_custom_object(
        "ceph.rook.io", "v1", namespace, "cephclusters", name
    )
    return json.dumps([got["spec"], got["metadata"].get("annotations")], sort_keys=True)


def _run_in(run_ns: str, name: str, **target: Any) -> dict[str, Any]:
    body = run_body(name)
    body["metadata"]["namespace"] = run_ns
    if target:
        body["spec"]["target"] = {"rook": {**body["spec"]["target"]["rook"], **target}}
    return body


def test_a_run_cannot_act_on_a_cluster_its_namespace_may_not_target(
    admin: Any,
    cephcluster: dict[str, Any],
    other_cluster: dict[str, Any],
    operator: Callable[[], KopfRunner],
) -> None:
    """A run in namespace A (intruder) naming the listed CephCluster, and a run in an
    allowed namespace naming a cluster the chart does not list (B): both fail at once,
    naming the field and the chart value, with a Warning event; nothing of either run
    exists anywhere, no Job mounts an admin key, neither cluster changes. Then deleted:
    their finalizers served without touching either cluster."""
    custom = kubernetes.client.CustomObjectsApi(admin)
    core = kubernetes.client.CoreV1Api(admin)
    before = {ns: _cluster_state(admin, ns, name)
              for ns, name in ((ROOK_NS, "rook-ceph"), (OTHER_ROOK_NS, "other"))}  # fmt: skip
    runs = {
        ("reach", INTRUDER_NS): ("spec.target.rook.namespace", "BenchmarkRuns in namespace "
                                 "intruder may not target CephCluster rook-ceph/rook-ceph",
                                 "adds intruder to its allowedNamespaces in the chart's "
                                 "targets.rook"),
        ("reach-b", RUN_NS): ("spec.target.rook", "the operator may not act on CephCluster "
                              "rook-b/other", "{cephCluster: rook-b/other, allowedNamespaces: "
                              "[bench]}"),
    }  # fmt: skip
    with operator() as runner:
        custom.create_namespaced_custom_object(G, V, INTRUDER_NS, "benchmarkruns",
                                               _run_in(INTRUDER_NS, "reach"))  # fmt: skip
        custom.create_namespaced_custom_object(
            G, V, RUN_NS, "benchmarkruns",
            _run_in(RUN_NS, "reach-b", namespace=OTHER_ROOK_NS, clusterName="other"))  # fmt: skip
        for (name, ns), (field, words, fix) in runs.items():
            st = wait_for(
                f"{name} failed",
                lambda n=name, s=ns: (
                    status_of(admin, n, s).get("phase") == "Failed" and status_of(admin, n, s)
                ),
            )
            assert st["message"].startswith(f"{field}: {words}"), st["message"]
            assert fix in st["message"], st["message"]
            conds = {c["type"]: c for c in st["conditions"]}
            assert conds["Succeeded"]["reason"] == "TargetNotAllowed"
            assert st["stage"] == "done" and "observe" not in json.dumps(st)
            events = wait_for(f"{name}'s event", lambda n=name, s=ns: [
                e for e in core.list_namespaced_event(
                    s, field_selector=f"involvedObject.name={n}").items
                if e.reason == "TargetNotAllowed"])  # fmt: skip
            assert events[0].type == "Warning" and words in events[0].message
        # nothing was made for them, anywhere: no Job (none mounts an admin key), no
        # ConfigMap, no Lease; both clusters exactly as they were
        for name, _ in runs:
            assert jobs_of(admin, name) == []
            for ns in (OP_NS, RUN_NS, ROOK_NS, INTRUDER_NS, OTHER_ROOK_NS):
                assert (
                    core.list_namespaced_config_map(ns, label_selector=f"{G}/run={name}").items
                    == []
                )
        assert leases(admin) == []
        for name, ns in runs:
            custom.delete_namespaced_custom_object(G, V, ns, "benchmarkruns", name)
            wait_for(f"{name} gone", lambda n=name, s=ns: _gone(admin, n, s))
    assert runner.exit_code == 0, runner.output
    after = {ns: _cluster_state(admin, ns, name)
             for ns, name in ((ROOK_NS, "rook-ceph"), (OTHER_ROOK_NS, "other"))}  # fmt: skip
    assert after == before
    assert jobs_of(admin, "reach") == jobs_of(admin, "reach-b") == []


def test_the_operators_credentials_reach_nothing_outside_the_targets(
    control_plane: ControlPlane, admin: Any, other_cluster: dict[str, Any]
) -> None:
    """Should the operator be made to try anyway, the chart's RBAC stops it on the real
    API server: namespace B's CephCluster, Jobs (which would mount B's admin key) and
    Secrets, any Secret at all, exec and ConfigMaps in namespace A, other CephClusters."""
    token = control_plane.service_account_token(OP_NS, "crimsonbench-operator", create=False)
    with control_plane.api_client(token) as op:
        custom = kubernetes.client.CustomObjectsApi(op)
        batch, core = kubernetes.client.BatchV1Api(op), kubernetes.client.CoreV1Api(op)
        authz = kubernetes.client.AuthorizationV1Api(op)

        def forbidden(call: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
            with pytest.raises(ApiException) as err:
                call(*args, **kwargs)
            assert err.value.status == 403, err.value

        forbidden(custom.patch_namespaced_custom_object, "ceph.rook.io", "v1", OTHER_ROOK_NS,
                  "cephclusters", "other", {"spec": {"dataDirHostPath": "/etc"}})  # fmt: skip
        forbidden(custom.get_namespaced_custom_object, "ceph.rook.io", "v1", OTHER_ROOK_NS,
                  "cephclusters", "other")  # fmt: skip
        forbidden(custom.list_cluster_custom_object, "ceph.rook.io", "v1", "cephclusters")
        mount = {"name": "k", "secret": {"secretName": "rook-ceph-mon"}}
        pod = {
            "restartPolicy": "Never",
            "volumes": [mount],
            "containers": [
                {"name": "c", "image": "x", "volumeMounts": [{"name": "k", "mountPath": "/k"}]}
            ],
        }
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "mount-b"},
               "spec": {"template": {"spec": pod}}}  # fmt: skip
        for ns in (OTHER_ROOK_NS, INTRUDER_NS, RUN_NS):
            forbidden(batch.create_namespaced_job, ns, job, dry_run="All")
        for ns in (OTHER_ROOK_NS, ROOK_NS, OP_NS, RUN_NS):
            forbidden(core.read_namespaced_secret, "rook-ceph-mon", ns)
        forbidden(core.list_secret_for_all_namespaces)
        for ns in (OTHER_ROOK_NS, INTRUDER_NS):
            forbidden(core.create_namespaced_config_map, ns,
                      {"metadata": {"name": "x"}}, dry_run="All")  # fmt: skip
        # asked of the authorizer: what the same token may do in A and B, and in Rook's
        for ns, verb, group, resource, name, allowed in [
            (INTRUDER_NS, "create", "", "pods/exec", None, False),
            (OTHER_ROOK_NS, "create", "", "pods/exec", None, False),
            (OTHER_ROOK_NS, "delete", "", "pods", None, False),
            (ROOK_NS, "patch", "ceph.rook.io", "cephclusters", "other", False),
            (ROOK_NS, "patch", "ceph.rook.io", "cephclusters", "rook-ceph", True),
            (ROOK_NS, "create", "batch", "jobs", None, True),
            (RUN_NS, "create", "", "configmaps", None, True),
        ]:  # fmt: skip
            res, _, sub = resource.partition("/")
            review = authz.create_self_subject_access_review({"spec": {"resourceAttributes": {
                "namespace": ns, "verb": verb, "group": group, "resource": res,
                "subresource": sub or None, "name": name}}})  # fmt: skip
            assert review.status.allowed is allowed, (ns, verb, resource, name)


def test_the_restore_takes_only_the_runs_record_and_only_values_still_the_runs(
    control_plane: ControlPlane, admin: Any, cephcluster: dict[str, Any]
) -> None:
    """issue 36 #2, #6 and the confused deputy. The patch is write-ahead: one tick records
    every value it will set with what the cluster had, a later tick patches and puts the
    record's sha256 on the CephCluster. Whoever may edit the run's status cannot decide
    what the restore writes (a changed record is refused: nothing applied, the marks stay,
    the next run is refused too); with the record as written, the restore puts back the
    run's values and nothing else: an admin's mid-run edit, of a value the run set and of
    one it never touched, stays. Under the chart's RBAC, through the operator's token."""
    from crimsonbench.controller import rook
    from crimsonbench.controller.decisions.restore_steps import PATCHED_BY, UNDO_DIGEST
    from crimsonbench.controller.restore import restore_cluster
    from crimsonbench.controller.settings import Settings
    from crimsonbench.errors import ExecutionError, NotReady
    from crimsonbench.manifests.cephcluster import apply_merge_patch
    from crimsonbench.manifests.cephcluster_undo import changes_digest
    from crimsonbench.spec.models import validate_spec
    from crimsonbench.spec.status import SpecChange

    custom = kubernetes.client.CustomObjectsApi(admin)
    spec = validate_spec(run_body("deputy")["spec"])
    plan = xeon_plan("deputy", spec, "uid-d")
    original = copy.deepcopy(cephcluster["spec"])
    token = control_plane.service_account_token(OP_NS, "crimsonbench-operator", create=False)
    settings = Settings(operator_namespace=OP_NS, rollout_timeout_seconds=600)
    status: dict[str, Any] = {"osdPlacement": {"0": NODE}, "record": {"undo": undo_of(plan)}}

    with control_plane.api_client(token) as op:

        def ctx(uid: str = "uid-d", name: str = "deputy", st: Any = None) -> Any:
            return ctx_of(name, spec, op, settings, status if st is None else st, uid=uid)

        first = ctx()
        with pytest.raises(NotReady, match="recorded the .* values the patch of"):
            rook.patch_cluster(first, plan)
        assert get_cluster(admin)["spec"] == original  # recorded, nothing changed yet
        status = carried(status, first)
        undo = status["record"]["undo"]
        assert undo["specChanges"] and undo["clusterUid"] == cephcluster["metadata"]["uid"]
        second = ctx()
        rook.patch_cluster(second, plan)
        status = carried(status, second)
        patched = get_cluster(admin)
        assert patched["spec"] != original  # the run's cephConfig and resources
        marks = patched["metadata"]["annotations"]
        assert marks == {PATCHED_BY: f"{RUN_NS}/deputy/uid-d", UNDO_DIGEST: undo["specDigest"]}

        # an admin, mid-run: a value the run set (the OSDs' memory), and one it never touched
        admin_edits = {"resources": {"osd": {"limits": {"memory": "9Gi"}}},
                       "dashboard": {"enabled": False}}  # fmt: skip
        custom.patch_namespaced_custom_object("ceph.rook.io", "v1", ROOK_NS, "cephclusters",
                                              "rook-ceph", {"spec": admin_edits})  # fmt: skip

        # whoever may edit the run's status changes the record: refused, nothing applied
        evil = {"path": ["cephVersion", "image"], "after": '"evil.example/ceph:latest"'}
        changed = {**undo["specChanges"][0], "before": '"0"'}
        for tampered in ([*undo["specChanges"], evil], [changed, *undo["specChanges"][1:]]):
            redone = changes_digest(rook.as_changes([SpecChange.model_validate(c)
                                                     for c in tampered]))  # fmt: skip
            for digest in (undo["specDigest"], redone):  # its digest redone: still refused
                record = {**undo, "specChanges": tampered, "specDigest": digest}
                refused = ctx(st={**status, "record": {**status["record"], "undo": record}})
                assert restore_cluster(refused) is False
                cond = refused.record.conditions()["ClusterRestored"]
                assert cond.status == "False" and cond.reason == "UndoRecordMismatch", cond
                assert [r for r, _ in refused.record.events] == ["UndoRecordMismatch"]
                assert get_cluster(admin)["metadata"]["annotations"] == marks  # they stay
        assert get_cluster(admin)["spec"]["cephVersion"] == original["cephVersion"]
        # the next run on this cluster is refused before it starts (not an original)
        with pytest.raises(ExecutionError, match="carries the patch of BenchmarkRun "
                                                 f"{RUN_NS}/deputy"):  # fmt: skip
            rook.check_not_patched(ctx("uid-e", "next"))

        # the record as written: the run's values back, the admin's stay, and are named
        restoring = ctx()
        with pytest.raises(NotReady, match="roll the OSDs back"):
            restore_cluster(restoring)  # then waits for Rook, which no kubelet plays here
        back = get_cluster(admin)["spec"]
        assert back == apply_merge_patch(original, admin_edits), back
        kept = restoring.record.conditions()["SpecRestored"]
        assert kept.reason == "EditsKept" and "resources.osd.limits.memory" in kept.message
