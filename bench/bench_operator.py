"""Operator latency and memory on the real API server (etcd + kube-apiserver + kcm).

- apply -> CephCluster patched: a BenchmarkRun whose node topology is cached (goal < 2 s)
- apply -> first Job created: a run on a node without cached topology (its probe Job)
- operator RSS: idle, and while it holds a run waiting for Rook's rollout

The operator runs as a separate process (`kopf run`) under its least-privilege RBAC.

    .venv/bin/python bench/bench_operator.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import copy
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

import kubernetes.client
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "e2e"))
sys.path.insert(0, str(ROOT / "tests" / "k8s"))

from harness import ControlPlane, ensure_binaries, rook_crds_yaml  # noqa: E402
from test_operator import (  # noqa: E402
    CEPHCLUSTER,
    NODE,
    OP_NS,
    ROOK_NS,
    RUN_NS,
    TARGETS,
    G,
    V,
    run_body,
)

from crimsonbench.manifests.rbac import operator_rbac  # noqa: E402
from crimsonbench.manifests.targets import RookGrant, TargetPolicy  # noqa: E402
from crimsonbench.manifests.topology_cache import cache_configmap  # noqa: E402


def setup(cp: ControlPlane) -> None:
    cp.apply_yaml(ROOT / "crds" / "benchmarkrun.yaml")
    cp.apply_yaml(rook_crds_yaml())
    for ns in (OP_NS, RUN_NS, ROOK_NS):
        cp.apply_yaml([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}])
    # the runs of RUN_NS may target ROOK_NS's cluster (TARGETS, as test_operator's chart)
    cp.apply_yaml(operator_rbac(OP_NS, policy=TargetPolicy((RookGrant(ROOK_NS, "rook-ceph",
                                                                      (RUN_NS,)),))))  # fmt: skip
    lscpu = (ROOT / "tests/fixtures/lscpu/xeon-8276m-2s.json").read_text()
    cm = cache_configmap(NODE, lscpu)
    cm["metadata"]["namespace"] = OP_NS
    cp.apply_yaml([cm])


def wait(probe: Any, timeout: float = 60) -> float:
    t0 = time.monotonic()
    while not probe():
        if time.monotonic() - t0 > timeout:
            raise SystemExit("timed out")
        time.sleep(0.02)
    return time.monotonic() - t0


def one_round(api: Any, i: int) -> tuple[float, float]:
    custom = kubernetes.client.CustomObjectsApi(api)
    batch = kubernetes.client.BatchV1Api(api)
    custom.create_namespaced_custom_object(
        "ceph.rook.io", "v1", ROOK_NS, "cephclusters", copy.deepcopy(CEPHCLUSTER)
    )
    gen0 = 1
    custom.create_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", run_body(f"p{i}"))
    patched = wait(
        lambda: (
            custom.get_namespaced_custom_object(
                "ceph.rook.io", "v1", ROOK_NS, "cephclusters", "rook-ceph"
            )["metadata"]["generation"]
            > gen0
        )
    )
    custom.delete_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", f"p{i}")
    wait(lambda: not custom.list_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns")["items"])
    custom.delete_namespaced_custom_object(
        "ceph.rook.io", "v1", ROOK_NS, "cephclusters", "rook-ceph"
    )
    # a node nobody probed yet: the first Job is its topology probe
    body = run_body(f"j{i}")
    body["spec"]["client"]["node"] = f"fresh-node-{i}"
    custom.create_namespaced_custom_object(
        "ceph.rook.io", "v1", ROOK_NS, "cephclusters", copy.deepcopy(CEPHCLUSTER)
    )
    custom.create_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", body)
    job = wait(lambda: batch.list_namespaced_job(OP_NS).items)
    custom.delete_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", f"j{i}")
    wait(lambda: not custom.list_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns")["items"])
    batch.delete_collection_namespaced_job(OP_NS, propagation_policy="Background")
    wait(lambda: not batch.list_namespaced_job(OP_NS).items)
    custom.delete_namespaced_custom_object(
        "ceph.rook.io", "v1", ROOK_NS, "cephclusters", "rook-ceph"
    )
    return patched, job


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with ControlPlane(bin_dir=ensure_binaries()) as cp, tempfile.TemporaryDirectory() as tmp:
        setup(cp)
        token = cp.service_account_token(OP_NS, "crimsonbench-operator", create=False)
        env = {
            **os.environ,
            "KUBECONFIG": str(cp.kubeconfig(Path(tmp) / "kc", token)),
            "CRIMSONBENCH_OPERATOR_NAMESPACE": OP_NS,
            "CRIMSONBENCH_ROOK_TARGETS": json.dumps(TARGETS["rook"]),
        }
        op = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kopf",
                "run",
                "-m",
                "crimsonbench.controller.main",
                "--standalone",
                "--namespace",
                RUN_NS,
                "--quiet",
            ],
            env=env,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(5)
            idle = psutil.Process(op.pid).memory_info().rss / 2**20
            with cp.admin_api_client() as api:
                rounds = [one_round(api, i) for i in range(args.rounds)]
                custom = kubernetes.client.CustomObjectsApi(api)
                custom.create_namespaced_custom_object(
                    "ceph.rook.io", "v1", ROOK_NS, "cephclusters", copy.deepcopy(CEPHCLUSTER)
                )
                custom.create_namespaced_custom_object(
                    G, V, RUN_NS, "benchmarkruns", run_body("held")
                )
                time.sleep(10)
                busy = psutil.Process(op.pid).memory_info().rss / 2**20
        finally:
            op.terminate()
            op.wait(timeout=30)
    patched = [r[0] for r in rounds]
    jobs = [r[1] for r in rounds]
    print(f"machine: {platform.node()} {os.cpu_count()} CPUs, {platform.platform()}")
    print(
        f"apply -> CephCluster patched: median {statistics.median(patched):.2f} s "
        f"(max {max(patched):.2f} s) over {len(patched)} rounds; goal < 2 s"
    )
    print(
        f"apply -> first Job created:   median {statistics.median(jobs):.2f} s "
        f"(max {max(jobs):.2f} s)"
    )
    print(f"operator RSS: idle {idle:.0f} MiB, holding a run {busy:.0f} MiB")


if __name__ == "__main__":
    main()
