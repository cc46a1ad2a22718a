"""Our operator, installed from our chart, against the live Rook cluster of tests/rook.

A classic bluestore BenchmarkRun with target.rook (2 workloads x 2 iodepths, 3 s + 1 s):
- the operator patches the CephCluster and Rook rolls every OSD Deployment; the OSD pods
  run with the planned resources and `ceph config get osd.N` shows the run's options;
- fio runs as the run's own CephClient (one pinned fio server; every step's fio client in
  the run's one driver pod, by exec: no pod per step)
  against the run's pool; that user cannot read or write another pool (its key from
  Rook's Secret); results land in status and the results ConfigMaps; `crimsonbench
  fetch` -> `report` works;
- restore: the CephCluster spec is the recorded original byte for byte, Rook rolls the
  OSDs back, `ceph config dump` is as before, the pool, images, cephx user and CephClient
  are gone, and no Job, pod or ConfigMap of the run is left but the results it keeps.
Faults: our operator killed mid-sweep (no step lost or repeated); an OSD pod deleted
mid-step (the step runs again with the reason in status, the cluster is restored);
deleting a run mid-sweep restores; Rook's operator restarted mid-run. A crimson spec on
this classic cluster fails at preflight, touching nothing.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fio_processes import expected_runs
from harness.builds import environmental
from harness.images import ImagesUnavailable
from harness.operator_install import RUN_NS, OperatorOnNode
from harness.waiting import pod_ready
from rook_runs import KEYS, LABEL_ROLE, LABEL_RUN, PLANNED, PodWatch, RookBench, run_body
from typer.testing import CliRunner

from crimsonbench.cli import app
from crimsonbench.manifests.fio import server_job_name
from crimsonbench.manifests.fio_driver import driver_job_name
from crimsonbench.manifests.results import read_results_configmaps

pytestmark = pytest.mark.rook
OTHER_POOL = "cb-other"  # a pool the run's cephx user must not reach


@pytest.fixture(scope="module")
def bench(shared_rook: Any) -> Iterator[RookBench]:  # conftest.SharedRook
    stack = shared_rook.get()
    op = OperatorOnNode(stack.site.cp, stack.site.node)
    try:
        op.start()
    except ImagesUnavailable as exc:
        if not environmental(exc):
            raise  # our Dockerfile or build script is broken: a failure
        print(f"\ntests/rook operator tests skipped: {exc}", file=sys.stderr)
        pytest.skip(str(exc))
    b = RookBench(stack.rook, stack.site, op, stack.timings)
    b.timings.update({f"operator_{k}": v for k, v in op.timings.items()})
    stack.rook.create_block_pool(OTHER_POOL, size=1)
    stack.rook.ceph("osd", "pool", "application", "get", OTHER_POOL)
    admin_put(b, OTHER_POOL, "secret-object")
    yield b
    problems = op.stop()
    stack.rook._delete("cephblockpools", OTHER_POOL)
    stack.rook.wait_ready(900)
    assert not problems, problems


def admin_put(b: RookBench, pool: str, obj: str) -> None:
    """An object written as client.admin (the ceph.conf the harness wrote)."""
    src = b.site.dir / "object.txt"
    src.write_text("the admin's data\n")
    subprocess.run(
        ["rados", "--conf", str(b.site.dir / "ceph.conf"), "-p", pool, "put", obj, str(src)],
        check=True,
        timeout=120,
    )


def test_crimson_spec_fails_at_preflight_touching_nothing(bench: RookBench) -> None:
    name, pool = "crimson-on-classic", "bench-crimson"
    before = bench.snapshot()
    # seastore: no BlueStore alien threads, so the CPU layout (checked before preflight)
    # fits this node and the refusal is preflight's, from the OSDs' metadata
    body = run_body(
        name,
        pool,
        osd={
            "flavor": "crimson",
            "objectStore": "seastore",
            "count": 1,
            "reactors": 1,
            "cpuSet": "0",
        },
    )
    body["spec"]["target"]["rook"]["allowReprovision"] = True  # it would be allowed to
    bench.create(body)
    st = bench.wait_finished(name, timeout=600)
    assert st["phase"] == "Failed", st
    cond = bench.conditions(name)["Succeeded"]
    assert cond["status"] == "False" and cond["reason"] == "InvalidSpec", cond
    for words in ("osd.0", "classic ceph-osd", "ceph osd metadata", "crimson"):
        assert words in st["message"] and words in cond["message"], st["message"]
    # nothing touched: the CephCluster (generation and spec), pools, OSDs, config
    assert bench.rook.cluster()["metadata"]["generation"] == before["cluster_generation"]
    assert bench.snapshot() == before
    assert "ClusterPatched" not in bench.conditions(name)
    bench.delete(name)
    bench.wait("run deleted", lambda: bench.run(name) is None, 300, name)
    assert bench.run_objects(name) == {}


def test_classic_run_on_live_rook(bench: RookBench, tmp_path: Path) -> None:
    name, pool = "rook-classic", "bench-rook"
    before = bench.snapshot()
    first_operator = bench.op.wait_operator_ready(60).metadata.name
    t0 = time.monotonic()
    with PodWatch(bench, name) as watch:
        bench.create(run_body(name, pool))
        bench.wait(
            "rolled out",
            lambda: bench.conditions(name).get("RolledOut", {}).get("status") == "True",
            1200,
            name,
        )
        bench.timings["apply_to_osds_rolled_s"] = time.monotonic() - t0
        _check_rolled_out(bench, before)
        bench.wait("fio user made", lambda: bench.status(name).get("stage") == "steps", 600, name)
        _check_cephx_user_is_pool_limited(bench, f"{name}-fio", pool)
        # kill our operator mid-sweep: after the first step is stored
        bench.wait("a step done", lambda: bench.status(name).get("stepsDone", 0) >= 1, 600, name)
        bench.op.core.delete_namespaced_pod(
            first_operator, bench.op.namespace, grace_period_seconds=0
        )
        killed_at = bench.status(name)["stepsDone"]
        t_steps = time.monotonic()
        st = bench.wait_finished(name)
    bench.timings["run_s"] = time.monotonic() - t0
    assert st["phase"] == "Completed", st.get("message")
    assert 1 <= killed_at < 4, killed_at
    assert st["stepsDone"] == st["stepsTotal"] == 4
    bench.timings["after_kill_to_completed_s"] = time.monotonic() - t_steps
    new = bench.op.wait_operator_ready(60).metadata.name
    assert new != first_operator

    # no step lost or repeated across the restart: every step's fio client ran once (seen
    # on this host), in the one driver pod, beside the one server; no other pod
    steps = [s["id"] for s in st["steps"]]
    assert len(set(steps)) == 4, steps
    # (an OSD restarted mid-step makes the step run again: recorded, and counted)
    ran, expected = watch.fio.runs_per_step(), expected_runs(bench.run(name) or {}, steps)
    assert ran == expected, (ran, bench.conditions(name).get("StepRetried"))
    assert len(watch.pods_by_job[server_job_name(name, "localhost")]) == 1, watch.pods_by_job
    assert len(watch.pods_by_job[driver_job_name(name)]) == 1, watch.pods_by_job
    fio_jobs = {j for j in watch.pods_by_job if j.startswith(f"{name}-fio")}
    assert fio_jobs == {server_job_name(name, "localhost"), driver_job_name(name)}, fio_jobs
    selector = f"{LABEL_RUN}={name},{LABEL_ROLE}=results"
    cms = bench.op.core.list_namespaced_config_map(RUN_NS, label_selector=selector).items
    results = read_results_configmaps([bench.op.api.sanitize_for_serialization(c) for c in cms])
    assert sorted(r.step_id for r in results) == sorted(steps)
    for r in results:
        assert r.fio.iops > 0 and r.fio.total_ios > 0 and r.fio.percentiles_exact, r.step_id
        assert list(r.clients) == ["localhost"]
    conds = bench.conditions(name)
    for kind in ("ClusterPatched", "RolledOut", "RolledBack", "ConfigRestored", "ClusterRestored"):
        assert conds[kind]["status"] == "True", conds[kind]

    _fetch_and_report(bench, name, tmp_path)
    bench.assert_restored(before, name, pool)
    bench.delete(name)
    bench.wait("run deleted", lambda: bench.run(name) is None, 600, name)
    assert bench.run_objects(name) == {}


def _check_rolled_out(bench: RookBench, before: dict[str, Any]) -> None:
    """Rook rolled every OSD Deployment to the planned resources; Ceph has the run's keys."""
    rook = bench.rook
    for osd_id, dep in rook.osd_deployments().items():
        assert dep["metadata"]["generation"] > before["deployments"][osd_id], osd_id
        c = next(c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "osd")
        assert c["resources"]["limits"] == PLANNED == c["resources"]["requests"], osd_id
    bench.wait("OSDs Ready", bench.osds_ready, 600)
    assert all(
        r == {"requests": PLANNED, "limits": PLANNED} for r in bench.osd_resources().values()
    ), bench.osd_resources()
    for osd_id in rook.osd_ids():
        for key, value in KEYS.items():
            assert bench.config_get(f"osd.{osd_id}", key) == value, (osd_id, key)
    assert all(pod_ready(p) for p in rook.osd_pods().values())


