"""Our operator against live Rook on kind (e2e/harness/kind_bench.py: one bluestore OSD on
each worker), when things go wrong, watched from outside:
- a crimson spec on classic OSDs is refused at preflight, touching nothing;
- an OSD pod deleted mid-step: that step is dropped, the reason is in status and in the
  verdict of the attempt kept, it runs again;
- a CPU hog on the fio client's planned CPU: the steps it ran beside are suspect;
- a run deleted mid-sweep: the cluster is restored and nothing of the run is left; its fio
  user is limited to its own pool (checked while it runs);
- Rook's operator restarted while it rolls the OSDs out: the run completes, restored.
Each test leaves the cluster as it found it (RunBench.assert_restored). The kind stack is
the one test_kind_rook_run.py uses next (tests/kind/conftest.py, OneStack).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from harness.kind_bench import CLIENT_CPUS, BenchStack, crimson_run_manifest, run_manifest
from harness.kind_rook import NAMESPACE as ROOK_NS
from harness.waiting import pod_ready
from rook_runs import LaggyPgWatch, PodWatch, RunBench, osd_resources_of, toolbox

pytestmark = pytest.mark.kind

# Runtime options the OSDs read from the mon (no restart), left alone by reef's mClock
# scheduler.
KEYS = {"osd_op_history_size": "40", "osd_op_log_threshold": "7"}
OTHER_POOL = "not-the-runs"  # a pool the run's fio user must not reach


@pytest.fixture(scope="module")
def module_pool(kind_rook: BenchStack) -> Iterator[str]:
    """OTHER_POOL with one object in it, for the whole module; removed at its end."""
    s = kind_rook
    s.rook.create_block_pool(OTHER_POOL, size=1)
    s.rook.ceph("osd", "pool", "application", "get", OTHER_POOL)  # Rook enabled rbd on it
    toolbox(s, "rados", "-p", OTHER_POOL, "put", "secret-object", "/etc/ceph/ceph.conf")
    yield OTHER_POOL
    s.rook.delete_block_pool(OTHER_POOL)  # gone before the next module's snapshot
    s.rook.wait_ready(900)


@pytest.fixture
def bench(kind_rook: BenchStack, module_pool: str) -> RunBench:
    return RunBench(kind_rook)


def body(b: RunBench, name: str, pool: str, **spec: Any) -> dict[str, Any]:
    """A classic run on both workers' OSDs, one fio client per worker: 2 workloads x 2
    iodepths, 3 s + 1 s ramp per step, the run's KEYS. spec: sections replaced whole."""
    manifest = run_manifest(name, sorted(b.s.kind.workers), pool, ceph_config=KEYS)
    manifest["spec"].update(spec)
    return manifest


def test_crimson_spec_fails_at_preflight_touching_nothing(bench: RunBench) -> None:
    name, pool = "crimson-on-classic", "bench-crimson"
    before = bench.snapshot()
    osd_node, client_node = sorted(bench.s.kind.workers)
    osd_id = next(i for i, n in before["osd_nodes"].items() if n == osd_node)
    manifest = crimson_run_manifest(name, osd_node, client_node, pool)
    # seastore: no BlueStore alien threads, so the CPU layout (checked before preflight)
    # fits the node and the refusal is preflight's, from the OSDs' metadata; and it would
    # be allowed to reprovision (crimson_run_manifest allows it)
    osd = manifest["spec"]["osd"]
    osd["objectStore"] = "seastore"
    del osd["alienCpuSet"], osd["alienThreads"]
    bench.create(manifest)
    st = bench.wait_finished(name, timeout=600)
    assert st["phase"] == "Failed", st
    cond = bench.conditions(name)["Succeeded"]
    assert cond["status"] == "False" and cond["reason"] == "InvalidSpec", cond
    for words in (f"osd.{osd_id}", "classic ceph-osd", "ceph osd metadata", "crimson"):
        assert words in st["message"] and words in cond["message"], st["message"]
    # nothing touched: the CephCluster (generation and spec), pools, OSDs, config
    assert bench.snapshot() == before
    assert "ClusterPatched" not in bench.conditions(name)
    bench.delete_and_wait(name, 300)
    assert bench.run_objects(name) == {}


