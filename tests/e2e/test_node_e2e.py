"""Operator → fio server and client pods on a real kubelet → a real Ceph cluster →
results, metrics, fetch/report/compare, cleanup.

One BenchmarkRun (2 workloads × 3 iodepths, 3 s + 1 s ramp per step) against the local
cluster as an external target. While it runs, the test watches from outside: every pod
the operator's Jobs create, every fio client pod's log (streamed, so it survives the
Job's deletion), and the CPU affinity of every thread of the fio server on this host.
The operator pod is killed after the second step; the run must still finish with no step
run twice, and the new operator's handlers must never have failed.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections import defaultdict
from typing import Any

import kubernetes.client
import psutil
import pytest
from harness.stack import OPERATOR_NS, POOL, RUN_NS, Stack
from kubernetes import watch
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from crimsonbench.cli import app
from crimsonbench.local.topology_probe import local_topology
from crimsonbench.manifests.fio import client_job_name, server_job_name
from crimsonbench.manifests.rbac import RULES
from crimsonbench.manifests.results import read_results_configmaps
from crimsonbench.plan.build import build_plan
from crimsonbench.plan.hosts import ClusterLayout
from crimsonbench.spec.models import validate_spec

pytestmark = [pytest.mark.node, pytest.mark.k8s, pytest.mark.ceph]

GROUP, VERSION, PLURAL = "bench.crimson.ceph.io", "v1alpha1", "benchmarkruns"
RUN = "e2e-sweep"
CLIENT_CPUS = {1}
ROLE = "bench.crimson.ceph.io/role"


def run_manifest(mon_host: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "BenchmarkRun",
        "metadata": {"name": RUN, "namespace": RUN_NS},
        "spec": {
            "target": {
                "external": {
                    "monHost": mon_host,
                    "user": "admin",
                    "keyringSecret": {"name": "ceph-keyring", "key": "keyring"},
                }
            },
            "osd": {"flavor": "classic", "objectStore": "memstore", "count": 1, "cpuSet": "0"},
            "client": {
                "node": "localhost",
                "cpuSet": "1",
                "pool": POOL,
                "images": 2,
                "imageSize": "64Mi",
            },
            "workloads": [{"preset": "randread4k"}, {"preset": "randwrite4k"}],
            "sweep": {"iodepths": [1, 4, 16], "runtimeSeconds": 3, "rampSeconds": 1},
        },
    }


class Watcher:
    """Everything the pods of the run do, seen from outside the operator."""

    def __init__(self, s: Stack) -> None:
        self.s = s
        self.pods_by_job: dict[str, set[str]] = defaultdict(set)  # job-name -> pod uids
        self.logs: dict[str, str] = {}  # fio pod name -> its whole log
        self.job_of_pod: dict[str, str] = {}
        self.fio_affinity: dict[int, set[int]] = {}  # host tid -> CPUs allowed
        self.fio_seen_running: list[float] = []
        self._threads: list[threading.Thread] = []
        self._following: set[str] = set()
        self._stop = threading.Event()

    def start(self) -> None:
        for target in (self._watch_pods, self._sample_affinity):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=15)

    def _watch_pods(self) -> None:
        core = self.s.core
        while not self._stop.is_set():
            w = watch.Watch()
            for event in w.stream(core.list_namespaced_pod, RUN_NS, timeout_seconds=2):
                pod = event["object"]
                labels = pod.metadata.labels or {}
                job = labels.get("job-name")
                if job:
                    self.pods_by_job[job].add(pod.metadata.uid)
                    self.job_of_pod[pod.metadata.name] = job
                running = pod.status.phase in ("Running", "Succeeded", "Failed")
                if (
                    labels.get(ROLE) in ("fio", "prefill")
                    and running
                    and pod.metadata.name not in self._following
                ):
                    self._following.add(pod.metadata.name)
                    t = threading.Thread(
                        target=self._follow, args=(pod.metadata.name,), daemon=True
                    )
                    t.start()
                    self._threads.append(t)
                if self._stop.is_set():
                    w.stop()

    def _follow(self, name: str) -> None:
        """Stream the log until the container ends: complete even if the Job goes first."""
        resp = self.s.core.read_namespaced_pod_log(
            name, RUN_NS, follow=True, _preload_content=False
        )
        self.logs[name] = b"".join(resp.stream()).decode()

    def _sample_affinity(self) -> None:
        """Every fio process of the server pod: the server and the job processes it forks
        (they carry the server's command line)."""
        while not self._stop.is_set():
            for proc in psutil.process_iter(["name", "cmdline"]):
                cmd = proc.info.get("cmdline") or []
                if proc.info.get("name") != "fio" or not any("--server" in c for c in cmd):
                    continue
                self.fio_seen_running.append(time.monotonic())
                try:
                    for th in proc.threads():
                        self.fio_affinity[th.id] = set(psutil.Process(th.id).cpu_affinity())
                except psutil.Error:
                    continue
            time.sleep(0.3)


def get_run(s: Stack) -> dict[str, Any]:
    obj = s.custom.get_namespaced_custom_object(GROUP, VERSION, RUN_NS, PLURAL, RUN)
    assert isinstance(obj, dict)
    return obj


def wait_for(what: str, check: Any, timeout: float, s: Stack) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.5)
    status = get_run(s).get("status", {})
    logs = s.operator_logs()
    raise AssertionError(
        f"{what}: not after {timeout}s; status {json.dumps(status)[:1500]}{logs[-6000:]}"
    )


