"""Every run ends (issue 36), on a real API server, the operator under the chart's RBAC.

A run placed mid-flight (its status as the operator leaves it; the CephCluster patched by
the operator's own code under the run's uid) meets what used to keep it going for ever
with the cluster patched: an API refusal that never stops (a quota forbids its Jobs), a
CephClient Rook never makes Ready, its CephCluster deleted, a restore that cannot finish.
Each ends Failed in bounded time, restored where it changed the cluster, the lease
released. Step results over the ConfigMap limit, and a set of results ConfigMaps left
half-written, are stored and read back instead of failing every tick.

No kubelet runs here: the OSD pod is a Ready pod bound to the node (as Rook's would be),
and Rook's part (a pool Ready) is played by writing its status. This module has its own
Rook namespace, so its OSD pod is the only one the restore waits for.
"""

from __future__ import annotations

import contextlib
import copy
import json
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
from harness import ControlPlane
from kopf.testing import KopfRunner
from kubernetes.client.exceptions import ApiException
from test_operator import CEPHCLUSTER, OP_NS, G, V, chart_rbac, wait_for

pytestmark = pytest.mark.k8s
ROOT = Path(__file__).resolve().parents[2]
RUN_NS, ROOK_NS, NODE = "ends", "rook-ends", "node-e"
ROOK = ("ceph.rook.io", "v1")
TARGETS = {
    "rook": [{"cephCluster": f"{ROOK_NS}/rook-ceph", "allowedNamespaces": [RUN_NS]},
             # a cluster that never exists
             {"cephCluster": f"{ROOK_NS}/nothere", "allowedNamespaces": [RUN_NS]},
             # test_operator's, so that module's tests keep their RBAC in one session
             {"cephCluster": "rook-ceph/rook-ceph", "allowedNamespaces": ["bench"]}],
    "externalNamespaces": [],
}  # fmt: skip
BOUND_S = 4  # errorTimeoutSeconds of the operator here


def spec() -> dict[str, Any]:
    """A classic run: no crimson layout, so its restore has no `config rm` Job and no OSD
    restart, which need a kubelet."""
    return {
        "target": {"rook": {"clusterName": "rook-ceph", "namespace": ROOK_NS}},
        "osd": {"flavor": "classic", "objectStore": "bluestore", "count": 1,
                "cpuPolicy": "osd", "cpuSet": "0-27,56-83"},
        "client": {"cpuSet": "28-55,84-111", "node": NODE, "images": 2},
        "sweep": {"iodepths": [1], "runtimeSeconds": 5},
    }  # fmt: skip


@pytest.fixture(scope="module")
def api(control_plane: ControlPlane) -> Iterator[kubernetes.client.ApiClient]:
    with control_plane.admin_api_client() as admin:
        core = kubernetes.client.CoreV1Api(admin)
        for ns in (OP_NS, RUN_NS, ROOK_NS, "rook-ceph", "bench"):  # the chart's targets
            with contextlib.suppress(ApiException):
                core.create_namespace({"metadata": {"name": ns}})
        control_plane.apply_yaml(chart_rbac(OP_NS, TARGETS))
        accounts = core.list_namespaced_service_account
        wait_for("rook-ends' default ServiceAccount (a pod needs it)", lambda: "default" in {
            a.metadata.name for a in accounts(ROOK_NS).items})  # fmt: skip
        from crimsonbench.manifests.topology_cache import cache_configmap

        lscpu = (ROOT / "tests/fixtures/lscpu/xeon-8276m-2s.json").read_text()
        cache = cache_configmap(NODE, lscpu)
        cache["metadata"]["namespace"] = OP_NS
        osd = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "rook-ceph-osd-0-e", "namespace": ROOK_NS,
                            "labels": {"app": "rook-ceph-osd", "ceph-osd-id": "0"}},
               "spec": {"nodeName": NODE,
                        "containers": [{"name": "osd", "image": "ceph"}]}}  # fmt: skip
        control_plane.apply_yaml([cache, {"apiVersion": "v1", "kind": "Node",
                                          "metadata": {"name": NODE}}, osd])  # fmt: skip
        ready = {"status": {"phase": "Running",
                            "conditions": [{"type": "Ready", "status": "True"}]}}  # fmt: skip
        core.patch_namespaced_pod_status("rook-ceph-osd-0-e", ROOK_NS, ready)
        yield admin