def _check_cephx_user_is_pool_limited(bench: RookBench, user: str, pool: str) -> None:
    key = bench.cephx_user_key(user)
    caps = bench.rook.ceph_json("auth", "get", f"client.{user}")[0]["caps"]
    assert caps == {"mon": "profile rbd", "osd": f"profile rbd pool={pool}"}, caps
    ok = bench.rados_as(user, key, "-p", pool, "ls")
    assert ok.returncode == 0, ok.stderr
    attempts = [
        ("-p", OTHER_POOL, "ls"),
        ("-p", OTHER_POOL, "get", "secret-object", "-"),
        ("-p", OTHER_POOL, "put", "intruder", str(bench.site.dir / "ceph.conf")),
    ]
    for args in attempts:
        denied = bench.rados_as(user, key, *args)
        assert denied.returncode != 0, (args, denied.stdout)
        assert "Operation not permitted" in denied.stderr, (args, denied.stderr)
    objects = bench.rook.ceph("osd", "pool", "stats", OTHER_POOL)
    assert OTHER_POOL in objects


def _fetch_and_report(bench: RookBench, name: str, tmp: Path) -> None:
    kubeconfig = bench.site.cp.kubeconfig(tmp / "kubeconfig")
    out = tmp / "fetched"
    runner = CliRunner()
    got = runner.invoke(
        app, ["fetch", f"{RUN_NS}/{name}", "--kubeconfig", str(kubeconfig), "--results", str(out)]
    )
    assert got.exit_code == 0, got.output
    rep = runner.invoke(app, ["report", str(out)])
    assert rep.exit_code == 0, rep.output
    summary = (out / "report" / "summary.md").read_text()
    assert "randread4k" in summary and "randwrite4k" in summary, summary


