"""fio on a real kubelet (the real-node e2e stack): per-step overhead and fidelity.

- overhead per step: wall time between two consecutive steps being stored (the operator's
  status.stepsDone going up) minus fio's runtime + ramp. It holds everything the operator
  adds to a step: the execs in the run's fio driver pod (start, output), librbd connect in
  the long-lived fio server, parse, results write.
  Goal < 1.5 s. (The first step is left out: its interval starts with the prefill.)
- fidelity: IOPS of each step run by the pods (a pinned fio server pod, the fio driver)
  / IOPS of the same job files in the same mode on this host (a `fio --server` pinned to
  the same CPU with taskset, `fio --client` per step, the pods' ceph.conf) against the same
  cluster. Interleaved:
  pod sweep, host sweep, pod sweep, host sweep, ... (--rounds), as the machine is noisy.

    .venv/bin/python bench/bench_k8s.py [--rounds 2] [--runtime 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "e2e"))

from harness.stack import KEYRING_SECRET, POOL, RUN_NS, Stack, e2e_stack  # noqa: E402

from crimsonbench.local.topology_probe import local_topology  # noqa: E402
from crimsonbench.manifests.results import read_results_configmaps  # noqa: E402
from crimsonbench.plan.build import build_plan  # noqa: E402
from crimsonbench.plan.hosts import ClusterLayout  # noqa: E402
from crimsonbench.results.fio_json import combine, parse_fio_json  # noqa: E402
from crimsonbench.spec.models import validate_spec  # noqa: E402

G, V, P = "bench.crimson.ceph.io", "v1alpha1", "benchmarkruns"
CLIENT_CPU = "1"


def spec(mon_host: str, runtime: int, ramp: int) -> dict[str, Any]:
    return {
        "target": {"external": {"monHost": mon_host, "user": "admin",
                                "keyringSecret": {"name": KEYRING_SECRET, "key": "keyring"}}},
        "osd": {"flavor": "classic", "objectStore": "memstore", "count": 1, "cpuSet": "0"},
        "client": {"node": "localhost", "cpuSet": CLIENT_CPU, "pool": POOL, "images": 2,
                   "imageSize": "64Mi"},
        "workloads": [{"preset": "randread4k"}, {"preset": "randwrite4k"}],
        "sweep": {"iodepths": [1, 8, 32], "runtimeSeconds": runtime, "rampSeconds": ramp},
        "keepImages": True,  # the host sweep reads the same images
    }  # fmt: skip


def pod_sweep(s: Stack, name: str, body: dict[str, Any]) -> tuple[dict[str, float], list[float]]:
    """step id -> IOPS, and the wall time between consecutive stored steps."""
    obj = {"apiVersion": f"{G}/{V}", "kind": "BenchmarkRun",
           "metadata": {"name": name, "namespace": RUN_NS}, "spec": body}  # fmt: skip
    s.custom.create_namespaced_custom_object(G, V, RUN_NS, P, obj)
    stored_at: dict[int, float] = {}
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        status = s.custom.get_namespaced_custom_object(G, V, RUN_NS, P, name).get("status", {})
        done = int(status.get("stepsDone") or 0)
        stored_at.setdefault(done, time.monotonic())
        if status.get("phase") in ("Completed", "Failed"):
            break
        time.sleep(0.1)
    if status.get("phase") != "Completed":
        raise SystemExit(f"{name}: {status.get('phase')}: {status.get('message')}")
    cms = s.core.list_namespaced_config_map(
        RUN_NS, label_selector=f"{G}/run={name},{G}/role=results"
    ).items
    iops = {
        r.step_id: r.fio.iops
        for r in read_results_configmaps([s.api.sanitize_for_serialization(c) for c in cms])
    }
    s.custom.delete_namespaced_custom_object(G, V, RUN_NS, P, name)
    while any(o["metadata"]["name"] == name for o in
              s.custom.list_namespaced_custom_object(G, V, RUN_NS, P)["items"]):  # fmt: skip
        time.sleep(0.5)
    marks = [stored_at[k] for k in sorted(stored_at) if k >= 1]
    return iops, [b - a for a, b in zip(marks, marks[1:], strict=False)]


HOST_CGROUP = Path("/sys/fs/cgroup/cpu/crimsonbench-host-fio")


def _own_cgroup() -> None:
    """In the child before exec: into a cpu cgroup of its own, as a pod's container is."""
    (HOST_CGROUP / "tasks").write_text(str(os.getpid()))