@pytest.fixture()
def cluster(api: kubernetes.client.ApiClient) -> Iterator[dict[str, Any]]:
    body = copy.deepcopy(CEPHCLUSTER)
    body["metadata"]["namespace"] = ROOK_NS
    body["spec"]["storage"]["nodes"][0]["name"] = NODE
    custom = kubernetes.client.CustomObjectsApi(api)
    yield custom.create_namespaced_custom_object(*ROOK, ROOK_NS, "cephclusters", body)
    with contextlib.suppress(ApiException):
        custom.delete_namespaced_custom_object(*ROOK, ROOK_NS, "cephclusters", "rook-ceph")


@pytest.fixture()
def operator(
    control_plane: ControlPlane, api: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., KopfRunner]:
    token = control_plane.service_account_token(OP_NS, "crimsonbench-operator", create=False)
    monkeypatch.setenv("KUBECONFIG", str(control_plane.kubeconfig(tmp_path / "kc", token)))
    monkeypatch.setenv("CRIMSONBENCH_OPERATOR_NAMESPACE", OP_NS)
    monkeypatch.setenv("CRIMSONBENCH_ROOK_TARGETS", json.dumps(TARGETS["rook"]))
    monkeypatch.setenv("CRIMSONBENCH_ERROR_TIMEOUT_SECONDS", str(BOUND_S))

    def start(**env: str) -> KopfRunner:
        with socket.socket() as s:  # a port free now (other tests run for minutes)
            s.bind(("127.0.0.1", 0))
            monkeypatch.setenv("CRIMSONBENCH_METRICS_PORT", str(s.getsockname()[1]))
        for key, value in env.items():
            monkeypatch.setenv(f"CRIMSONBENCH_{key}", value)
        return KopfRunner(["run", "-m", "crimsonbench.controller.main", "--standalone",
                           "--namespace", RUN_NS], timeout=60)  # fmt: skip

    return start


def status_of(api: Any, name: str) -> dict[str, Any]:
    got = kubernetes.client.CustomObjectsApi(api).get_namespaced_custom_object(
        G, V, RUN_NS, "benchmarkruns", name
    )
    return dict(got.get("status") or {})


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status.get("conditions") or []}


def failed(api: Any, name: str, timeout: float = 60) -> dict[str, Any]:
    return dict(wait_for(f"{name} Failed", lambda: status_of(api, name).get("phase") == "Failed"
                         and status_of(api, name), timeout))  # fmt: skip


def get_cluster(api: Any) -> dict[str, Any] | None:
    try:
        return dict(kubernetes.client.CustomObjectsApi(api).get_namespaced_custom_object(
            *ROOK, ROOK_NS, "cephclusters", "rook-ceph"))  # fmt: skip
    except ApiException as exc:
        assert exc.status == 404
        return None


def leases(api: Any) -> list[str]:
    """The holders of our Leases: a Rook cluster's is beside it, an external one's in the
    operator's namespace."""
    coord = kubernetes.client.CoordinationV1Api(api)
    return [held.spec.holder_identity for ns in (OP_NS, ROOK_NS)
            for held in coord.list_namespaced_lease(ns).items]  # fmt: skip


def ctx_for(name: str, uid: str, op: Any, status: dict[str, Any] | None = None) -> Any:
    """A tick's context for the run, as the operator makes it (its token's client)."""
    import logging

    from crimsonbench.controller.kube import Kube
    from crimsonbench.controller.record import RunRecord
    from crimsonbench.controller.run_context import RunContext
    from crimsonbench.controller.settings import RookTargetValue, Settings
    from crimsonbench.spec.models import validate_spec

    grants = [RookTargetValue(**t) for t in TARGETS["rook"]]
    settings = Settings(operator_namespace=OP_NS, rook_targets=grants)
    return RunContext(name, RUN_NS, uid, RunRecord.load(status or {}), Kube(op), settings,
                      logging.getLogger("t"), spec=validate_spec(spec()))  # fmt: skip


