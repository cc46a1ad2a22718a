"""A BenchmarkRun across two real nodes: kind (1 control plane + 2 workers, our node
image), Rook (e2e/harness/rook.py) with one bluestore OSD on each worker, our operator from this
repository's chart, fio clients on both workers (e2e/harness/kind_bench.py).

One classic run (2 workloads x 2 iodepths, 3 s + 1 s ramp), watched from outside:
- planned per node: each worker's OSD gets that worker's CPU plan, each worker a fio
  client with its own CPUs and half of the images; no OSD ever changes node;
- both fio servers (one per worker, pinned: every thread seen from the host) serve every
  step, whose one `fio --client` runs in the run's one driver pod (no pod per step; every
  fio process seen from the host); a step's result is the sum of the two clients, each
  client's figures are what its server's jobs reported in fio's own JSON (read here
  without the product's parser), and the start skew between them is recorded;
- our operator is killed mid-sweep: no step is lost or run twice, the new one reconciles
  without a handler error and its metrics show every step;
- `crimsonbench fetch` -> `report` -> `compare` from the kind cluster;
- restore: the CephCluster spec byte for byte, the OSDs back with their resources on their
  nodes, the mon database as before, the pool and the run's cephx user gone;
- deleting the run leaves nothing of any kind the operator's RBAC lets it create;
- the run's NetworkPolicies, enforced by the nodes' kube-network-policies: mid-sweep, Rook's
  toolbox pod (beside the run's pods, not the run's) cannot connect to either fio server
  (fio port) or to the driver's start barrier (barrier port): its SYNs are dropped (a
  timeout, where a port nothing listens on would refuse), while it reaches a mon, and the
  run's own driver, servers and start barrier work (every step of both clients stored).
This replaces the single-node e2e (tests/e2e/test_node_e2e.py) of earlier sessions.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import kubernetes.client
import kubernetes.config
import pytest
from fio_overlap import assert_ran_together, overlap
from fio_processes import expected_runs
from harness.kind_bench import CLIENT_CPUS, OPERATOR_NS, OSD_CPUS, RUN_NS, BenchStack, run_manifest
from harness.kind_rook import NAMESPACE as ROOK_NS
from kubernetes.stream import stream
from prometheus_client.parser import text_string_to_metric_families
from rook_runs import LABEL_ROLE, LABEL_RUN, PodWatch, RunBench, toolbox
from typer.testing import CliRunner

from crimsonbench.cli import app
from crimsonbench.manifests.fio import BARRIER_PORT, FIO_PORT, server_job_name
from crimsonbench.manifests.fio_driver import driver_job_name
from crimsonbench.manifests.naming import label_value
from crimsonbench.manifests.results import read_run_configmap, read_stored, results_selector

pytestmark = pytest.mark.kind

RUN, POOL = "kind-sweep", "bench-kind"
KEYS = {"osd_op_history_size": "40", "osd_op_log_threshold": "7"}  # runtime OSD options
METRICS_PORT = 9464  # values.yaml metrics.port
RUNTIME_S = 3  # each step: 1 s ramp + this


class Watcher(PodWatch):
    """PodWatch of the run, and the fio servers' thread affinities and each `fio --client`
    by the step directory it ran in (FioProcesses); and each step's output, copied from the
    driver pod (by exec, as a user would) while the driver keeps it."""

    def __init__(self, a: RunBench) -> None:
        super().__init__(a, RUN)
        self.outputs: dict[str, str] = {}  # step key -> the step's output (sections)
        self._threads.append(threading.Thread(target=self._copy_outputs, daemon=True))

    def _copy_outputs(self) -> None:
        # an ApiClient of its own: kubernetes.stream swaps the transport of the one it uses
        api = kubernetes.config.new_client_from_config(str(self.bench.s.kind.kubeconfig))
        core: Any = kubernetes.client.CoreV1Api(api)
        while not self._stop.wait(1):
            if self.bench.uid(RUN) is None:
                continue  # its driver's name is made from its uid
            sel = f"job-name={driver_job_name(self.bench.child(RUN))}"
            try:
                pods = [p for p in core.list_namespaced_pod(ROOK_NS, label_selector=sel).items
                        if p.status.phase == "Running"]  # fmt: skip
                for pod in pods:
                    self._copy_from(core, pod.metadata.name)
            except Exception:  # noqa: S112 - the pod may go at any moment
                continue

    def _copy_from(self, core: Any, pod: str) -> None:
        def sh(script: str) -> str:
            return str(stream(core.connect_get_namespaced_pod_exec, pod, ROOK_NS,
                              command=["sh", "-c", script], stderr=True, stdin=False,
                              stdout=True, tty=False))  # fmt: skip

        listed = sh("cd /results/steps 2>/dev/null && ls -1d *.stored 2>/dev/null || true")
        for name in listed.split():
            key = name.removesuffix(".stored")
            if key not in self.outputs:
                self.outputs[key] = sh(f"cat /results/steps/{name}/out")


def fio_document(log: str) -> dict[str, Any]:
    """fio's JSON in a step's output: after `==> fio.json <==`, from its first brace."""
    body = log.split("==> fio.json <==", 1)[1].split("\n==> ", 1)[0]
    doc = json.loads(body[body.index("{") :])
    assert isinstance(doc, dict)
    return doc


def step_logs(log: str) -> dict[str, str]:
    """fio's per-job IOPS logs in a step's output (`==> <job>_iops.N.log.<host> <==`)."""
    out = {}
    for part in log.split("\n==> ")[1:]:
        name, _, body = part.partition(" <==\n")
        if "_iops." in name:
            out[name] = body
    return out


def metrics(a: RunBench, pod: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The operator's /metrics through the API server's pod proxy."""
    body = a.core.connect_get_namespaced_pod_proxy_with_path(f"{pod}:{METRICS_PORT}", OPERATOR_NS,
                                                             "metrics")  # fmt: skip
    out: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for fam in text_string_to_metric_families(body):
        for sample in fam.samples:
            out[sample.name].append((sample.labels, sample.value))
    return out