def host_sweep(s: Stack, body: dict[str, Any], own_cgroup: bool = False) -> dict[str, float]:
    """The plan's own job files, in the pods' own mode (a pinned `fio --server`, one
    `fio --client` per step), on this host: only the container differs."""
    layout = ClusterLayout({"localhost": local_topology()}, {}, ("localhost",), plan_osds=False)
    plan = build_plan("host", validate_spec(body), layout)
    out: dict[str, float] = {}
    port = 18765
    with tempfile.TemporaryDirectory() as tmp:
        # the ceph.conf the pods write (ceph_config_script), so only pod vs host differs
        conf = Path(tmp) / "ceph.conf"
        client = "\n".join(f"{k} = {v}" for k, v in plan.client_options.items())
        conf.write_text(
            f"[global]\nmon_host = [{s.ceph.mon_addr}]\n"
            f"keyring = {s.ceph.client_conf().keyring}\n\n[client]\n{client}\n"
        )
        env = {**os.environ, "CEPH_CONF": str(conf)}
        server = subprocess.Popen(
            ["taskset", "-c", CLIENT_CPU, "fio", f"--server=ip:127.0.0.1,{port}"],
            env=env, cwd=tmp, preexec_fn=_own_cgroup if own_cgroup else None,
        )  # fmt: skip
        try:
            time.sleep(1)
            for step in plan.steps:
                files = []
                for job in step.jobs:
                    path = Path(tmp) / f"{job.name}.fio"
                    path.write_text(job.job_file)
                    files.append(str(path))
                text = subprocess.run(
                    ["fio", "--output-format=json+", f"--client=ip:127.0.0.1,{port}", *files],
                    capture_output=True, text=True, env=env, cwd=tmp, timeout=600, check=True,
                ).stdout  # fmt: skip
                out[step.id] = combine(parse_fio_json(text)).iops
        finally:
            server.terminate()
            server.wait(timeout=30)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--runtime", type=int, default=5)
    ap.add_argument("--ramp", type=int, default=1)
    ap.add_argument(
        "--host-cgroup",
        action="store_true",
        help="run the host fio in a cpu cgroup of its own (cgroup v1), like a pod",
    )
    args = ap.parse_args()
    if args.host_cgroup:
        HOST_CGROUP.mkdir(exist_ok=True)
    with e2e_stack() as s:
        print(f"# stack up: {json.dumps({k: round(v, 1) for k, v in s.timings.items()})}")
        body = spec(f"[{s.ceph.mon_addr}]", args.runtime, args.ramp)
        overheads: list[float] = []
        ratios: list[float] = []
        for r in range(args.rounds):
            pods, intervals = pod_sweep(s, f"bench-{r}", body)
            host = host_sweep(s, body, own_cgroup=args.host_cgroup)
            step_overheads = [i - args.runtime - args.ramp for i in intervals]
            overheads += step_overheads
            round_ratios = [pods[k] / host[k] for k in pods if host.get(k)]
            ratios += round_ratios
            print(f"round {r}: overhead/step " + " ".join(f"{o:.2f}" for o in step_overheads)
                  + " s; pod/host IOPS " + " ".join(f"{x:.3f}" for x in round_ratios))  # fmt: skip
    if args.host_cgroup:
        HOST_CGROUP.rmdir()
    print(f"\n## bench_k8s on {platform.node()} ({os.cpu_count()} CPUs), "
          f"runtime {args.runtime}s + ramp {args.ramp}s, {args.rounds} rounds")  # fmt: skip
    print("| figure | median | min | max | goal |")
    print("|---|---|---|---|---|")
    print(f"| overhead per step (s) | {statistics.median(overheads):.2f} | {min(overheads):.2f} "
          f"| {max(overheads):.2f} | < 1.5 |")  # fmt: skip
    print(f"| fidelity pod/host IOPS | {statistics.median(ratios):.3f} | {min(ratios):.3f} "
          f"| {max(ratios):.3f} | ≈ 1 |")  # fmt: skip


if __name__ == "__main__":
    main()