@contextlib.contextmanager
def placed_run(
    control_plane: ControlPlane, api: Any, name: str, stage: str, *, patched: bool = True,
    **status: Any,
) -> Iterator[str]:  # fmt: skip
    """A run as the operator leaves it at `stage`, past observe (placement, client nodes,
    its undo record of where it acts and what it will create, the lease held); with
    `patched`, the CephCluster patched for it by rook.patch_cluster under the operator's
    token (the undo record of the spec's values, the run's marks). Yields its uid; the run
    and what it left are removed afterwards."""
    from crimsonbench.controller import lease, rook
    from crimsonbench.controller.plans import plan_for
    from crimsonbench.errors import NotReady
    from crimsonbench.manifests.cephcluster import apply_merge_patch

    custom = kubernetes.client.CustomObjectsApi(api)
    body = {"apiVersion": f"{G}/{V}", "kind": "BenchmarkRun",
            "metadata": {"name": name, "namespace": RUN_NS}, "spec": spec()}  # fmt: skip
    uid = custom.create_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", body)[
        "metadata"]["uid"]  # fmt: skip
    record = status.pop("record", {})
    placed = {"phase": "Running" if stage == "steps" else "Preparing", "stage": stage,
              "startedAt": "2026-12-01T10:00:00Z", "clientNodes": [NODE],
              "osdPlacement": {"0": NODE}, "optionFamily": "none", "stepsTotal": 1,
              "progress": "0/1", **status}  # fmt: skip
    token = control_plane.service_account_token(OP_NS, "crimsonbench-operator", create=False)
    try:
        with control_plane.api_client(token) as op:
            ctx = ctx_for(name, uid, op, placed)
            lease.record_target(ctx)  # where it acts, as its first tick records it
            assert lease.take(ctx) == ctx.holder  # the run holds the cluster
            plan = plan_for(ctx)
            undo = ctx.record.book.undo  # what observe records the run will create
            undo.pool, undo.user, undo.images = (
                plan.pool.name,
                plan.pool.user,
                list(plan.pool.images),
            )
            undo.pool_object, undo.client_object = plan.pool.name, plan.pool.user
            if patched:
                with contextlib.suppress(NotReady):  # the undo record of the spec first
                    rook.patch_cluster(ctx, plan)
                rook.patch_cluster(ctx, plan)  # then the patch
            placed = apply_merge_patch(placed, ctx.record.status_patch())
            placed["record"] = apply_merge_patch(placed.get("record") or {}, record)
        custom.patch_namespaced_custom_object_status(G, V, RUN_NS, "benchmarkruns", name,
                                                     {"status": placed})  # fmt: skip
        yield uid
    finally:
        _remove(api, name, uid)


def _remove(api: Any, name: str, uid: str) -> None:
    """The run gone (its finalizer dropped: no operator serves it now) and what it left."""
    from crimsonbench.controller.decisions.restore_steps import PATCHED_BY, UNDO_DIGEST
    from crimsonbench.manifests.naming import child_name

    custom = kubernetes.client.CustomObjectsApi(api)
    with contextlib.suppress(ApiException):
        custom.patch_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", name,
                                              {"metadata": {"finalizers": None}})  # fmt: skip
        custom.delete_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", name)
    with contextlib.suppress(ApiException):
        custom.patch_namespaced_custom_object(*ROOK, ROOK_NS, "cephclusters", "rook-ceph", {
            "metadata": {"annotations": {PATCHED_BY: None, UNDO_DIGEST: None}}})  # fmt: skip
    coord = kubernetes.client.CoordinationV1Api(api)
    for ns in (OP_NS, ROOK_NS):
        for held in coord.list_namespaced_lease(ns).items:
            if (held.spec.holder_identity or "").endswith(f"/{uid}"):
                coord.delete_namespaced_lease(held.metadata.name, ns)
    batch = kubernetes.client.BatchV1Api(api)
    selector = f"{G}/run={child_name(name, uid)}"
    for ns in (ROOK_NS, OP_NS):
        batch.delete_collection_namespaced_job(ns, label_selector=selector,
                                               propagation_policy="Background")  # fmt: skip
    for plural in ("cephblockpools", "cephclients"):
        for obj in custom.list_namespaced_custom_object(*ROOK, ROOK_NS, plural)["items"]:
            with contextlib.suppress(ApiException):
                custom.delete_namespaced_custom_object(*ROOK, ROOK_NS, plural,
                                                       obj["metadata"]["name"])  # fmt: skip


