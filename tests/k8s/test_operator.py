"""The operator against a real API server, running under its least-privilege RBAC.

No kubelet runs here, so pods never start: these tests drive everything up to "waiting for
Rook to roll out" (Rook's operator is not running either) and the whole cleanup path.
Step execution with real pods is covered by the real-node e2e.
"""

from __future__ import annotations

import copy
import json
import socket
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
from harness import ControlPlane
from kopf.testing import KopfRunner
from kubernetes.client.exceptions import ApiException

from crimsonbench.manifests.rbac import operator_rbac

pytestmark = pytest.mark.k8s
ROOT = Path(__file__).resolve().parents[2]
G, V = "bench.crimson.ceph.io", "v1alpha1"
OP_NS, RUN_NS, ROOK_NS = "crimsonbench", "bench", "rook-ceph"
NODE = "node-a"


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
        for ns in (OP_NS, RUN_NS, ROOK_NS):
            try:
                core.create_namespace({"metadata": {"name": ns}})
            except ApiException as exc:
                assert exc.status == 409
        control_plane.apply_yaml(operator_rbac(OP_NS))
        # The topology probe's result for node-a, as the probe Job would have cached it:
        # the real lscpu output of the reference machine (pods cannot run here).
        lscpu = (ROOT / "tests/fixtures/lscpu/xeon-8276m-2s.json").read_text()
        from crimsonbench.controller.topology import cache_configmap

        control_plane.apply_yaml(
            [
                {
                    **cache_configmap(NODE, lscpu),
                    "metadata": {**cache_configmap(NODE, lscpu)["metadata"], "namespace": OP_NS},
                }
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

    def start() -> KopfRunner:
        return KopfRunner(
            ["run", "-m", "crimsonbench.controller.main", "--standalone", "--namespace", RUN_NS],
            timeout=60,
        )

    return start


def get_run(api: Any, name: str) -> dict[str, Any]:
    return dict(
        kubernetes.client.CustomObjectsApi(api).get_namespaced_custom_object(
            G, V, RUN_NS, "benchmarkruns", name
        )
    )


def get_cluster(api: Any) -> dict[str, Any]:
    return dict(
        kubernetes.client.CustomObjectsApi(api).get_namespaced_custom_object(
            "ceph.rook.io", "v1", ROOK_NS, "cephclusters", "rook-ceph"
        )
    )


def test_patch_wait_restart_and_delete_restores_byte_for_byte(
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
            "rollout wait",
            lambda: (
                get_run(admin, "ref56").get("status", {}).get("stage") == "rollout"
                and get_run(admin, "ref56")["status"]
            ),
        )
        patched = get_cluster(admin)
        scrape = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10)
        metrics = scrape.read().decode()
    assert runner.exit_code == 0, runner.output
    cfg = patched["spec"]["cephConfig"]
    assert cfg["osd.0"]["crimson_seastar_cpu_cores"] == "0-27,56-83"  # Ceph 19 -> legacy names
    assert cfg["global"]["enable_experimental_unrecoverable_data_corrupting_features"] == "crimson"
    assert status["phase"] == "Preparing" and status["stepsTotal"] == 8
    assert status["startedAt"].endswith("Z") and status["progress"] == "0/8"
    assert "Rook" in status["message"] and "crimson setup Job" in status["message"]
    batch = kubernetes.client.BatchV1Api(admin)
    setup = batch.read_namespaced_job("ref56-ceph-setup", ROOK_NS)
    script = setup.spec.template.spec.containers[0].command[2]
    assert "osd set-allow-crimson --yes-i-really-mean-it" in script
    generation = patched["metadata"]["generation"]
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
    assert any(
        line.startswith("crimsonbench_run_steps{") and line.endswith(" 8.0") for line in mine
    ), mine
    current = [
        line
        for line in mine
        if line.startswith("crimsonbench_run_phase{") and line.endswith(" 1.0")
    ]
    assert len(current) == 1 and 'phase="Preparing"' in current[0]
    assert all('namespace="bench"' in line and 'reactors="56"' in line for line in current)

    # Restart: the new operator continues waiting; it does not patch again.
    with operator():
        time.sleep(6)
    assert get_cluster(admin)["metadata"]["generation"] == generation

    with operator():
        custom.delete_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", "ref56")
        wait_for("run gone", lambda: _gone(admin, "ref56"))
    restored = get_cluster(admin)
    assert json.dumps(restored["spec"], sort_keys=True) == original
    # Rook never unsets cephConfig keys in the mon db: a Job removes ours.
    names = {j.metadata.name for j in batch.list_namespaced_job(ROOK_NS).items}
    assert "ref56-ceph-setup" not in names
    cleanup = batch.read_namespaced_job("ref56-ceph-cleanup", ROOK_NS)
    script = cleanup.spec.template.spec.containers[0].command[2]
    assert "config rm osd.0 crimson_seastar_cpu_cores" in script
    assert cleanup.spec.ttl_seconds_after_finished == 3600
    batch.delete_namespaced_job("ref56-ceph-cleanup", ROOK_NS)
    leases = kubernetes.client.CoordinationV1Api(admin).list_namespaced_lease(OP_NS).items
    assert leases == []


def _gone(api: Any, name: str) -> bool:
    try:
        get_run(api, name)
    except ApiException as exc:
        return exc.status == 404
    return False


def test_second_run_waits_for_the_first(
    admin: Any, cephcluster: dict[str, Any], operator: Callable[[], KopfRunner]
) -> None:
    custom = kubernetes.client.CustomObjectsApi(admin)
    with operator():
        custom.create_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", run_body("first"))
        wait_for(
            "first holds the cluster",
            lambda: get_run(admin, "first").get("status", {}).get("stage") in ("rollout", "patch"),
        )
        custom.create_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", run_body("second"))
        st = wait_for("second pending", lambda: get_run(admin, "second").get("status"))
        conds = {c["type"]: c for c in st["conditions"]}
        assert st["phase"] == "Pending"
        assert conds["ClusterFree"]["reason"] == "ClusterBusy"
        assert f"{RUN_NS}/first" in conds["ClusterFree"]["message"]
        custom.delete_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", "first")
        wait_for(
            "second takes over",
            lambda: get_run(admin, "second").get("status", {}).get("stage") == "rollout",
            timeout=90,
        )
        custom.delete_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", "second")
        wait_for("second gone", lambda: _gone(admin, "second"))


def test_planner_error_fails_the_run_with_the_field(
    admin: Any, cephcluster: dict[str, Any], operator: Callable[[], KopfRunner]
) -> None:
    custom = kubernetes.client.CustomObjectsApi(admin)
    body = run_body("toomany", count=8, reactors=8)  # 64 reactors on 56 CPUs
    with operator():
        custom.create_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", body)
        st = wait_for(
            "failed",
            lambda: (
                get_run(admin, "toomany").get("status", {}).get("phase") == "Failed"
                and get_run(admin, "toomany")["status"]
            ),
        )
        assert "spec.osd" in st["message"] and "need" in st["message"]
        assert st["finishedAt"] and st["stage"] == "done"
        assert (
            get_cluster(admin)["metadata"]["generation"] == cephcluster["metadata"]["generation"]
        ), "a spec that cannot run must not touch the cluster"
        custom.delete_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", "toomany")
        wait_for("gone", lambda: _gone(admin, "toomany"))


def test_layout_change_without_consent_is_refused_and_cluster_untouched(
    admin: Any, cephcluster: dict[str, Any], operator: Callable[[], KopfRunner]
) -> None:
    custom = kubernetes.client.CustomObjectsApi(admin)
    body = run_body("noconsent")
    body["spec"]["target"]["rook"]["allowReprovision"] = False
    with operator():
        custom.create_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", body)
        st = wait_for(
            "failed",
            lambda: (
                get_run(admin, "noconsent").get("status", {}).get("phase") == "Failed"
                and get_run(admin, "noconsent")["status"]
            ),
        )
        assert "spec.target.rook.allowReprovision" in st["message"]
        conds = {c["type"]: c for c in st["conditions"]}
        assert conds["Succeeded"]["reason"] == "InvalidSpec"
        assert json.dumps(get_cluster(admin)["spec"], sort_keys=True) == json.dumps(
            cephcluster["spec"], sort_keys=True
        )
        custom.delete_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", "noconsent")
        wait_for("gone", lambda: _gone(admin, "noconsent"))


def test_job_and_configmap_builders_are_accepted_by_the_real_api(
    control_plane: ControlPlane, admin: Any
) -> None:
    """Every object the operator creates passes the real API server's validation, created
    (server-side dry run) as the operator's own ServiceAccount, so RBAC is exercised too."""
    from crimsonbench.manifests import jobs
    from crimsonbench.plan.build import build_plan
    from crimsonbench.plan.topology import parse_lscpu_json
    from crimsonbench.spec.models import validate_spec

    spec = validate_spec(run_body("dryrun")["spec"] | {})
    topo = parse_lscpu_json((ROOT / "tests/fixtures/lscpu/xeon-8276m-2s.json").read_text())
    plan = build_plan("dryrun", spec, topo, "19.2.1")
    access = jobs.ceph_access_for(spec, RUN_NS)
    image = "crimsonbench-fio:test"
    objects = [
        jobs.topology_probe_job("dryrun", NODE, image, namespace=OP_NS),
        jobs.prefill_job("dryrun", plan, image, access, spec=spec, node=NODE),
        jobs.fio_jobs_configmap("dryrun", plan.prefill_jobs, namespace=access.namespace),
        jobs.fio_step_job("dryrun", plan.steps[0], NODE, image, access, plan.cpu.client_cpuset),
        jobs.fio_jobs_configmap("dryrun", plan.steps[0], namespace=access.namespace),
    ]
    token = control_plane.service_account_token(OP_NS, "crimsonbench-operator", create=False)
    with control_plane.api_client(token) as op:
        batch, core = kubernetes.client.BatchV1Api(op), kubernetes.client.CoreV1Api(op)
        for obj in objects:
            ns = obj["metadata"].get("namespace") or access.namespace
            create = (
                batch.create_namespaced_job
                if obj["kind"] == "Job"
                else (core.create_namespaced_config_map)
            )
            created = create(ns, obj, dry_run="All")
            assert created.metadata.name == obj["metadata"]["name"]
        step_job = objects[3]
        container = step_job["spec"]["template"]["spec"]["containers"][0]
        cpus = len(plan.cpu.client)
        assert (
            container["resources"]["requests"]["cpu"]
            == container["resources"]["limits"]["cpu"]
            == str(cpus)
        ), "fio pods must be Guaranteed with one CPU per client CPU"
