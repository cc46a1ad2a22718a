"""The shell scripts inside the operator's Jobs, run here against the real tools: fio 3.33
with the rbd engine, rbd and ceph against a real throwaway cluster. Each container's
command and environment are taken from the Job the builder made; only the pod's absolute
paths (/etc/ceph, /jobs, /results, the mounted Secret) are moved into a temporary
directory, as the kubelet would mount them.

    image creation Job -> fio server Job (taskset branch, CB_CPUS) -> the fio driver Job
    (its image has no driver script here: the operator's copy is installed by exec, as
    for any `fio.image` but ours), and in it a step's start, polls and end as the
    operator execs them (JSON and IOPS logs in the report; a second start of the same
    step does nothing; a dropped attempt is put aside) -> image removal Job
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from crimsonbench.errors import ExecutionError
from crimsonbench.local.cluster import LocalCluster
from crimsonbench.manifests import fio, fio_driver, maintenance
from crimsonbench.manifests.ceph_access import external_access
from crimsonbench.manifests.pods import PodOptions
from crimsonbench.plan.build import build_plan
from crimsonbench.plan.hosts import ClusterLayout
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.plan.types import OsdCpus
from crimsonbench.results import node_cpu, step_log
from crimsonbench.results.fio_json import parse_fio_json
from crimsonbench.results.resources import summarize_samples, with_reactor_log
from crimsonbench.results.seastar_metrics import parse_reactor_log
from crimsonbench.results.step_result import check_job_counts
from crimsonbench.results.validity import CpuSetLoad
from crimsonbench.spec.models import Flavor, LocalTarget, ObjectStore, OsdSpec, validate_spec

pytestmark = pytest.mark.ceph
CPUS = sorted(os.sched_getaffinity(0))
NODE = "here"
RUN_UID = "6b1e6d0c-3c4f-4a43-9f1e-0d3b1c2a4e5f"  # the run's metadata.uid
POD_IP = "127.0.0.1"  # this host plays the pod: the downward API's status.podIP
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
        self.exec_env = {"PATH": os.environ["PATH"]}

    def _moved(self, text: str) -> str:
        for p in POD_PATHS:
            text = text.replace(p, str(self.root / p.lstrip("/")))
        return text

    def argv_env(self, job: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
        (container,) = job["spec"]["template"]["spec"]["containers"]
        argv = [self._moved(a) for a in container["command"]]
        env = {"PATH": os.environ["PATH"]}
        for e in container.get("env", []):
            if "valueFrom" in e:  # the downward API: this host is the pod, its address
                assert e["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}, e
                env[e["name"]] = POD_IP
                continue
            env[e["name"]] = self._moved(str(e["value"]))  # external access: plain values
        return argv, env

    def run(self, job: dict[str, Any], timeout: float = 300) -> str:
        argv, env = self.argv_env(job)
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
        assert proc.returncode == 0, f"{job['metadata']['name']}: {proc.stdout}\n{proc.stderr}"
        return proc.stdout

    def fails(self, job: dict[str, Any], timeout: float = 300) -> str:
        """Run a Job's container that must fail: its stderr."""
        argv, env = self.argv_env(job)
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
        assert proc.returncode != 0, f"{job['metadata']['name']} succeeded: {proc.stdout}"
        return proc.stderr

    def start(self, job: dict[str, Any]) -> subprocess.Popen[str]:
        """The Job's container, its stdout in log(job) as a container's log is kept."""
        argv, env = self.argv_env(job)
        with self.log(job).open("ab") as out:
            return subprocess.Popen(argv, env=env, text=True, start_new_session=True,
                                    stdout=out)  # fmt: skip

    def log(self, job: dict[str, Any]) -> Path:
        return self.root / f"{job['metadata']['name']}.log"

    def exec(self, argv: list[str], timeout: float = 120) -> str:
        """What the operator's exec runs in the pod's container (with its environment,
        as the kubelet's exec has it)."""
        proc = subprocess.run([self._moved(a) for a in argv], capture_output=True, text=True,
                              timeout=timeout, env=self.exec_env)  # fmt: skip
        assert proc.returncode == 0, f"{argv[:3]}: {proc.stdout}\n{proc.stderr}"
        return proc.stdout

    def driver(self, argv: list[str]) -> str:
        """An exec of the fio driver, as controller/driver.py makes it: a pod without the
        operator's script gets it installed first."""
        out = self.exec(argv)
        if _state(out) == fio_driver.NO_DRIVER:
            self.exec(fio_driver.install_command())
            out = self.exec(argv)
        return out


def _state(reply: str) -> str:
    return str(fio_driver.parse_reply(reply)[0]["state"])


def _report(pod: Pod, key: str, wait_s: int = 0) -> fio_driver.StepReport:
    return fio_driver.parse_report(pod.driver(fio_driver.poll_command(key, wait_s=wait_s)))