def test_an_error_that_never_stops_fails_the_run_and_restores_the_cluster(
    control_plane: ControlPlane, api: Any, cluster: dict[str, Any],
    operator: Callable[..., KopfRunner],
) -> None:  # fmt: skip
    """A quota forbids Jobs in Rook's namespace: every tick of a run in its steps is refused
    (403) creating its fio server. Past errorTimeoutSeconds the run fails, the error in its
    Succeeded condition, after the restore put the CephCluster back and let the lease go.
    (Before: retried for ever, the cluster patched.)"""
    core = kubernetes.client.CoreV1Api(api)
    quota = {"metadata": {"name": "no-jobs"}, "spec": {"hard": {"count/jobs.batch": "0"}}}
    core.create_namespaced_resource_quota(ROOK_NS, quota)
    try:
        with placed_run(control_plane, api, "quota", "steps"):
            assert get_cluster(api)["spec"] != cluster["spec"]  # patched for the run
            with operator():
                st = failed(api, "quota")
            cond = conditions(st)
            assert cond["Succeeded"]["reason"] == "ErrorTimeout", cond["Succeeded"]
            assert "exceeded quota" in cond["Succeeded"]["message"]
            assert "errorTimeoutSeconds" in cond["Succeeded"]["message"]
            assert "at stage steps" in cond["Succeeded"]["message"]
            assert cond["Stalled"]["status"] == "False" and cond["Stalled"]["reason"] == "RunFailed"
            assert cond["ClusterRestored"]["status"] == "True", cond["ClusterRestored"]
            got = get_cluster(api)
            assert got["spec"] == cluster["spec"]  # put back exactly
            assert not {k for k in got["metadata"].get("annotations") or {} if G in k}
            assert leases(api) == []
    finally:
        core.delete_namespaced_resource_quota("no-jobs", ROOK_NS)


def test_a_cephclient_rook_never_makes_ready_fails_the_run_in_time(
    control_plane: ControlPlane, api: Any, cluster: dict[str, Any],
    operator: Callable[..., KopfRunner],
) -> None:  # fmt: skip
    """Rook never makes the run's CephClient Ready. The wait is bounded like the pool's
    (rolloutTimeoutSeconds; the record says it began long ago): the run fails naming it,
    its pool and CephClient removed, the cluster restored."""
    custom = kubernetes.client.CustomObjectsApi(api)
    long_ago = {"waits": {"client": time.time() - 100_000}}
    with placed_run(control_plane, api, "noclient", "prepare", record=long_ago):
        with operator():
            # Rook's part: the pool is made Ready (its CephClient never is)
            pool = wait_for("the run's pool", lambda: custom.list_namespaced_custom_object(
                *ROOK, ROOK_NS, "cephblockpools")["items"])[0]  # fmt: skip
            custom.patch_namespaced_custom_object_status(
                *ROOK, ROOK_NS, "cephblockpools", pool["metadata"]["name"],
                {"status": {"phase": "Ready"}})  # fmt: skip
            st = failed(api, "noclient")
            left = {p: custom.list_namespaced_custom_object(*ROOK, ROOK_NS, p)["items"]
                    for p in ("cephclients", "cephblockpools")}  # fmt: skip
        assert "cephx user client." in st["message"] and "rolloutTimeoutSeconds" in st["message"]
        assert conditions(st)["Succeeded"]["reason"] == "StepFailed"
        assert left == {"cephclients": [], "cephblockpools": []}
        assert get_cluster(api)["spec"] == cluster["spec"]
        assert leases(api) == []