def test_osd_pod_deleted_mid_step_runs_the_step_again(bench: RunBench) -> None:
    """An OSD restarting mid-step: that step measured a cluster in recovery. Its result is
    dropped, the reason is in status, and it runs again once every OSD is back."""
    name, pool = "osd-fault", "bench-osd-fault"
    before = bench.snapshot()
    sweep = {"iodepths": [1, 4], "runtimeSeconds": 8, "rampSeconds": 1}
    with PodWatch(bench, name) as watch, LaggyPgWatch(bench) as wedge:
        bench.create(body(bench, name, pool, sweep=sweep))

        def step_running() -> str | None:
            steps = [k for k in watch.fio.running_steps if k != "prefill"]
            return steps[0] if steps else None

        step = bench.wait("a step's fio client running", step_running, 1200, name)
        # Rook rolled every OSD to the planned resources (Guaranteed: one whole CPU each)
        for osd_id, dep in bench.rook.osd_deployments().items():
            res = osd_resources_of(dep["spec"]["template"]["spec"])
            assert res["limits"] == res["requests"], (osd_id, res)
            assert res["limits"].get("cpu") == "1", (osd_id, res)
        time.sleep(2)  # fio is past its start
        victim = bench.rook.osd_pods()[0]
        bench.core.delete_namespaced_pod(victim["metadata"]["name"], ROOK_NS)
        st = bench.wait_finished(name)
    assert st["phase"] == "Completed", st.get("message")
    retried = bench.conditions(name).get("StepRetried")
    assert retried is not None, bench.conditions(name)
    assert step in retried["message"], (step, retried["message"])
    reasons = bench.status(name)["record"]["stepRetries"]
    # Ceph's laggy-PG wedge cleared by one more OSD restart: that step ran once more when
    # the restart fell during an attempt, not when it fell while the step waited for the
    # OSDs to settle (cold run of 118cc00: 1 restart, no extra attempt)
    assert list(reasons) == [step], reasons
    extra = len(reasons[step]) - 1
    assert 0 <= extra <= len(wedge.restarted), (reasons, wedge.restarted)
    assert "osd.0 restarted during the step" in reasons[step][0], reasons
    # the disturbed step ran twice (its first result dropped), every other step once
    runs = watch.fio.runs_per_step()
    assert runs == {"prefill": 1, **{s["id"]: 1 + (s["id"] == step) * (1 + extra)
                                     for s in st["steps"]}}, runs  # fmt: skip
    assert st["stepsDone"] == 4 and len({s["id"] for s in st["steps"]}) == 4
    # the attempt kept says, in its verdict, that the ones before it were dropped, and why
    dropped = bench.stored_results(name)[step].extra["validity"]["attempts"]
    assert [d["verdict"] for d in dropped] == ["dropped"] * (1 + extra), dropped
    assert all([r["code"] for r in d["reasons"]] == ["fault"] for d in dropped), dropped
    assert "osd.0 restarted during the step" in dropped[0]["reasons"][0]["detail"], dropped
    conds = bench.conditions(name)
    for kind in ("ClusterPatched", "RolledOut", "RolledBack", "ConfigRestored", "ClusterRestored"):
        assert conds[kind]["status"] == "True", conds[kind]
    bench.assert_restored(before, name, pool, tuple(KEYS))
    bench.delete_and_wait(name)


def test_a_cpu_hog_on_the_fio_clients_cpu_makes_its_steps_suspect(bench: RunBench) -> None:
    """A process that is not the run's, pinned by taskset to the client's planned CPU (on
    the host: kind's nodes share its CPUs) from the end of the first step on: the steps it
    ran beside are suspect for interference, naming the client, its CPU and the share the
    hog took (the client node's CPU log, manifests/cpu-sampler.sh); the first step, before
    it, shows less (not none: kind's own processes share this machine's CPUs). With
    sweep.rerunSuspect the hogged step runs again (the hog stays: suspect again), the first
    attempt's figure and reasons kept in the one stored."""
    name, pool = "hogged", "bench-hogged"
    before = bench.snapshot()
    client = sorted(bench.s.kind.workers)[0]
    sweep = {"iodepths": [1, 4], "runtimeSeconds": 6, "rampSeconds": 1, "rerunSuspect": 1}
    manifest = body(bench, name, pool, sweep=sweep, workloads=[{"preset": "randread4k"}])
    manifest["spec"]["client"].update(nodes=[client], images=2)
    bench.create(manifest)
    bench.wait("the first step done", lambda: bench.status(name).get("stepsDone", 0) >= 1,
               1200, name)  # fmt: skip
    hog = subprocess.Popen(["taskset", "-c", CLIENT_CPUS, "sh", "-c", "while :; do :; done"])
    try:
        st = bench.wait_finished(name, timeout=900)
    finally:
        hog.kill()
        _, _, usage = os.wait4(hog.pid, 0)
    assert st["phase"] == "Completed", st.get("message")
    results = bench.stored_results(name)
    quiet, hogged = sorted(results.values(), key=lambda r: r.iodepth)
    share = {}
    for r in (quiet, hogged):
        loads = r.extra["validity"]["interference"] or []
        assert len(loads) == 1, (r.step_id, r.extra["validity"]["unjudged"])
        (load,) = loads
        assert load["name"] == f"client {client}" and load["cpus"] == [int(CLIENT_CPUS)], load
        share[r.iodepth] = load["others_pct"]
    print(f"\nothers' share of the client's CPU: {share} (the hog ran {usage.ru_utime:.1f} s)")
    v = hogged.extra["validity"]
    assert v["verdict"] == "suspect", v
    (reason,) = [r for r in v["reasons"] if r["code"] == "interference"]
    assert f"client {client} (CPU {CLIENT_CPUS})" in reason["detail"], reason
    # the first step is no clean zero here: kind's own node processes share this 2-CPU
    # machine's CPUs (35-64 % of the client's CPU in quiet steps); the hog adds to that
    assert share[4] >= 25 and share[4] > share[1], share
    # sweep.rerunSuspect: 1: it ran again beside the hog, and the first attempt is recorded
    (earlier,) = v["attempts"]
    assert earlier["verdict"] == "suspect" and earlier["iops"] > 0, earlier
    assert "interference" in {r["code"] for r in earlier["reasons"]}, earlier
    retried = bench.conditions(name)["StepRetried"]
    assert retried["reason"] == "Suspect" and "sweep.rerunSuspect" in retried["message"]
    # what kubectl get br and the steps in status say
    summary = {s["id"]: s for s in st["steps"]}[hogged.step_id]
    assert summary["verdict"] == "suspect" and "interference" in summary["suspectReasons"]
    assert st["suspectSteps"] >= 1, st
    bench.assert_restored(before, name, pool, tuple(KEYS))
    bench.delete_and_wait(name)


