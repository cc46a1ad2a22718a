"""The operator's memory over a long run of the largest admitted sweep (issue 36), on a real
API server (etcd + kube-apiserver + kcm v1.36.3).

The sweep is bench_spec_bounds.py's max-steps shape: 32 workloads x 20 repeats x 64
iodepths = 40,960 steps, 16 client nodes, 128 OSDs on 16 nodes. The run is placed in its
steps with --stored steps already stored, as an operator restarted late in the sweep
finds it: each a real-sized result (16 clients' rows, per-second IOPS, the start barrier:
~8 KiB of JSON), written by the operator's own builders (one ConfigMap per step). Then the
operator runs, as a separate process under its RBAC (tick 0.5 s), and stores --steps more steps.

No kubelet runs, so no fio: in the operator's process the fio servers and driver are
stand-ins and a step "runs" for one tick (started, then stored the next tick), its result
as real-sized as the seeded ones. Everything else is the operator's own code against the
real API server: loading the run, storing each step, the status summary, the metrics view.
Its RSS is sampled every 0.5 s. --src runs another checkout's operator (e.g. main's) for
the figure before a change.

    .venv/bin/python bench/bench_long_run.py [--stored 40900] [--steps 60]
    .venv/bin/python bench/bench_long_run.py --src /tmp/main --stored 5000

Prints, never asserts. Goal: operator RSS < 150 MiB while it runs (the chart gives 256).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RUN, RUN_NS, ROOK_NS, OP_NS = "largest", "bench", "rook-ceph", "crimsonbench"
RUNS = ("bench.crimson.ceph.io", "v1alpha1", RUN_NS, "benchmarkruns")
TARGETS = json.dumps([{"cephCluster": f"{ROOK_NS}/rook-ceph", "allowedNamespaces": [RUN_NS]}])
GOAL_RSS_MIB = 150


def _shape() -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_spec_bounds import shapes

    return dict(shapes()["max-steps"])


def _plan() -> Any:
    from bench_spec_bounds import layout

    from crimsonbench.plan.build import build_plan
    from crimsonbench.spec.models import validate_spec

    return build_plan(RUN, validate_spec(_shape()), layout(), option_family="legacy")


def step_result(step: Any, clients: list[str]) -> Any:
    """A real-sized result of `step`: real fio figures per client (the captured rbd runs),
    the extras a step on Kubernetes carries."""
    from crimsonbench.results.fio_json import combine, parse_fio_json
    from crimsonbench.results.types import ResourceSummary, StepResult

    fixtures = sorted((ROOT / "tests/fixtures/fio/rbd").glob("*.json"))
    jobs = [j for f in fixtures for j in parse_fio_json(f.read_text())]
    row = combine(jobs)
    n = step.index
    rows = {c: replace(row, iops=row.iops + n + i) for i, c in enumerate(clients)}
    extra = {"metrics_source": "metrics.k8s.io", "wall_seconds": 12.5 + n % 7,
             "iops_per_second": [round(row.iops + n + s, 1) for s in range(10)],
             "start_barrier": {"expected": 24, "arrived": 24, "setup_spread_s": 0.8,
                               "first_wait_s": 0.9, "timed_out": False, "late": []}}  # fmt: skip
    return StepResult(step.id, step.workload, step.iodepth, step.repeat,
                      replace(row, iops=row.iops + n), ResourceSummary(300.0, 2900.0, 150.0, 9),
                      extra, rows, 12.5)  # fmt: skip


# ---------------------------------------------------------------- the operator's process


def operator_process() -> None:
    """The operator, with stand-ins for the fio servers and driver (no kubelet here)."""
    from crimsonbench.controller import driver, stages, step_loop
    from crimsonbench.controller.decisions.observed import PodState
    from crimsonbench.controller.decisions.step_decide import Store
    from crimsonbench.errors import NotReady

    started: set[str] = set()

    def servers(ctx: Any, plan: Any) -> dict[str, str]:
        return {c.name: f"10.0.0.{i + 1}:8765" for i, c in enumerate(plan.clients)}

    def fio_driver(ctx: Any, plan: Any) -> PodState:
        return PodState("Running", name="fio-driver", ready=True, ip="10.0.0.1", node="client-0")

    def carry_out(ctx: Any, view: Any, pod: Any) -> Any:  # step_loop._carry_out's signature
        if view.key not in started:  # a step runs for one tick: started now, stored the next
            started.add(view.key)
            raise NotReady(f"{view.what} started")
        return Store(step_result(view.step, [c.name for c in view.plan.clients]), end=())

    stages.ensure_servers, stages.ensure_driver = servers, fio_driver  # type: ignore[assignment]
    step_loop._carry_out = carry_out  # type: ignore[assignment]
    driver.end = lambda *a, **k: None  # type: ignore[assignment]
    from crimsonbench.controller.main import run_here

    run_here([RUN_NS], None)


# ---------------------------------------------------------------- the bench


def setup(cp: Any) -> None:
    from harness import rook_crds_yaml

    from crimsonbench.manifests.rbac import operator_rbac
    from crimsonbench.manifests.targets import RookGrant, TargetPolicy
    from crimsonbench.manifests.topology_cache import cache_configmap

    cp.apply_yaml(ROOT / "crds" / "benchmarkrun.yaml")
    cp.apply_yaml(rook_crds_yaml())
    for ns in (OP_NS, RUN_NS, ROOK_NS):
        cp.apply_yaml([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}])
    policy = TargetPolicy((RookGrant(ROOK_NS, "rook-ceph", (RUN_NS,)),))
    cp.apply_yaml(operator_rbac(OP_NS, policy=policy))
    lscpu = (ROOT / "tests/fixtures/lscpu/xeon-8276m-2s.json").read_text()
    nodes = [f"osd-{i}" for i in range(16)] + [f"client-{i}" for i in range(16)]
    caches = []
    for node in nodes:
        cm = cache_configmap(node, lscpu)
        cm["metadata"]["namespace"] = OP_NS
        caches.append(cm)
    cluster = {"apiVersion": "ceph.rook.io/v1", "kind": "CephCluster",
               "metadata": {"name": "rook-ceph", "namespace": ROOK_NS},
               "spec": {"cephVersion": {"image": "quay.io/ceph/ceph:v20.2.4"},
                        "dataDirHostPath": "/var/lib/rook"}}  # fmt: skip
    cp.apply_yaml([*caches, cluster])


def place_run(api: Any, plan: Any, stored: int) -> tuple[float, float]:
    """The run, in its steps, with its first `stored` steps' results stored. Returns (MiB
    of results JSON, seconds to store them)."""
    import kubernetes.client

    from crimsonbench.manifests.results import step_configmaps

    custom = kubernetes.client.CustomObjectsApi(api)
    body = {"apiVersion": "bench.crimson.ceph.io/v1alpha1", "kind": "BenchmarkRun",
            "metadata": {"name": RUN, "namespace": RUN_NS}, "spec": _shape()}  # fmt: skip
    uid = custom.create_namespaced_custom_object(*RUNS, body)["metadata"]["uid"]
    clients = [c.name for c in plan.clients]
    t0 = time.monotonic()
    results = [step_result(s, clients) for s in plan.steps[:stored]]
    size = sum(len(json.dumps(r.to_json_dict())) for r in results) / 2**20
    cms = [cm for r in results for cm in step_configmaps(RUN, r, namespace=RUN_NS)]
    del results
    owner = {"apiVersion": "bench.crimson.ceph.io/v1alpha1", "kind": "BenchmarkRun",
             "name": RUN, "uid": uid}  # fmt: skip
    local = threading.local()

    def create(cm: dict[str, Any]) -> None:
        if not hasattr(local, "core"):
            local.core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(api.configuration))
        cm["metadata"]["ownerReferences"] = [owner]
        local.core.create_namespaced_config_map(RUN_NS, cm)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(create, cms))
    status = {"phase": "Running", "stage": "steps", "startedAt": "2026-11-28T00:00:00Z",
              "clientNodes": clients, "osdPlacement": {str(i): f"osd-{i // 8}" for i in range(128)},
              "optionFamily": "legacy", "prefilled": True, "imagesCreated": False,
              "stepsTotal": len(plan.steps), "stepsDone": stored,
              "progress": f"{stored}/{len(plan.steps)}", "record": {}}  # fmt: skip
    custom.patch_namespaced_custom_object_status(*RUNS, RUN, {"status": status})
    return size, time.monotonic() - t0


def watch(
    api: Any, op: subprocess.Popen[bytes], stored: int, steps: int, minutes: float
) -> dict[str, Any]:
    """RSS every 0.5 s until `steps` more are stored (or `minutes` pass)."""
    import kubernetes.client
    import psutil

    custom = kubernetes.client.CustomObjectsApi(api)
    proc = psutil.Process(op.pid)
    t0, samples, first, done = time.monotonic(), [], None, stored
    while time.monotonic() - t0 < minutes * 60 and done < stored + steps and op.poll() is None:
        samples.append((time.monotonic() - t0, proc.memory_info().rss / 2**20))
        st = custom.get_namespaced_custom_object(*RUNS, RUN).get("status") or {}
        done = int(st.get("stepsDone") or 0)
        if first is None and done > stored:
            first = time.monotonic() - t0
        time.sleep(0.5)
    elapsed = time.monotonic() - t0
    return {"samples": samples, "first_s": first, "done": done - stored, "elapsed_s": elapsed,
            "exited": op.poll()}  # fmt: skip


def main() -> None:
    if sys.argv[1:2] == ["--operator"]:
        operator_process()
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stored", type=int, default=40_900)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--src", type=Path, default=ROOT, help="checkout whose operator runs")
    ap.add_argument("--minutes", type=float, default=20)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "e2e"))
    from harness import ControlPlane, ensure_binaries

    plan = _plan()
    with ControlPlane(bin_dir=ensure_binaries()) as cp, tempfile.TemporaryDirectory() as tmp:
        setup(cp)
        with cp.admin_api_client() as api:
            size, seed_s = place_run(api, plan, args.stored)
            token = cp.service_account_token(OP_NS, "crimsonbench-operator", create=False)
            env = {**os.environ, "KUBECONFIG": str(cp.kubeconfig(Path(tmp) / "kc", token)),
                   "PYTHONPATH": f"{args.src / 'operator'}:{ROOT / 'bench'}",
                   "CRIMSONBENCH_OPERATOR_NAMESPACE": OP_NS, "CRIMSONBENCH_TICK_SECONDS": "0.5",
                   "CRIMSONBENCH_METRICS_PORT": "0",
                   "CRIMSONBENCH_ROOK_TARGETS": TARGETS}  # fmt: skip
            argv = [sys.executable, str(Path(__file__).resolve()), "--operator"]
            op = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                seen = watch(api, op, args.stored, args.steps, args.minutes)
            finally:
                op.terminate()
                _, err = op.communicate(timeout=60)
            apiserver = cp.rss().get("kube-apiserver", 0) / 2**20
    rss = [r for _, r in seen["samples"]]
    print(f"machine: {platform.node()} ({os.cpu_count()} CPUs, Python {platform.python_version()})")
    print(f"operator from {args.src}")
    print(f"sweep: {len(plan.steps):,} steps; {args.stored:,} stored before the operator "
          f"starts ({size:.0f} MiB of JSON, stored in {seed_s:.0f} s)")  # fmt: skip
    if not rss:
        print(f"operator exited at once: {err.decode()[-2000:]}")
        return
    first = seen["first_s"]
    print(f"operator RSS: {rss[0]:.0f} MiB at start, peak {max(rss):.0f} MiB, last "
          f"{rss[-1]:.0f} MiB over {seen['elapsed_s']:.0f} s "
          f"(goal < {GOAL_RSS_MIB} MiB)")  # fmt: skip
    print(f"first new step stored {first:.0f} s after the operator started" if first else
          "no new step stored")  # fmt: skip
    rate = seen["done"] / seen["elapsed_s"] * 60
    print(f"steps stored while watched: {seen['done']} ({rate:.0f}/min at tick 0.5 s); "
          f"kube-apiserver RSS {apiserver:.0f} MiB")  # fmt: skip
    series = ", ".join(f"{t:.0f}s {r:.0f}" for t, r in seen["samples"][:: max(1, len(rss) // 12)])
    print(f"RSS series (s MiB): {series}")
    if seen["exited"] is not None:
        print(f"operator exited {seen['exited']}: {err.decode()[-2000:]}")


if __name__ == "__main__":
    main()