def test_a_cephcluster_deleted_mid_run_or_never_there_fails_the_run_in_time(
    control_plane: ControlPlane, api: Any, cluster: dict[str, Any],
    operator: Callable[..., KopfRunner],
) -> None:  # fmt: skip
    """The CephCluster is deleted while the run waits for its rollout: once it has been
    missing errorTimeoutSeconds the run fails naming it (before: waited for ever, the lease
    held), through its restore (nothing is left to put back), the lease released. A run
    naming a CephCluster that never exists fails too, its wait (rolloutTimeoutSeconds, begun
    long ago here) bounded before it holds anything."""
    custom = kubernetes.client.CustomObjectsApi(api)
    with placed_run(control_plane, api, "gone", "rollout") as uid:
        custom.delete_namespaced_custom_object(*ROOK, ROOK_NS, "cephclusters", "rook-ceph")
        body = {"apiVersion": f"{G}/{V}", "kind": "BenchmarkRun",
                "metadata": {"name": "never", "namespace": RUN_NS}, "spec": spec()}  # fmt: skip
        body["spec"]["target"]["rook"]["clusterName"] = "nothere"
        never_uid = custom.create_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", body)[
            "metadata"]["uid"]  # fmt: skip
        long_ago = {"record": {"waits": {"target": time.time() - 100_000}}}
        custom.patch_namespaced_custom_object_status(G, V, RUN_NS, "benchmarkruns", "never",
                                                     {"status": long_ago})  # fmt: skip
        try:
            with operator():
                gone, never = failed(api, "gone"), failed(api, "never")
        finally:
            _remove(api, "never", never_uid)
        cond = conditions(gone)["Succeeded"]
        assert cond["reason"] == "TargetMissing", cond
        assert "CephCluster rook-ends/rook-ceph not found" in cond["message"], cond
        assert "errorTimeoutSeconds" in cond["message"]
        assert "ClusterRestored" in conditions(gone)  # failed through its restore
        assert "CephCluster rook-ends/nothere not found for" in never["message"], never
        assert never["stage"] == "done" and not never.get("patchedGeneration")
        assert [h for h in leases(api) if h.endswith((uid, never_uid))] == []


def test_a_restore_that_cannot_finish_ends_the_run_naming_what_is_left(
    control_plane: ControlPlane, api: Any, cluster: dict[str, Any],
    operator: Callable[..., KopfRunner],
) -> None:  # fmt: skip
    """A run failed and restoring: its images' removal Job never runs (no kubelet here, as
    with a node gone). Past restoreTimeoutSeconds the run ends Failed, its ClusterRestored
    condition naming what to do by hand, and the lease is released (before: retried for
    ever, the lease held). The CephCluster keeps the run's marks, so the next run on it is
    refused until someone finishes."""
    from crimsonbench.controller import rook
    from crimsonbench.controller.decisions.restore_steps import PATCHED_BY
    from crimsonbench.errors import ExecutionError

    with placed_run(control_plane, api, "stuckrestore", "restore", imagesCreated=True,
                    failure="step 1/1 failed: fio exited 1") as uid:  # fmt: skip
        with operator(RESTORE_TIMEOUT_SECONDS="3"):
            st = failed(api, "stuckrestore")
        cond = conditions(st)["ClusterRestored"]
        assert cond["status"] == "False" and cond["reason"] == "RestoreTimeout", cond
        message = cond["message"]
        assert "restoreTimeoutSeconds (3 s" in message and "removing 2 RBD images" in message
        assert "remove the run's RBD images" in message and "CephBlockPool rook-ends/" in message
        assert "put back spec.resources.osd" in message and PATCHED_BY in message
        assert st["message"].startswith("step 1/1 failed: fio exited 1; the restore did not")
        assert leases(api) == []
        assert get_cluster(api)["metadata"]["annotations"][PATCHED_BY].endswith(uid)
        token = control_plane.service_account_token(OP_NS, "crimsonbench-operator", create=False)
        refused = pytest.raises(ExecutionError, match="carries the patch of BenchmarkRun")
        with control_plane.api_client(token) as op, refused:
            rook.check_not_patched(ctx_for("next", "uid-next", op))


def test_a_deleted_run_whose_cleanup_cannot_finish_lets_go_in_time(
    control_plane: ControlPlane, api: Any, cluster: dict[str, Any],
    operator: Callable[..., KopfRunner],
) -> None:  # fmt: skip
    """The same restore reached through a delete (kubectl delete mid-run): the finalizer
    waited up to kopf's 2 h before (the lease held all along); past restoreTimeoutSeconds
    the run goes, the lease is released, and the CephCluster keeps the run's marks."""
    from crimsonbench.controller.decisions.restore_steps import PATCHED_BY

    custom = kubernetes.client.CustomObjectsApi(api)
    with placed_run(control_plane, api, "stuckdelete", "steps", imagesCreated=True) as uid:
        with operator(RESTORE_TIMEOUT_SECONDS="3"):
            wait_for("the operator's finalizer", lambda: custom.get_namespaced_custom_object(
                G, V, RUN_NS, "benchmarkruns", "stuckdelete",
            )["metadata"].get("finalizers"))  # fmt: skip
            custom.delete_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", "stuckdelete")

            def gone() -> bool:
                try:
                    custom.get_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns",
                                                        "stuckdelete")  # fmt: skip
                except ApiException as exc:
                    return exc.status == 404
                return False

            wait_for("the deleted run gone", gone, 120)
        assert leases(api) == []
        assert get_cluster(api)["metadata"]["annotations"][PATCHED_BY].endswith(uid)