def test_deleting_a_run_mid_sweep_restores_the_cluster(bench: RunBench) -> None:
    name, pool = "deleted", "bench-deleted"
    before = bench.snapshot()
    sweep = {"iodepths": [1, 4], "runtimeSeconds": 10, "rampSeconds": 1}
    bench.create(body(bench, name, pool, sweep=sweep))
    bench.wait("its fio user made", lambda: bench.status(name).get("stage") == "steps", 1200,
               name)  # fmt: skip
    _check_cephx_user_is_pool_limited(bench, f"{bench.child(name)}-fio", bench.pool_of(name, pool))
    bench.wait("a step done", lambda: bench.status(name).get("stepsDone", 0) >= 1, 600, name)
    assert bench.status(name)["stepsDone"] < 4, "delete it mid-sweep, not after"
    t0 = time.monotonic()
    bench.delete_and_wait(name, 1800)  # the cluster restored first
    bench.s.timings["delete_mid_sweep_to_gone_s"] = time.monotonic() - t0
    bench.wait("the run's objects collected", lambda: bench.run_objects(name) == {}, 120)
    bench.assert_restored(before, name, pool, tuple(KEYS))


def _check_cephx_user_is_pool_limited(bench: RunBench, user: str, pool: str) -> None:
    key = bench.cephx_user_key(user)
    caps = bench.rook.ceph_json("auth", "get", f"client.{user}")[0]["caps"]
    assert caps == {"mon": "profile rbd", "osd": f"profile rbd pool={pool}"}, caps
    ok = bench.rados_as(user, key, "-p", pool, "ls")
    assert ok.returncode == 0, ok.stderr
    for args in (("-p", OTHER_POOL, "ls"), ("-p", OTHER_POOL, "get", "secret-object", "-"),
                 ("-p", OTHER_POOL, "put", "intruder", "/etc/ceph/ceph.conf")):  # fmt: skip
        denied = bench.rados_as(user, key, *args)
        assert denied.returncode != 0, (args, denied.stdout)
        assert "Operation not permitted" in denied.stderr, (args, denied.stderr)
    assert OTHER_POOL in bench.rook.ceph("osd", "pool", "stats", OTHER_POOL)  # still there


def test_rook_operator_restarted_mid_run(bench: RunBench) -> None:
    """Rook's operator restarted while it rolls the OSDs out for the run: the new one
    finishes that reconcile (and the restore's), the run completes, the cluster is back."""
    name, pool = "rook-restarted", "bench-restarted"
    before = bench.snapshot()
    bench.create(body(bench, name, pool))
    bench.wait("CephCluster patched", lambda: "ClusterPatched" in bench.conditions(name), 600,
               name)  # fmt: skip
    old = [p["metadata"]["name"] for p in bench.rook.pods("app=rook-ceph-operator")]
    for pod in old:
        bench.core.delete_namespaced_pod(pod, ROOK_NS)

    def new_operator_ready() -> bool:
        pods = bench.rook.pods("app=rook-ceph-operator")
        return any(pod_ready(p) and p["metadata"]["name"] not in old for p in pods)

    bench.wait("a new Rook operator Ready", new_operator_ready, 600, name)
    st = bench.wait_finished(name)
    assert st["phase"] == "Completed", st.get("message")
    assert st["stepsDone"] == 4
    bench.assert_restored(before, name, pool, tuple(KEYS))
    bench.delete_and_wait(name)
