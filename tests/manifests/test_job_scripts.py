"""The shell scripts inside the operator's Jobs, run here against the real tools: fio 3.33
with the rbd engine, rbd and ceph against a real throwaway cluster. Each container's
command and environment are taken from the Job the builder made; only the pod's absolute
paths (/etc/ceph, /jobs, /results, the mounted Secret) are moved into a temporary
directory, as the kubelet would mount them.

    image creation Job -> fio server Job (taskset branch, CB_CPUS) -> the step's fio client
    Job (JSON and IOPS logs in its log) -> image removal Job
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from crimsonbench.local.cluster import LocalCluster
from crimsonbench.manifests import fio, maintenance
from crimsonbench.manifests.ceph_access import external_access
from crimsonbench.manifests.pods import PodOptions
from crimsonbench.plan.build import build_plan
from crimsonbench.plan.hosts import ClusterLayout
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.plan.types import OsdCpus
from crimsonbench.results import step_log
from crimsonbench.results.fio_json import parse_fio_json
from crimsonbench.results.step_result import check_job_counts
from crimsonbench.spec.models import Flavor, LocalTarget, ObjectStore, OsdSpec, validate_spec

pytestmark = pytest.mark.ceph
CPUS = sorted(os.sched_getaffinity(0))
NODE = "here"
OPTS = PodOptions(image="unused")
POD_PATHS = ("/var/lib/crimsonbench", "/etc/ceph", "/etc/rook", "/jobs", "/results")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Pod:
    """A pod's filesystem in a directory: the Job's container run on this host."""

    def __init__(self, root: Path, secret_file: Path) -> None:
        self.root = root
        for p in POD_PATHS:
            (root / p.lstrip("/")).mkdir(parents=True, exist_ok=True)
        shutil.copy(secret_file, root / "var/lib/crimsonbench/keyring")

    def _moved(self, text: str) -> str:
        for p in POD_PATHS:
            text = text.replace(p, str(self.root / p.lstrip("/")))
        return text

    def argv_env(self, job: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
        (container,) = job["spec"]["template"]["spec"]["containers"]
        argv = [self._moved(a) for a in container["command"]]
        env = {"PATH": os.environ["PATH"]}
        for e in container.get("env", []):
            env[e["name"]] = self._moved(str(e["value"]))  # external access: plain values
        return argv, env

    def run(self, job: dict[str, Any], timeout: float = 300) -> str:
        argv, env = self.argv_env(job)
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
        assert proc.returncode == 0, f"{job['metadata']['name']}: {proc.stdout}\n{proc.stderr}"
        return proc.stdout

    def start(self, job: dict[str, Any]) -> subprocess.Popen[str]:
        argv, env = self.argv_env(job)
        return subprocess.Popen(argv, env=env, text=True, start_new_session=True)


@pytest.mark.skipif(len(CPUS) < 2, reason="needs 2 CPUs: one for the OSD, one for fio")
def test_the_job_scripts_run_a_step_against_a_real_cluster(tmp_path: Path) -> None:
    osd = OsdSpec(flavor=Flavor.CLASSIC, object_store=ObjectStore.MEMSTORE, count=1)
    with LocalCluster(LocalTarget(), osd, [OsdCpus(0, (CPUS[0],))]) as cluster:
        cluster.create_pool("bench", 8)
        conf = cluster.client_conf()
        port = free_port()
        spec = validate_spec(
            {
                "target": {
                    "external": {"monHost": f"[{cluster.mon_addr}]", "keyringSecret": {"name": "k"}}
                },  # fmt: skip
                "osd": {"flavor": "classic", "objectStore": "memstore"},
                "client": {
                    "node": NODE,
                    "cpuSet": str(CPUS[1]),
                    "pool": "bench",
                    "images": 2,
                    "imageSize": "64Mi",
                },  # fmt: skip
                "workloads": [{"preset": "randread4k"}],
                "sweep": {"iodepths": [4], "runtimeSeconds": 3, "rampSeconds": 1},
            }
        )
        topo = parse_lscpu_json(
            subprocess.run(
                ["lscpu", "-e=CPU,NODE,SOCKET,CORE,ONLINE", "--json"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout  # fmt: skip
        )
        layout = ClusterLayout({NODE: topo}, {}, (NODE,), plan_osds=False)
        plan = build_plan("scripts", spec, layout)
        assert spec.target.external is not None
        access = external_access("bench", spec.target.external)
        pod = Pod(tmp_path / "pod", conf.keyring)

        # 1. the images the run needs (rbd create, as the access's user)
        size = plan.pool.image_size_bytes
        pod.run(maintenance.create_images_job("scripts", "bench", plan.images, size, access, OPTS))
        assert sorted(cluster.cli.rbd("ls", "bench").split()) == sorted(plan.images)

        # 2. the fio server, pinned by the script's taskset to the client CPUs
        server_job = fio.fio_server_job("scripts", plan.clients[0], plan, access, OPTS, port=port)
        server = pod.start(server_job)
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.2)
            fio_server = psutil.Process(server.pid)
            assert fio_server.name() == "fio"  # `exec taskset ... fio --server`
            assert fio_server.cpu_affinity() == [CPUS[1]]

            # 3. one step's client: every job file sent to the server, JSON + logs back
            step = plan.steps[0]
            for job in step.jobs:
                (pod.root / "jobs" / f"{job.name}.fio").write_text(job.job_file)
            client_job = fio.fio_client_job("scripts", step.id, step.jobs,
                                            {NODE: f"127.0.0.1:{port}"}, "bench", OPTS,
                                            deadline_s=60)  # fmt: skip
            log = pod.run(client_job, timeout=120)
        finally:
            os.killpg(server.pid, 15)
            server.wait(timeout=30)
        sections = step_log.parse_sections(log)
        jobs = parse_fio_json(step_log.fio_output(sections))
        assert {j.host for j in jobs} == {f"127.0.0.1:{port}"}
        check_job_counts(step, {NODE: jobs}, plan.fio_numjobs)  # one job per image
        assert all(d.iops > 0 and d.hist is not None for j in jobs for d in j.directions)
        logs = step_log.iops_logs(sections)
        assert len(logs) == 2 and all(name.endswith(".127.0.0.1") for name in logs)

        # 4. the images go again (external clusters: nothing else removes them)
        pod.run(maintenance.remove_images_job("scripts", "bench", plan.images, access, OPTS))
        assert cluster.cli.rbd("ls", "bench").split() == []