# ---------------------------------------------------------------- results


def _big_step(clients: int, seconds: int = 0) -> Any:
    """A step of `clients` fio clients, each a row of real fio figures, and the IOPS of each
    of its `seconds`. The widest a spec admits: 1,024 client nodes, 86,400 s (~1.4 MB of
    JSON, over the API server's 1 MiB per ConfigMap)."""
    from crimsonbench.results.fio_json import combine, parse_fio_json
    from crimsonbench.results.types import ResourceSummary, StepResult

    fio = combine(parse_fio_json((ROOT / "tests/fixtures/fio/rbd/randread4k.json").read_text()))
    rows = {f"client-node-{i:04d}.rack-{i % 7}.example": replace(fio, iops=fio.iops + i)
            for i in range(clients)}  # fmt: skip
    usage = ResourceSummary(50.0, 700.0, 20.0, 9)
    per_second = [round(fio.iops + s % 97, 1) for s in range(seconds)]
    return StepResult("randread4k-qd001-r1", "randread4k", 1, 1, fio, usage,
                      {"wall_seconds": 12.0, "iops_per_second": per_second}, rows)  # fmt: skip


def test_a_step_result_over_the_configmap_limit_is_stored_and_read_back(
    control_plane: ControlPlane, api: Any, cluster: dict[str, Any]
) -> None:
    """A day-long step of 1,024 clients (~1.4 MB of JSON, over the API server's 1 MiB per
    ConfigMap): stored (in parts), read back whole by the operator and by `crimsonbench
    fetch`. (Before: a ValueError every tick, for ever.)"""
    from crimsonbench.controller.fetch import fetch_run
    from crimsonbench.controller.plans import plan_for
    from crimsonbench.controller.stored_results import load_results, store_results

    big = _big_step(1024, 86_400)
    assert len(json.dumps(big.to_json_dict())) > 1_100_000
    with placed_run(control_plane, api, "big", "steps", patched=False) as uid:
        token = control_plane.service_account_token(OP_NS, "crimsonbench-operator", create=False)
        with control_plane.api_client(token) as op:
            ctx = ctx_for("big", uid, op, {"clientNodes": [NODE], "osdPlacement": {"0": NODE}})
            store_results(ctx, plan_for(ctx), {big.key: big})
            assert ctx.record.status.steps_done == 1
            assert ctx.record.status.steps[0].clients == 1024
            # a restarted operator reads it back from the API (its own memory is empty)
            again = ctx_for("big", uid, op)
            (back,) = load_results(again).values()
        assert back.to_json_dict()["fio"] == big.to_json_dict()["fio"]  # NaN: compared as JSON
        assert back.key == big.key and back.clients == {}  # kept slim in memory
        fetched = fetch_run(api, RUN_NS, "big")
        assert [r.to_json_dict() for r in fetched.results] == [big.to_json_dict()]
        assert fetched.unreadable == ()
        core = kubernetes.client.CoreV1Api(api)
        cms = core.list_namespaced_config_map(RUN_NS, label_selector=f"{G}/run=big").items
        assert len(cms) >= 2  # in parts
        assert all(c.metadata.owner_references[0].uid == uid for c in cms)  # go with the run