# What a pod that is not the run's gets when it connects (host:port -> connected, refused
# or timeout), run in Rook's toolbox pod: every target at once, 4 s each.
PROBE = """
import json, socket, sys, threading
out = {}
def connect(target):
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=4).close()
        out[target] = "connected"
    except socket.timeout:
        out[target] = "timeout"
    except ConnectionRefusedError:
        out[target] = "refused"
    except OSError as exc:
        out[target] = f"error {exc.errno}"
threads = [threading.Thread(target=connect, args=(t,)) for t in sys.argv[1:]]
[t.start() for t in threads]
[t.join() for t in threads]
print(json.dumps(out))
"""


def intruder_view(a: RunBench) -> dict[str, str]:
    """Rook's toolbox pod (in the run's pods' namespace, not the run's) connecting to the
    run's fio servers (fio port), its driver (barrier port) and, as the control, a mon:
    role -> what it got."""

    def ips(selector: str) -> list[str]:
        pods = a.core.list_namespaced_pod(ROOK_NS, label_selector=selector).items
        return [p.status.pod_ip for p in pods if p.status.phase == "Running" and p.status.pod_ip]

    # the run's pods carry its children's name (<run>-<owner tag>, from its uid)
    run = label_value(a.child(RUN))
    servers = ips(f"{LABEL_RUN}={run},{LABEL_ROLE}=fio-server")
    (driver,) = ips(f"{LABEL_RUN}={run},{LABEL_ROLE}=fio-driver")
    mon = ips("app=rook-ceph-mon")[0]
    targets = {f"{ip}:{FIO_PORT}": f"fio server {ip}" for ip in servers}
    targets[f"{driver}:{BARRIER_PORT}"] = "start barrier"
    targets[f"{mon}:6789"] = "mon"
    got = json.loads(toolbox(a.s, "python3", "-c", PROBE, *targets, timeout=60))
    return {targets[t]: outcome for t, outcome in got.items()}


