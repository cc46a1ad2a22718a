"""Operator → fio pods on a real kubelet → a real Ceph cluster → results, metrics, cleanup.

One BenchmarkRun (2 workloads × 3 iodepths, 3 s + 1 s ramp per step) against the local
cluster as an external target. While it runs, the test watches from outside: every pod
the operator's Jobs create, every fio pod's log (streamed, so it survives the Job's
deletion), and the CPU affinity of every fio thread on this host. The operator pod is
killed after the second step; the run must still finish with no step run twice.
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

from crimsonbench.local.topology_probe import local_topology
from crimsonbench.manifests.jobs import parse_step_log, step_job_name
from crimsonbench.manifests.results import read_results_configmaps
from crimsonbench.plan.build import build_plan
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
                    labels.get(ROLE) == "fio"
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
        while not self._stop.is_set():
            for proc in psutil.process_iter(["name", "cmdline"]):
                cmd = proc.info.get("cmdline") or []
                if proc.info.get("name") != "fio" or not any("/jobs/" in c for c in cmd):
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


def fio_documents(log: str) -> list[dict[str, Any]]:
    """The fio JSON documents of a pod log, read straight from fio's own output."""
    return [json.loads(text[text.index("{") :]) for text in parse_step_log(log).values()]


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for fam in text_string_to_metric_families(body):
        for sample in fam.samples:
            out[sample.name].append((sample.labels, sample.value))
    return out


def test_operator_runs_a_sweep_with_fio_pods_on_a_real_node(stack: Stack) -> None:
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
    assert [p.metadata.name for p in s.operator_pods()] != [first_operator]
    print(f"operator killed after step {killed_at} of 6; its successor finished the run")

    # No step ran twice, across the restart: one pod ever per step Job.
    spec = validate_spec(run_manifest("x")["spec"])
    plan = build_plan(RUN, spec, local_topology())
    step_of_job = {step_job_name(RUN, st.id, "localhost"): st.id for st in plan.steps}
    assert set(step_of_job) <= set(watcher.pods_by_job), sorted(watcher.pods_by_job)
    assert all(len(watcher.pods_by_job[j]) == 1 for j in step_of_job), watcher.pods_by_job

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
        step = step_of_job[watcher.job_of_pod[pod_name]]
        seen_steps.add(step)
        docs = fio_documents(log)
        jobs = [j for d in docs for j in d["jobs"]]
        for d in docs:  # the rbd engine, pinned to the client set, as planned
            for j in d["jobs"]:
                assert _option(d, j, "ioengine") == "rbd"
                assert _option(d, j, "cpus_allowed") == "1"
        iops = sum(j["read"]["iops"] + j["write"]["iops"] for j in jobs)
        ios = sum(j["read"]["total_ios"] + j["write"]["total_ios"] for j in jobs)
        assert iops > 0, step
        assert results[step].fio.iops == pytest.approx(iops, rel=1e-9)
        assert results[step].fio.total_ios == ios
        if step in summary:
            assert float(summary[step]["iops"]) == pytest.approx(iops, rel=1e-2, abs=1)
    assert seen_steps == set(results), "a step's pod log was not captured"

    # fio threads on this host never left the client CPU set
    assert watcher.fio_affinity, "never saw a fio thread on the host"
    assert set().union(*watcher.fio_affinity.values()) == CLIENT_CPUS, watcher.fio_affinity

    # The (restarted) operator's metrics endpoint shows every step.
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

    # Finished: every Job it made is gone already (steps, probe, image removal), and so
    # are the RBD images (external cluster: nothing else removes them).
    for ns in (RUN_NS, OPERATOR_NS):
        left = [j.metadata.name for j in s.batch.list_namespaced_job(ns).items]
        assert left == [], (ns, left)
    assert s.ceph.cli.rbd("ls", POOL).split() == []

    # Delete the run: no pod, Job or RBD image left.
    s.custom.delete_namespaced_custom_object(GROUP, VERSION, RUN_NS, PLURAL, RUN)
    wait_for("run deleted", lambda: not _exists(s), 180, s)
    wait_for("pods gone", lambda: not _leftover_pods(s), 120, s)
    for ns in (RUN_NS, OPERATOR_NS):
        assert s.batch.list_namespaced_job(ns).items == [], ns
    assert s.ceph.cli.ceph("osd", "pool", "ls").split() == pools_before
    assert s.ceph.cli.rbd("ls", POOL).split() == []


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


def _option(doc: dict[str, Any], job: dict[str, Any], key: str) -> str:
    return str(job.get("job options", {}).get(key) or doc.get("global options", {}).get(key, ""))