def fio_document(log: str) -> dict[str, Any]:
    """fio's JSON of a client pod's log, read here without the product's parser: the text
    between `==> fio.json <==` and the next delimiter, from its first brace."""
    body = log.split("==> fio.json <==", 1)[1].split("\n==> ", 1)[0]
    doc = json.loads(body[body.index("{") :])
    assert isinstance(doc, dict)
    return doc


def server_jobs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [j for j in doc["client_stats"] if j["jobname"] != "All clients"]


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for fam in text_string_to_metric_families(body):
        for sample in fam.samples:
            out[sample.name].append((sample.labels, sample.value))
    return out


def test_operator_runs_a_sweep_with_fio_pods_on_a_real_node(stack: Stack, tmp_path: Any) -> None:
    s = stack
    first_operator = s.wait_operator_ready(timeout=60).metadata.name
    pools_before = s.ceph.cli.ceph("osd", "pool", "ls").split()
    watcher = Watcher(s)
    watcher.start()
    t0 = time.monotonic()
    try:
        s.custom.create_namespaced_custom_object(
            GROUP, VERSION, RUN_NS, PLURAL, run_manifest(f"[{s.ceph.mon_addr}]")
        )
        # kill the operator mid-run: after the second step is stored
        wait_for(
            "two steps done",
            lambda: int(get_run(s).get("status", {}).get("stepsDone") or 0) >= 2,
            300,
            s,
        )
        s.core.delete_namespaced_pod(first_operator, OPERATOR_NS, grace_period_seconds=0)
        killed_at = int(get_run(s)["status"]["stepsDone"])
        status = wait_for(
            "run finished",
            lambda: (
                (st := get_run(s).get("status", {})).get("phase") in ("Completed", "Failed") and st
            ),
            900,
            s,
        )
        s.timings["run_s"] = time.monotonic() - t0
    finally:
        watcher.stop()

    assert status["phase"] == "Completed", status.get("message")
    assert status["stepsDone"] == status["stepsTotal"] == 6
    assert 2 <= killed_at < 6, "the operator must be killed mid-sweep, not after it"
    new_pods = s.operator_pods()
    assert new_pods and first_operator not in [p.metadata.name for p in new_pods]
    print(f"operator killed after step {killed_at} of 6; its successor finished the run")

    # No step ran twice, across the restart: one pod ever per step's client Job; one fio
    # server for the run's one client node.
    spec = validate_spec(run_manifest("x")["spec"])
    layout = ClusterLayout({"localhost": local_topology()}, {}, ("localhost",), plan_osds=False)
    plan = build_plan(RUN, spec, layout)
    step_of_job = {client_job_name(RUN, st.id): st.id for st in plan.steps}
    assert set(step_of_job) <= set(watcher.pods_by_job), sorted(watcher.pods_by_job)
    assert all(len(watcher.pods_by_job[j]) == 1 for j in step_of_job), watcher.pods_by_job
    assert len(watcher.pods_by_job[server_job_name(RUN, "localhost")]) == 1

    # Results (status + results ConfigMaps) are exactly what fio printed in the pods.
    cms = s.core.list_namespaced_config_map(
        RUN_NS, label_selector=f"bench.crimson.ceph.io/run={RUN},{ROLE}=results"
    ).items
    results = {
        r.step_id: r
        for r in read_results_configmaps([s.api.sanitize_for_serialization(c) for c in cms])
    }
    assert set(results) == set(step_of_job.values())
    summary = {row["id"]: row for row in status.get("steps", [])}
    seen_steps = set()
    for pod_name, log in watcher.logs.items():
        if watcher.job_of_pod[pod_name] not in step_of_job:
            continue  # the prefill's client
        step = step_of_job[watcher.job_of_pod[pod_name]]
        seen_steps.add(step)
        doc = fio_document(log)
        jobs = server_jobs(doc)
        # counted here, not by the product: one job per image (2 images, 1 process each)
        assert len(jobs) == 2, (step, [j["jobname"] for j in jobs])
        for j in jobs:  # the rbd engine, pinned to the client set, from the one server
            assert j["job options"].get("ioengine", "rbd") == "rbd"
            assert j["hostname"] and j["port"] == 8765
        iops = sum(j["read"]["iops"] + j["write"]["iops"] for j in jobs)
        ios = sum(j["read"]["total_ios"] + j["write"]["total_ios"] for j in jobs)
        assert iops > 0, step
        assert results[step].fio.iops == pytest.approx(iops, rel=1e-9)
        assert results[step].fio.total_ios == ios
        assert results[step].fio.percentiles_exact  # every job's histogram merged
        assert list(results[step].clients) == ["localhost"]
        # status keeps the newest 200 steps: all 6 are there
        assert float(summary[step]["iops"]) == pytest.approx(iops, rel=1e-2, abs=1)
    assert seen_steps == set(results), "a step's pod log was not captured"

    # the fio server and every job it forked never left the client CPU set
    assert watcher.fio_seen_running, "never saw the fio server on the host"
    assert watcher.fio_affinity, "never saw a fio thread on the host"
    assert set().union(*watcher.fio_affinity.values()) == CLIENT_CPUS, watcher.fio_affinity

    # The (restarted) operator's metrics endpoint shows every step, and no handler failed.
    metrics = scrape(s.metrics_port)
    iops_series = [
        (labels, v) for labels, v in metrics["crimsonbench_step_iops"] if labels["run"] == RUN
    ]
    assert len(iops_series) == 6
    for labels, value in iops_series:
        assert value == pytest.approx(results[labels["step"]].fio.iops, rel=1e-9)
        assert labels["backend"] == "memstore" and labels["namespace"] == RUN_NS
    durations = [v for labels, v in metrics["crimsonbench_step_duration_seconds"]
                 if labels["run"] == RUN]  # fmt: skip
    assert len(durations) == 6 and all(4 <= d < 120 for d in durations), durations  # 3 s + 1 s
    errors = metrics.get("crimsonbench_operator_reconcile_errors_total", [])
    assert sum(v for _, v in errors) == 0, errors
    ticks = [v for labels, v in metrics["crimsonbench_operator_reconcile_duration_seconds_count"]]
    assert ticks and ticks[0] > 0, "the new operator never reconciled"
    assert "failed with an exception" not in s.operator_logs(400)

    # fetch -> report -> compare, as a user reads a Kubernetes run
    fetched = _fetch_report_and_compare(s, tmp_path)
    assert sorted(r.step_id for r in fetched) == sorted(results)

    # Finished: every Job it made is gone already (servers, steps, probe, facts, image
    # removal), and so are the RBD images (external cluster: nothing else removes them).
    for ns in (RUN_NS, OPERATOR_NS):
        left = [j.metadata.name for j in s.batch.list_namespaced_job(ns).items]
        assert left == [], (ns, left)
    assert s.ceph.cli.rbd("ls", POOL).split() == []

    # Delete the run: nothing the operator may create is left (kinds from its RBAC).
    s.custom.delete_namespaced_custom_object(GROUP, VERSION, RUN_NS, PLURAL, RUN)
    wait_for("run deleted", lambda: not _exists(s), 180, s)
    wait_for("pods gone", lambda: not _leftover_pods(s), 120, s)
    assert _leftovers(s) == {}
    assert s.ceph.cli.ceph("osd", "pool", "ls").split() == pools_before
    assert s.ceph.cli.rbd("ls", POOL).split() == []