def test_a_run_across_two_nodes(kind_rook: BenchStack, tmp_path: Path) -> None:
    s, a = kind_rook, RunBench(kind_rook)
    workers = sorted(s.kind.workers)
    before = a.snapshot()
    assert sorted(before["osd_nodes"].values()) == workers, "one OSD per worker to start with"
    first_operator = a.operator_pods()[0].metadata.name
    seen_osd_nodes: list[dict[int, str]] = []
    t0 = time.monotonic()
    with Watcher(a) as watcher:
        body = run_manifest(RUN, workers, POOL, runtime=RUNTIME_S, ceph_config=KEYS)
        a.create(body)

        def steps_done(n: int) -> bool:
            seen_osd_nodes.append(s.rook.osd_nodes())
            return int(a.status(RUN).get("stepsDone") or 0) >= n

        a.wait("the first step done", lambda: steps_done(1), 1200, RUN)
        s.timings["apply_to_first_step_s"] = time.monotonic() - t0
        # meanwhile, a pod that is not the run's tries its fio servers and start barrier
        intruded: dict[str, str] = {}

        def intrude() -> None:
            try:
                intruded.update(intruder_view(a))
            except Exception as exc:  # noqa: BLE001 - said in the assertion below
                intruded["error"] = repr(exc)

        probe = threading.Thread(target=intrude, daemon=True)
        probe.start()
        # the run's options are in the mon database for both OSDs, from the CephCluster
        for osd_id in before["osd_nodes"]:
            for key, value in KEYS.items():
                assert s.rook.ceph("config", "get", f"osd.{osd_id}", key).strip() == value
        a.wait("two steps done", lambda: steps_done(2), 600, RUN)
        a.core.delete_namespaced_pod(first_operator, OPERATOR_NS, grace_period_seconds=0)
        killed_at = int(a.status(RUN)["stepsDone"])
        status = a.wait_finished(RUN)
        s.timings["run_s"] = time.monotonic() - t0
        probe.join(120)
    assert status["phase"] == "Completed", status.get("message")
    assert status["stepsDone"] == status["stepsTotal"] == 4
    # the run's NetworkPolicies, enforced: dropped for a pod not the run's (a timeout: a
    # port nothing listens on refuses), which still reaches a mon; the run's own traffic
    # (driver -> servers, servers -> barrier) carried every step
    servers = [k for k in intruded if k.startswith("fio server")]
    assert len(servers) == 2 and intruded["mon"] == "connected", intruded
    assert all(intruded[k] == "timeout" for k in (*servers, "start barrier")), intruded
    isolated = a.conditions(RUN)["NetworkIsolated"]
    assert isolated["status"] == "True" and isolated["reason"] == "NetworkPolicy", isolated
    assert 2 <= killed_at < 4, "the operator must be killed mid-sweep"

    # planned per node, from the run's record: each worker's OSD on that worker's CPUs
    run_cm = a.core.read_namespaced_config_map(f"{RUN}-run", RUN_NS)
    _info, plan = read_run_configmap(a.api.sanitize_for_serialization(run_cm))
    by_node = {node: sorted(osds) for node, osds in plan["cpu"]["hosts"].items()}
    assert by_node == {n: [f"osd.{i}"] for i, n in before["osd_nodes"].items()}, plan
    assert all(o["cpus"] == OSD_CPUS for h in plan["cpu"]["hosts"].values() for o in h.values())
    clients = plan["clients"]
    assert {c["node"] for c in clients.values()} == set(workers), clients
    assert all(len(c["images"]) == 2 for c in clients.values()), clients

    # no OSD ever left its node (sampled all along the run) and none is left elsewhere
    assert all(seen == before["osd_nodes"] for seen in seen_osd_nodes if len(seen) == 2)
    assert s.rook.osd_nodes() == before["osd_nodes"]

    # one fio server per worker, on it, once; one fio driver for the run, across the
    # operator's restart, on the first client's worker; every step's fio client ran once
    steps = [st["id"] for st in status["steps"]]
    child = a.child(RUN)  # what the operator names the run's Jobs after
    for w in workers:
        job = server_job_name(child, w)
        assert watcher.node_of_job[job] == {w}, dict(watcher.node_of_job)
        assert len(watcher.pods_by_job[job]) == 1, job
    driver = driver_job_name(child)
    assert len(watcher.pods_by_job[driver]) == 1, dict(watcher.pods_by_job)
    first_client = next(iter(clients.values()))["node"]
    assert watcher.node_of_job[driver] == {first_client}, dict(watcher.node_of_job)
    fio_jobs = {job for job in watcher.pods_by_job if job.startswith(f"{child}-fio")}
    assert fio_jobs == {driver, *(server_job_name(child, w) for w in workers)}, fio_jobs
    per_step = [job for job in watcher.pods_by_job if any(st in job for st in steps)]
    assert per_step == [], "no pod per step"
    ran = watcher.fio.runs_per_step()
    assert ran == expected_runs(a.run(RUN) or {}, steps), (ran, a.conditions(RUN))
    # both servers' threads stayed on the client CPUs
    assert len(watcher.fio.servers_seen) >= 2, watcher.fio.servers_seen
    assert set().union(*watcher.fio.server_affinity.values()) == {int(CLIENT_CPUS)}

    # results: the sum of both clients; each client what its server's jobs reported
    cms = a.core.list_namespaced_config_map(RUN_NS, label_selector=results_selector(RUN)).items
    stored = read_stored([a.api.sanitize_for_serialization(c) for c in cms])
    assert stored.unreadable == [], stored.unreadable
    results = {r.step_id: r for r in stored.results}
    assert sorted(results) == sorted(steps)
    skews = []
    for step, output in watcher.outputs.items():
        if step == "prefill":
            continue
        r = results[step]
        doc = fio_document(output)
        jobs = [j for j in doc["client_stats"] if j["jobname"] != "All clients"]
        per_host: dict[str, float] = defaultdict(float)
        for j in jobs:
            per_host[j["hostname"]] += j["read"]["iops"] + j["write"]["iops"]
        assert len(per_host) == 2, (step, sorted(per_host))  # both servers answered
        assert set(r.clients) == set(workers), (step, sorted(r.clients))
        assert sorted(c.iops for c in r.clients.values()) == pytest.approx(
            sorted(per_host.values()), rel=1e-9
        )
        assert r.fio.iops == pytest.approx(sum(c.iops for c in r.clients.values()), rel=1e-9)
        assert r.fio.total_ios == sum(c.total_ios for c in r.clients.values())
        assert all(c.iops > 0 for c in r.clients.values()), step
        assert r.start_skew_ms is not None, step
        skews.append(r.start_skew_ms)
        # every job of both servers ran at once (fio's own logs and JSON): each server's
        # one job file holds its two images' jobs; the clients' start skew (recorded above)
        # is the one gap two nodes add, so the rate check allows exactly that share
        o = overlap([doc], step_logs(output))
        assert len(o.runtimes_ms) == 4, (step, o)
        assert_ran_together(o, runtime_s=RUNTIME_S, step_rate=r.fio.iops,
                            rate_rel=0.01 + o.start_spread_ms / (RUNTIME_S * 1000))  # fmt: skip
    assert len(skews) == len(steps), f"a step's output was not copied: {sorted(watcher.outputs)}"
    # each step judged on both client nodes' planned CPU (their fio servers' CPU logs): on
    # kind both workers' CPU 1 is the host's one CPU 1, so each client's CPU also ran the
    # other's fio, which is what the figures must show; the OSD nodes' are said unjudged
    others = {}
    for step in steps:
        v = results[step].extra["validity"]
        loads = {c["name"]: c for c in v["interference"] or ()}
        assert sorted(loads) == [f"client {w}" for w in workers], (step, v["unjudged"], v)
        assert all(c["cpus"] == [int(CLIENT_CPUS)] and c["wall_s"] >= 0.9 for c in loads.values())
        assert any("OSD nodes" in n for n in v["unjudged"]), v["unjudged"]
        others[step] = [round(c["others_pct"]) for c in loads.values()]
        assert all(pct > 0 for pct in others[step]), (step, loads)
    print(f"\nothers' share of each client's CPU per step (%): {others}")
    s.timings["start_skew_ms_max"] = max(skews)
    print(f"\nstart skew between the two clients per step (ms): {skews}")

    # the operator that finished the run: every step in its metrics, no handler failed
    new = a.operator_pods()
    assert new and first_operator not in [p.metadata.name for p in new]
    m = metrics(a, new[0].metadata.name)
    iops = {lab["step"]: v for lab, v in m["crimsonbench_step_iops"] if lab["run"] == RUN}
    assert sorted(iops) == sorted(steps)
    assert all(iops[st] == pytest.approx(results[st].fio.iops, rel=1e-9) for st in steps)
    assert sum(v for _, v in m.get("crimsonbench_operator_reconcile_errors_total", [])) == 0
    assert "failed with an exception" not in s.operator_logs(400)

    # fetch -> report, as a user reads a run from a cluster
    runner = CliRunner()
    out = tmp_path / "fetched"
    got = runner.invoke(app, ["fetch", f"{RUN_NS}/{RUN}", "--kubeconfig",
                              str(s.kind.kubeconfig), "--results", str(out)])  # fmt: skip
    assert got.exit_code == 0, got.output
    assert runner.invoke(app, ["report", str(out)]).exit_code == 0
    summary = (out / "report" / "summary.md").read_text()
    for workload in ("randread4k", "randwrite4k"):  # a table with both iodepths each
        table = summary.split(f"## {workload}", 1)[1].split("\n## ", 1)[0]
        assert [ln.split("|")[1].strip() for ln in table.splitlines()
                if ln.startswith(" | ")] == ["1", "4"], table  # fmt: skip
    # no metrics.k8s.io here: the CPU columns say n/a, never a 0.00 that reads as measured
    assert "| n/a  | n/a  | n/a  |" in summary
    # compare: the run against itself, as a CI gate would read it: no regression, exit 0
    # (3 s steps may give too few per-second IOPS values to test: allowed, listed)
    cmp = runner.invoke(app, ["compare", str(out), str(out), "--out", str(tmp_path / "cmp"),
                              "--allow-untested"])  # fmt: skip
    assert cmp.exit_code == 0, cmp.output
    verdict_rows = ("| randread4k |", "| randwrite4k |")
    rows = [ln for ln in cmp.output.splitlines() if ln.startswith(verdict_rows)]
    assert len(rows) == 4 and not any("worse" in r for r in rows), cmp.output
    assert "no regression beyond the threshold" in cmp.output

    # restored: spec byte for byte, OSDs on their nodes with their resources, mon db, pool,
    # the run's cephx user; every condition of the patch and the restore true
    conds = a.conditions(RUN)
    for kind in ("ClusterPatched", "RolledOut", "RolledBack", "ConfigRestored", "ClusterRestored"):
        assert conds[kind]["status"] == "True", conds[kind]
    a.assert_restored(before, RUN, POOL, tuple(KEYS))
    # deleted: nothing left of any kind the operator may create
    a.delete_and_wait(RUN)
    a.wait("its pods gone", lambda: not a.run_objects(RUN), 300)


# ---------------------------------------------------------------- the same run, monitored
# The stack's prometheus-operator runs a Prometheus that found our operator through the
# chart's ServiceMonitor and our rules through its PrometheusRule, as kube-prometheus-stack
# does (tests/kind/monitoring_checks.py). After the run above, on the same cluster.


def test_prometheus_from_our_servicemonitor_saw_the_run(kind_rook: BenchStack) -> None:
    import monitoring_checks

    monitoring_checks.prometheus_saw_the_run(kind_rook, RUN)


def test_a_failed_run_fires_our_alerts(kind_rook: BenchStack) -> None:
    import monitoring_checks

    monitoring_checks.failed_run_fires_alerts(kind_rook)