def _fio_client_of(step_dir: Path) -> psutil.Process:
    """The `fio --client` a step started (the session leader's child chain holds it)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if (step_dir / "pid").exists():
            leader = psutil.Process(int((step_dir / "pid").read_text()))
            for proc in [leader, *leader.children(recursive=True)]:
                if proc.name() == "fio":
                    return proc
        time.sleep(0.1)
    raise AssertionError(f"no fio client under {step_dir}")


def _tell_while_running(step_dir: Path) -> list[psutil.Process]:
    """The `ceph tell` processes seen under the step's session while its fio runs."""
    seen: dict[int, psutil.Process] = {}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (step_dir / "ended").exists():
        try:
            leader = psutil.Process(int((step_dir / "pid").read_text()))
            for proc in leader.children(recursive=True):
                if "tell" in proc.cmdline():
                    seen.setdefault(proc.pid, proc)
        except (psutil.Error, FileNotFoundError, ValueError):
            pass
        time.sleep(0.05)
    return list(seen.values())


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
                    "external": {
                        "user": "admin",
                        "monHost": f"[{cluster.mon_addr}]",
                        "keyringSecret": {"name": "k"},
                    }
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

        # 1. the images the run needs (rbd create, as the access's user), each tagged with
        # the run's uid; made again by a resumed run: nothing happens. Someone else's image
        # of a name the run asks for is a refusal naming it, never adopted (issue 36 #3)
        size = plan.pool.image_size_bytes
        create = maintenance.create_images_job("scripts", "bench", plan.images, size, RUN_UID,
                                               access, OPTS)  # fmt: skip
        pod.run(create)
        pod.run(create)
        assert sorted(cluster.cli.rbd("ls", "bench").split()) == sorted(plan.images)
        tags = {i: cluster.cli.rbd("image-meta", "get", f"bench/{i}", maintenance.IMAGE_OWNER)
                for i in plan.images}  # fmt: skip
        assert {t.strip() for t in tags.values()} == {RUN_UID}
        cluster.cli.rbd("create", "--size", "1M", "bench/theirs")
        refused = pod.fails(maintenance.create_images_job(
            "scripts", "bench", ["theirs"], size, RUN_UID, access, OPTS))  # fmt: skip
        assert "image bench/theirs exists and is not this run's" in refused

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

            # 3. the fio driver, and one step run in it as the operator's execs run it
            # with the run's Ceph user: it samples reactors when the OSDs are crimson
            driver_job = fio_driver.fio_driver_job("scripts", "bench", OPTS, node=NODE,
                                                   lifetime_s=600, access=access)  # fmt: skip
            pod.exec_env = pod.argv_env(driver_job)[1]
            driver = pod.start(driver_job)
            step = plan.steps[0]
            servers = {NODE: f"127.0.0.1:{port}"}
            script = pod.root / "results" / fio_driver.SCRIPT_NAME
            assert not script.exists()  # not this image's: installed by the first exec
            assert _report(pod, step.id).state == "missing"
            assert script.read_text() == fio_driver.driver_script()
            # a classic OSD has no reactors: every `ceph tell` is refused, the step runs on
            osds = {"osds.json": '{"0": "a"}', fio_driver.REACTOR_OSDS_FILE: "0.5 0\n"}
            files = fio.client_job_files(plan, step)  # one client: no barrier
            start = fio_driver.start_command(step.id, files, servers,
                                             deadline_s=60, extra_files=osds)  # fmt: skip
            assert _state(pod.driver(start)) == "started"
            assert _state(pod.driver(start)) == "exists"  # a resumed operator's second start
            running = _report(pod, step.id)
            assert running.state == "running" and running.age_s < 5
            fio_client = _fio_client_of(pod.root / "results/steps" / step.id)
            # the step outlives the exec that started it, in a session of its own
            assert fio_client.pid != driver.pid and os.getsid(fio_client.pid) != os.getsid(0)
            step_dir = pod.root / "results/steps" / step.id
            sampler = _tell_while_running(step_dir)
            report = _report(pod, step.id, wait_s=plan.timing.fio_s + 30)
            assert report.state == "done" and report.rc == 0, report.output[-2000:]
            assert 3 <= report.wall_s < 30, report  # 3 s runtime + 1 s ramp + setup
            assert not fio_client.is_running()
            # the server's CPU sampler logged the client's CPU once a second all along on
            # its container's log, as the operator reads it after a step: a load over the
            # step's window
            cpu_log = pod.log(server_job).read_text()
            logged = node_cpu.samples(cpu_log)
            assert len(logged) >= 4 and all(CPUS[1] in s.cpus for s in logged), cpu_log
            load = node_cpu.load_in_window("client here", [CPUS[1]], cpu_log,
                                           report.ended - 3, report.ended)  # fmt: skip
            assert isinstance(load, CpuSetLoad) and load.wall_s >= 0.9, load
            # the sampler and its `ceph tell` ended with the step
            assert sampler, "no `ceph tell` ran while fio ran"
            assert not [p for p in sampler if p.is_running() and p.status() != "zombie"]

            # a dropped attempt: its fio interrupted, its directory kept aside, the key free
            assert _state(pod.driver(start)) == "exists"
            assert _state(pod.driver(fio_driver.end_command(step.id, stored=True))) == "stored"
            assert (pod.root / "results/steps" / f"{step.id}.stored" / "rc").read_text() == "0\n"
            assert _state(pod.driver(start)) == "started"
            again = _fio_client_of(pod.root / "results/steps" / step.id)
            assert _state(pod.driver(fio_driver.end_command(step.id, stored=False))) == "dropped"
            again.wait(timeout=60)
            assert _report(pod, step.id).state == "missing"
            aside = list((pod.root / "results/steps").glob(f"{step.id}.dropped.*"))
            assert len(aside) == 1
        finally:
            for proc in (server, locals().get("driver")):
                if proc is not None:
                    os.killpg(proc.pid, 15)
                    proc.wait(timeout=30)
        sections = step_log.parse_sections(report.output)
        assert json.loads(sections["osds.json"]) == {"0": "a"}
        # the refusals are in the step's output, counted as no sample, the cause named
        reactors = parse_reactor_log(sections[fio_driver.REACTOR_LOG])
        assert reactors.rounds == [], reactors
        assert reactors.problems == [  # pacific's classic OSD knows no dump_metrics
            "ceph tell osd.0 dump_metrics reactor_utilization: Error EINVAL: invalid command"
        ], reactors
        summary, problem = with_reactor_log(summarize_samples([]), sections["reactor.log"])
        assert summary.reactor_util is None and problem == reactors.problems[0]
        jobs = parse_fio_json(step_log.fio_output(sections))
        assert {j.host for j in jobs} == {f"127.0.0.1:{port}"}
        check_job_counts(step.id, plan.fio.jobs, {NODE: jobs}, plan.fio_numjobs)
        # a fio process lost from the step: the step fails, naming the count
        with pytest.raises(ExecutionError, match=r"here: 1 of expected=2"):
            check_job_counts(step.id, plan.fio.jobs, {NODE: jobs[1:]}, plan.fio_numjobs)
        assert all(d.iops > 0 and d.hist is not None for j in jobs for d in j.directions)
        logs = step_log.iops_logs(sections)
        assert len(logs) == 2 and all(name.endswith(".127.0.0.1") for name in logs)

        # 4. the images go again (external clusters: nothing else removes them), only those
        # tagged with the run's uid: an image of the same name without it stays
        removal = maintenance.remove_images_job("scripts", "bench", [*plan.images, "theirs"],
                                                RUN_UID, access, OPTS)  # fmt: skip
        said = pod.run(removal)
        assert cluster.cli.rbd("ls", "bench").split() == ["theirs"]
        assert maintenance.image_removal_summary(said) == (
            f"RBD images: 1 kept, not the run's (no or another run uid): theirs; "
            f"{len(plan.images)} removed"
        )

        # 5. the mon database after the restore: the run's values go back to what the mon
        # database had before it (rm where nothing was), an admin's edit since stays
        cluster.cli.ceph("config", "set", "osd.0", "osd_op_num_shards", "2")  # by hand, before
        for who, key, value in (("osd.0", "osd_op_num_shards", "4"),
                                ("osd.0", "osd_recovery_sleep", "0.5"),
                                ("osd", "osd_scrub_sleep", "0.25")):  # fmt: skip
            cluster.cli.ceph("config", "set", who, key, value)  # what Rook applied for the run
        cluster.cli.ceph("config", "set", "osd", "osd_scrub_sleep", "0.75")  # an admin, mid-run
        changes = [
            {"who": "osd.0", "key": "osd_op_num_shards", "value": "4", "before": "2"},
            {"who": "osd.0", "key": "osd_recovery_sleep", "value": "0.5", "before": None},
            {"who": "osd", "key": "osd_scrub_sleep", "value": "0.25", "before": None},
            {"who": "osd.0", "key": "osd_max_backfills", "value": "3", "before": None},
        ]
        admin = Pod(tmp_path / "admin-pod", conf.keyring)
        log = admin.run(maintenance.mon_restore_job("scripts", changes, access, OPTS))
        rows = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
        did = {(r["who"], r["key"]): r["did"] for r in rows}
        assert did == {
            ("osd.0", "osd_op_num_shards"): "set",
            ("osd.0", "osd_recovery_sleep"): "rm",
            ("osd", "osd_scrub_sleep"): "kept",
            ("osd.0", "osd_max_backfills"): "gone",
        }
        dump = {
            (e["section"], e["name"]): e["value"]
            for e in json.loads(cluster.cli.ceph("config", "dump", "--format", "json"))
        }
        assert dump[("osd.0", "osd_op_num_shards")] == "2"
        assert ("osd.0", "osd_recovery_sleep") not in dump
        assert float(dump[("osd", "osd_scrub_sleep")]) == 0.75  # the admin's value, kept