def test_results_over_several_pages_are_read_whole_through_the_apis_continue(
    control_plane: ControlPlane, api: Any, cluster: dict[str, Any], monkeypatch: Any
) -> None:
    """A run of 230 stored steps: a restarted operator reads them in three pages of the
    API's own limit/continue (decisions/stored_steps.PAGE), each step once, all of them."""
    from crimsonbench.controller.decisions.stored_steps import PAGE
    from crimsonbench.controller.plans import plan_for
    from crimsonbench.controller.stored_results import load_results, store_results

    steps = [replace(_big_step(1, 10), step_id=f"randread4k-qd{i:03d}-r1", iodepth=i)
             for i in range(1, 2 * PAGE + 31)]  # fmt: skip
    with placed_run(control_plane, api, "paged", "steps", patched=False) as uid:
        token = control_plane.service_account_token(OP_NS, "crimsonbench-operator", create=False)
        with control_plane.api_client(token) as op:
            ctx = ctx_for("paged", uid, op, {"clientNodes": [NODE], "osdPlacement": {"0": NODE}})
            store_results(ctx, plan_for(ctx), {s.key: s for s in steps})
            assert set(load_results(ctx)) == {s.key for s in steps}  # kept as written
            again = ctx_for("paged", uid, op)  # a restarted operator: nothing in memory
            real_page, tokens = again.kube.configmap_page, []

            def noted(*args: Any) -> Any:  # the real call; its continue token noted
                tokens.append(args[-1])
                return real_page(*args)

            monkeypatch.setattr(again.kube, "configmap_page", noted)
            back = load_results(again)
        assert set(back) == {s.key for s in steps}
        assert len(tokens) == 3 and tokens[0] is None and all(tokens[1:]), tokens


def test_a_half_written_set_of_result_configmaps_is_read_for_what_it_holds(
    control_plane: ControlPlane, api: Any, cluster: dict[str, Any]
) -> None:
    """An operator died while writing results: a step whose parts were written but not its
    head, and a head whose part is gone, beside a whole one. The operator and `crimsonbench
    fetch` read every whole step (the others run again; fetch names them). (Before:
    ValueError every tick, for ever.)"""
    from crimsonbench.controller.fetch import fetch_run
    from crimsonbench.controller.stored_results import load_results
    from crimsonbench.results.types import ResourceSummary, StepResult

    def step(i: int, clients: int = 0, seconds: int = 0) -> StepResult:
        base = _big_step(clients, seconds)
        return replace(base, step_id=f"randread4k-qd{i:03d}-r1", iodepth=i,
                       resources=ResourceSummary(1.0 * i, 700.0, 20.0, 9))  # fmt: skip

    core = kubernetes.client.CoreV1Api(api)
    with placed_run(control_plane, api, "half", "steps", patched=False) as uid:
        written = _half_written(core, uid, step)
        token = control_plane.service_account_token(OP_NS, "crimsonbench-operator", create=False)
        with control_plane.api_client(token) as op:
            found = load_results(ctx_for("half", uid, op))  # read afresh, as after a restart
        assert set(found) == {written}, sorted(found)
        fetched = fetch_run(api, RUN_NS, "half")
        assert {r.key for r in fetched.results} == {written}
        assert len(fetched.unreadable) == 1, fetched.unreadable
        assert "its part" in fetched.unreadable[0]  # the head whose part is gone
        assert "left half-written, not fetched" in fetched.note


def _half_written(core: Any, uid: str, step: Callable[..., Any]) -> str:
    """One whole step (its key returned), one whose head was never written (its parts
    only), one whose part went missing after its head."""
    from crimsonbench.manifests.results import step_configmaps

    owner = [{"apiVersion": f"{G}/{V}", "kind": "BenchmarkRun", "name": "half", "uid": uid}]
    whole, headless, partless = step(20, 3), step(21, 1024, 86_400), step(22, 1024, 86_400)
    made = [*step_configmaps("half", whole, namespace=RUN_NS),
            *step_configmaps("half", headless, namespace=RUN_NS)[:-1]]  # fmt: skip
    partial = step_configmaps("half", partless, namespace=RUN_NS)
    assert len(partial) >= 2
    made += partial[1:]  # its first part never written (or lost)
    for cm in made:
        cm["metadata"]["ownerReferences"] = owner
        core.create_namespaced_config_map(RUN_NS, cm)
    return str(whole.key)


