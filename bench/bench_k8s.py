"""fio on a real kubelet (the real-node e2e stack): per-step overhead and fidelity.

- overhead per step: wall time between two consecutive steps being stored (the operator's
  status.stepsDone going up) minus fio's runtime + ramp. It holds everything the operator
  adds to a step: the execs in the run's fio driver pod (start, output), librbd connect in
  the long-lived fio server, parse, results write.
  Goal < 1.5 s. (The first step is left out: its interval starts with the prefill.)
- fidelity: IOPS of each step run by the pods (a pinned fio server pod, the fio driver)
  / IOPS of the same job files in the same mode on this host (a `fio --server` pinned to
  the same CPU with taskset, `fio --client` per step, the pods' ceph.conf) against the same
  cluster. To find where a difference comes from, the same sweep also runs against
  - the product's own fio server Job (same builder, same pod spec) driven by the host's
    `fio --client`: the pod without the operator and its driver;
  - the host's fio server moved into that pod's container cgroups (every v1 controller):
    the pod's CPU/memory accounting and weights, with the host's userland.
  Interleaved per round: operator run, host, server pod, host in the pod's cgroups
  (--rounds), as the machine is noisy. fio's own CPU (usr + sys, % of the job's time) is
  printed beside each figure: a variant that got more CPU shows it there.

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

from harness.images import FIO_IMAGE  # noqa: E402
from harness.node import NOT_READY_TOLERATION  # noqa: E402
from harness.stack import KEYRING_SECRET, POOL, RUN_NS, Stack, e2e_stack  # noqa: E402

from crimsonbench.local.topology_probe import local_topology  # noqa: E402
from crimsonbench.manifests.ceph_access import ceph_access_for  # noqa: E402
from crimsonbench.manifests.fio import (  # noqa: E402
    client_job_files,
    fio_server_job,
    server_job_name,
)
from crimsonbench.manifests.pods import PodOptions  # noqa: E402
from crimsonbench.manifests.results import read_results_configmaps  # noqa: E402
from crimsonbench.manifests.targets import kube_target  # noqa: E402
from crimsonbench.plan.build import build_plan  # noqa: E402
from crimsonbench.plan.hosts import ClusterLayout  # noqa: E402
from crimsonbench.plan.types import RunPlan  # noqa: E402
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


Figures = dict[str, tuple[float, float]]  # step id -> (IOPS, fio's usr + sys CPU %)


def pod_sweep(s: Stack, name: str, body: dict[str, Any]) -> tuple[Figures, list[float]]:
    """Step figures of an operator run, and the wall time between consecutive stored steps."""
    obj = {"apiVersion": f"{G}/{V}", "kind": "BenchmarkRun",
           "metadata": {"name": name, "namespace": RUN_NS}, "spec": body}  # fmt: skip
    s.op.custom.create_namespaced_custom_object(G, V, RUN_NS, P, obj)
    stored_at: dict[int, float] = {}
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        status = s.op.custom.get_namespaced_custom_object(G, V, RUN_NS, P, name).get("status", {})
        done = int(status.get("stepsDone") or 0)
        stored_at.setdefault(done, time.monotonic())
        if status.get("phase") in ("Completed", "Failed"):
            break
        time.sleep(0.1)
    if status.get("phase") != "Completed":
        raise SystemExit(f"{name}: {status.get('phase')}: {status.get('message')}")
    cms = s.op.core.list_namespaced_config_map(
        RUN_NS, label_selector=f"{G}/run={name},{G}/role=results"
    ).items
    iops = {
        r.step_id: (r.fio.iops, r.fio.usr_cpu + r.fio.sys_cpu)
        for r in read_results_configmaps([s.op.api.sanitize_for_serialization(c) for c in cms])
    }
    s.op.custom.delete_namespaced_custom_object(G, V, RUN_NS, P, name)
    while any(o["metadata"]["name"] == name for o in
              s.op.custom.list_namespaced_custom_object(G, V, RUN_NS, P)["items"]):  # fmt: skip
        time.sleep(0.5)
    marks = [stored_at[k] for k in sorted(stored_at) if k >= 1]
    return iops, [b - a for a, b in zip(marks, marks[1:], strict=False)]


def host_plan(body: dict[str, Any]) -> RunPlan:
    layout = ClusterLayout({"localhost": local_topology()}, {}, ("localhost",), plan_osds=False)
    return build_plan("host", validate_spec(body), layout)


def client_sweep(plan: RunPlan, port: int, tmp: str, prefill: bool) -> Figures:
    """Every step's job files sent to the fio server at 127.0.0.1:port by a host
    `fio --client`, one per step, as the driver does; first the plan's prefill if asked
    (as an operator run does before its first step)."""
    out: Figures = {}
    steps = [("prefill", None)] if prefill else []
    for step_id, step in steps + [(st.id, st) for st in plan.steps]:
        # rendered at its launch: a step's start barrier counts from then
        job_files = client_job_files(plan, step, time.time())
        files = []
        for client, text in job_files.items():
            path = Path(tmp) / f"{client}.fio"
            path.write_text(text)
            files.append(str(path))
        text = subprocess.run(
            ["fio", "--output-format=json+", f"--client=ip:127.0.0.1,{port}", *files],
            capture_output=True, text=True, cwd=tmp, timeout=600, check=True,
        ).stdout  # fmt: skip
        if step_id != "prefill":
            fio = combine(parse_fio_json(text))
            out[step_id] = (fio.iops, fio.usr_cpu + fio.sys_cpu)
    return out


def host_sweep(
    s: Stack, plan: RunPlan, port: int, prefill: bool, cgroups_of: int | None = None
) -> Figures:
    """The plan's own job files, in the pods' own mode (a pinned `fio --server`, one
    `fio --client` per step), on this host: only the container differs. cgroups_of: a pid
    whose cgroups the host server joins before the sweep."""
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
            env=env, cwd=tmp,
        )  # fmt: skip
        try:
            if cgroups_of is not None:
                join_cgroups(server.pid, cgroups_of)
            time.sleep(1)
            return client_sweep(plan, port, tmp, prefill)
        finally:
            server.terminate()
            server.wait(timeout=30)


def join_cgroups(pid: int, of: int) -> None:
    """Move pid into every cgroup v1/v2 hierarchy's cgroup of `of` (a container's process)."""
    for line in Path(f"/proc/{of}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        name = controllers.removeprefix("name=") if controllers else "unified"
        procs = Path("/sys/fs/cgroup") / name / path.lstrip("/") / "cgroup.procs"
        if procs.exists():
            procs.write_text(str(pid))


SERVER_POD_PORT = 18766


def server_pod(s: Stack, plan: RunPlan, body: dict[str, Any]) -> int:
    """The product's fio server Job for the plan's client, on its own port; returns the pid
    of the fio server in its container once it accepts connections."""
    opts = PodOptions(image=FIO_IMAGE, image_pull_policy="Never", host_network=True,
                      tolerations=(NOT_READY_TOLERATION,))  # fmt: skip
    job = fio_server_job("fidelity", plan.clients[0], plan,
                         ceph_access_for(kube_target(validate_spec(body), RUN_NS)), opts,
                         port=SERVER_POD_PORT)  # fmt: skip
    job["spec"]["activeDeadlineSeconds"] = 6 * 3600  # lives for the whole bench
    s.op.batch.create_namespaced_job(RUN_NS, job)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        for proc in Path("/proc").iterdir():
            try:
                cmd = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmd[:1] == [b"fio"] and f"--server=ip:0.0.0.0,{SERVER_POD_PORT}".encode() in cmd:
                time.sleep(1)  # listening: the pod's readiness probe asks the same
                return int(proc.name)
        time.sleep(0.5)
    raise SystemExit("the fio server pod did not start within 180 s")


def remove_server_pod(s: Stack, plan: RunPlan, pid: int) -> None:
    s.op.batch.delete_namespaced_job(
        server_job_name("fidelity", plan.clients[0].name), RUN_NS,
        propagation_policy="Foreground", grace_period_seconds=0,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while (
        Path(f"/proc/{pid}").exists()
        or s.op.core.list_namespaced_pod(
            RUN_NS, label_selector=f"job-name={server_job_name('fidelity', plan.clients[0].name)}"
        ).items
    ):
        if time.monotonic() > deadline:
            raise SystemExit("the fio server pod did not go within 120 s")
        time.sleep(0.5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--runtime", type=int, default=5)
    ap.add_argument("--ramp", type=int, default=1)
    ap.add_argument(
        "--prefill-first",
        action="store_true",
        help="write the images again (the plan's prefill) before every host-driven sweep, "
        "so each variant starts from the state an operator run starts from",
    )
    args = ap.parse_args()
    variants = ("operator", "host", "server pod", "host in pod cgroups")
    figures: dict[str, list[Figures]] = {v: [] for v in variants}
    overheads: list[float] = []
    with e2e_stack() as s:
        print(f"# stack up: {json.dumps({k: round(v, 1) for k, v in s.timings.items()})}")
        body = spec(f"[{s.ceph.mon_addr}]", args.runtime, args.ramp)
        plan = host_plan(body)
        for r in range(args.rounds):
            pods, intervals = pod_sweep(s, f"bench-{r}", body)
            overheads += [i - args.runtime - args.ramp for i in intervals]
            # the server pod holds a Guaranteed CPU: it must be gone before the next run
            pod_pid = server_pod(s, plan, body)
            try:
                with tempfile.TemporaryDirectory() as tmp:
                    in_pod = client_sweep(plan, SERVER_POD_PORT, tmp, args.prefill_first)
                round_figures = (pods, host_sweep(s, plan, 18765, args.prefill_first), in_pod,
                                 host_sweep(s, plan, 18767, args.prefill_first,
                                            cgroups_of=pod_pid))  # fmt: skip
            finally:
                remove_server_pod(s, plan, pod_pid)
            for v, f in zip(variants, round_figures, strict=True):
                figures[v].append(f)
            print(f"round {r}: " + "; ".join(
                f"{v} " + " ".join(f"{f[k][0]:.0f}/{f[k][1]:.0f}%" for k in sorted(f))
                for v, f in zip(variants, round_figures, strict=True)))  # fmt: skip
    print(f"\n## bench_k8s on {platform.node()} ({os.cpu_count()} CPUs), "
          f"runtime {args.runtime}s + ramp {args.ramp}s, {args.rounds} rounds")  # fmt: skip
    print("| figure | median | min | max | goal |")
    print("|---|---|---|---|---|")
    print(f"| overhead per step (s) | {statistics.median(overheads):.2f} | {min(overheads):.2f} "
          f"| {max(overheads):.2f} | < 1.5 |")  # fmt: skip
    for v in variants[:1] + variants[2:]:
        ratios = [a[k][0] / b[k][0] for a, b in zip(figures[v], figures["host"], strict=True)
                  for k in a if b.get(k) and b[k][0]]  # fmt: skip
        print(f"| IOPS {v} / host | {statistics.median(ratios):.3f} | {min(ratios):.3f} "
              f"| {max(ratios):.3f} | ≈ 1 |")  # fmt: skip
    print("\n| variant | median fio CPU (usr + sys, %) | median IOPS per fio CPU % |")
    print("|---|---|---|")
    for v in variants:
        cpu = [f[k][1] for f in figures[v] for k in f]
        per = [f[k][0] / f[k][1] for f in figures[v] for k in f if f[k][1]]
        print(f"| {v} | {statistics.median(cpu):.1f} | {statistics.median(per):.1f} |")


if __name__ == "__main__":
    main()