def _fetch_report_and_compare(s: Stack, tmp: Any) -> list[Any]:
    """The operator's run through `crimsonbench fetch`, then `report`, then `compare`
    against the same spec run by local mode."""
    from crimsonbench.local.runner import LocalRun
    from crimsonbench.progress import QuietEvents
    from crimsonbench.results.store import ResultStore

    kubeconfig = s.cp.kubeconfig(tmp / "kubeconfig")
    k8s_dir, local_dir = tmp / "k8s", tmp / "local"
    runner = CliRunner()
    got = runner.invoke(app, ["fetch", f"{RUN_NS}/{RUN}", "--kubeconfig", str(kubeconfig),
                              "--results", str(k8s_dir)])  # fmt: skip
    assert got.exit_code == 0, got.output
    assert runner.invoke(app, ["report", str(k8s_dir)]).exit_code == 0
    assert (k8s_dir / "report" / "summary.md").exists()
    local = run_manifest("x")["spec"] | {"target": {"local": {}}}
    local["client"] = {k: v for k, v in local["client"].items() if k not in ("node", "pool")}
    local["osd"]["cpuSet"] = "0"
    outcome = LocalRun("local", validate_spec(local), local_dir, QuietEvents()).execute()
    assert outcome.phase.value == "Completed", outcome.message
    cmp = runner.invoke(app, ["compare", str(local_dir), str(k8s_dir), "--out", str(tmp / "c")])
    assert cmp.exit_code in (0, 1), cmp.output  # 1: the gate saw a regression
    text = (tmp / "c" / "comparison.md").read_text()
    assert (
        "## Verdicts" in text and text.count("| randread4k |") + text.count("| randwrite4k |") >= 6
    )
    return ResultStore(k8s_dir).load_results()