def test_osd_pod_deleted_mid_step_runs_the_step_again(bench: RookBench) -> None:
    """An OSD restarting mid-step: that step measured a cluster in recovery. Its result is
    dropped, the reason is in status, and it runs again once every OSD is back."""
    name, pool = "rook-osd-fault", "bench-osd-fault"
    before = bench.snapshot()
    sweep = {"iodepths": [1, 4], "runtimeSeconds": 8, "rampSeconds": 1}
    with PodWatch(bench, name) as watch:
        bench.create(run_body(name, pool, sweep=sweep))

        def step_running() -> str | None:
            steps = [k for k in watch.fio.running_steps if k != "prefill"]
            return steps[0] if steps else None

        step = bench.wait("a step's fio client running", step_running, 1200, name)
        time.sleep(2)  # fio is past its start
        victim = bench.rook.osd_pods()[0]
        bench.rook.core.delete_namespaced_pod(victim["metadata"]["name"], bench.rook.namespace)
        st = bench.wait_finished(name)
    assert st["phase"] == "Completed", st.get("message")
    retried = bench.conditions(name).get("StepRetried")
    assert retried is not None, bench.conditions(name)
    assert "osd.0 restarted during the step" in retried["message"], retried
    assert step in retried["message"], (step, retried["message"])
    reasons = bench.run(name)["status"]["record"]["stepRetries"]  # type: ignore[index]
    assert list(reasons) == [step] and "osd.0" in reasons[step][0], reasons
    # the disturbed step ran twice (its first result dropped), every other step once
    runs = watch.fio.runs_per_step()
    assert runs == {"prefill": 1, **{s["id"]: 1 + (s["id"] == step) for s in st["steps"]}}, runs
    assert st["stepsDone"] == 4 and len({s["id"] for s in st["steps"]}) == 4
    bench.assert_restored(before, name, pool)
    bench.delete(name)
    bench.wait("run deleted", lambda: bench.run(name) is None, 600, name)