def test_suspect_steps_show_in_the_status_its_condition_and_kubectl_get(
    control_plane: ControlPlane, api: Any, cluster: dict[str, Any]
) -> None:
    """Issue 37: a step judged suspect (a fault during it) beside a valid one, stored by the
    operator's code under its token: status.suspectSteps, each step's verdict and reason
    codes, a StepsSuspect condition naming the step, and the API server's own table (what
    `kubectl get br` prints) with the Suspect column."""
    from crimsonbench.controller.plans import plan_for
    from crimsonbench.controller.stored_results import store_results
    from crimsonbench.manifests.cephcluster import apply_merge_patch
    from crimsonbench.results.validity import judged
    from crimsonbench.spec.sweep import ValiditySpec

    ok = judged(_big_step(1, 10), {}, ValiditySpec())
    bad = judged(replace(_big_step(1, 10), step_id="randread4k-qd004-r1", iodepth=4), {},
                 ValiditySpec(), faults=("health check OSD_DOWN: 1 osds down",))  # fmt: skip
    with placed_run(control_plane, api, "judged", "steps", patched=False) as uid:
        token = control_plane.service_account_token(OP_NS, "crimsonbench-operator", create=False)
        with control_plane.api_client(token) as op:
            ctx = ctx_for("judged", uid, op, {"clientNodes": [NODE], "osdPlacement": {"0": NODE}})
            store_results(ctx, plan_for(ctx), {ok.key: ok, bad.key: bad})
            status = ctx.record.status
            assert status.suspect_steps == 1
            assert [(s.id, s.verdict, s.suspect_reasons) for s in status.steps] == [
                ("randread4k-qd001-r1", "valid", ""),
                ("randread4k-qd004-r1", "suspect", "fault"),
            ]
            cond = ctx.record.conditions()["StepsSuspect"]
            assert cond.status == "True" and "randread4k-qd004-r1 (fault)" in cond.message
            custom = kubernetes.client.CustomObjectsApi(op)
            now = status_of(api, "judged")
            patched = apply_merge_patch(now, ctx.record.status_patch())
            custom.patch_namespaced_custom_object_status(G, V, RUN_NS, "benchmarkruns", "judged",
                                                         {"status": patched})  # fmt: skip
        path = f"/apis/{G}/{V}/namespaces/{RUN_NS}/benchmarkruns/judged"
        headers = {"Accept": "application/json;as=Table;g=meta.k8s.io;v=v1"}
        api.update_params_for_auth(headers, [], ["BearerToken"], path, "GET", None)
        got = api.call_api("GET", api.configuration.host + path, header_params=headers)
        table = json.loads(got.read())
        names = [c["name"] for c in table["columnDefinitions"]]
        (row,) = table["rows"]
        assert row["cells"][names.index("Suspect")] == 1, (names, row["cells"])


def test_a_results_configmap_of_the_same_name_that_is_not_the_runs_is_left_alone(
    control_plane: ControlPlane, api: Any, cluster: dict[str, Any]
) -> None:
    """A ConfigMap already named as the run's step result (a user's, another run's): the
    operator refuses to overwrite it, naming it. (Before: replaced, whoever it was.)"""
    from crimsonbench.controller.plans import plan_for
    from crimsonbench.controller.stored_results import store_results
    from crimsonbench.errors import ExecutionError
    from crimsonbench.manifests.results import step_configmaps

    step = _big_step(1, 10)
    core = kubernetes.client.CoreV1Api(api)
    with placed_run(control_plane, api, "squat", "steps", patched=False) as uid:
        (name,) = [c["metadata"]["name"] for c in step_configmaps("squat", step, namespace=RUN_NS)]
        theirs = {"metadata": {"name": name, "namespace": RUN_NS}, "data": {"mine": "yes"}}
        core.create_namespaced_config_map(RUN_NS, theirs)
        try:
            token = control_plane.service_account_token(OP_NS, "crimsonbench-operator",
                                                        create=False)  # fmt: skip
            with control_plane.api_client(token) as op:
                ctx = ctx_for(
                    "squat", uid, op, {"clientNodes": [NODE], "osdPlacement": {"0": NODE}}
                )
                with pytest.raises(ExecutionError, match=f"ConfigMap {RUN_NS}/{name} exists"):
                    store_results(ctx, plan_for(ctx), {step.key: step})
            assert core.read_namespaced_config_map(name, RUN_NS).data == {"mine": "yes"}
        finally:
            core.delete_namespaced_config_map(name, RUN_NS)