def _leftovers(s: Stack) -> dict[str, list[str]]:
    """Every object of the run of every kind the operator's RBAC lets it create. Events
    are left: they are the run's audit trail and expire on their own (the API's TTL)."""
    creatable = {res for _g, resources, verbs, _why in RULES if "create" in verbs
                 for res in resources}  # fmt: skip
    assert {"jobs", "configmaps", "leases", "events"} <= creatable, creatable
    sel = f"bench.crimson.ceph.io/run={RUN}"
    found: dict[str, list[str]] = {}
    for ns in (RUN_NS, OPERATOR_NS):
        found[f"jobs/{ns}"] = [j.metadata.name for j in s.batch.list_namespaced_job(ns).items]
        found[f"configmaps/{ns}"] = [
            c.metadata.name for c in s.core.list_namespaced_config_map(ns, label_selector=sel).items
        ]
        found[f"pods/{ns}"] = [
            p.metadata.name
            for p in s.core.list_namespaced_pod(ns).items
            if (p.metadata.labels or {}).get("bench.crimson.ceph.io/run") == RUN
        ]
    coord = kubernetes.client.CoordinationV1Api(s.api)
    found["leases"] = [
        le.metadata.name
        for le in coord.list_namespaced_lease(OPERATOR_NS).items
        if le.metadata.name.startswith("crimsonbench-")
    ]
    unchecked = creatable - {
        "jobs",
        "configmaps",
        "leases",
        "events",
        "cephclients",
        "cephblockpools",
    }
    assert not unchecked, f"the operator may create {unchecked}: check them here too"
    return {k: v for k, v in found.items() if v}


def _exists(s: Stack) -> bool:
    try:
        get_run(s)
    except kubernetes.client.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _leftover_pods(s: Stack) -> list[str]:
    return [p.metadata.name for p in s.core.list_namespaced_pod(RUN_NS).items]