def test_deleting_a_run_mid_sweep_restores_the_cluster(bench: RookBench) -> None:
    name, pool = "rook-deleted", "bench-deleted"
    before = bench.snapshot()
    bench.create(run_body(name, pool))
    bench.wait("a step done", lambda: bench.status(name).get("stepsDone", 0) >= 1, 1200, name)
    assert bench.status(name)["stepsDone"] < 4, "delete it mid-sweep, not after"
    t0 = time.monotonic()
    bench.delete(name)
    bench.wait("run deleted (cluster restored)", lambda: bench.run(name) is None, 1800)
    bench.timings["delete_mid_sweep_to_gone_s"] = time.monotonic() - t0
    bench.wait("the run's ConfigMaps collected", lambda: bench.run_objects(name) == {}, 120)
    bench.assert_restored(before, name, pool)


def test_rook_operator_restarted_mid_run(bench: RookBench, shared_rook: Any) -> None:
    """Rook's operator restarted while it rolls the OSDs out for the run: the new one
    finishes that reconcile (and the restore's), the run completes, the cluster is back."""
    if shared_rook.cni_missing:
        reason = (
            f"Rook's operator restart needs a pod network here ({shared_rook.cni_missing}): "
            "the restarted operator detects the Ceph version with a Job it creates "
            "before ROOK_ENFORCE_HOST_NETWORK is read, whose pod then never starts"
        )
        print(f"\n{reason}", file=sys.stderr)
        pytest.skip(reason)
    name, pool = "rook-restarted", "bench-restarted"
    before = bench.snapshot()
    bench.create(run_body(name, pool))
    bench.wait("CephCluster patched", lambda: "ClusterPatched" in bench.conditions(name), 600, name)
    old = [p["metadata"]["name"] for p in bench.rook.pods("app=rook-ceph-operator")]
    for pod in old:
        bench.rook.core.delete_namespaced_pod(pod, bench.rook.namespace)
    bench.wait(
        "a new Rook operator Ready",
        lambda: any(
            pod_ready(p) and p["metadata"]["name"] not in old
            for p in bench.rook.pods("app=rook-ceph-operator")
        ),
        600,
        name,
    )
    st = bench.wait_finished(name)
    assert st["phase"] == "Completed", st.get("message")
    assert st["stepsDone"] == 4
    bench.assert_restored(before, name, pool)
    bench.delete(name)
    bench.wait("run deleted", lambda: bench.run(name) is None, 600, name)
