"""The fio driver's protocol, against the script itself (manifests/fio-driver.sh, run by sh
here as in the pod): every reply the operator parses is one the script wrote. A step runs
real fio in client/server mode (fio's null engine, a fio server on this host: no Ceph),
from start to stored, twice started, dropped mid-run; a pod without our script says so
until the operator's copy is installed. test_job_scripts.py runs the same against a real
cluster with the rbd engine."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from crimsonbench.errors import ParseError
from crimsonbench.manifests import fio_driver
from crimsonbench.manifests.pods import PodOptions
from crimsonbench.results import step_log
from crimsonbench.results.fio_json import parse_fio_json

SCRIPT = Path(fio_driver.__file__).with_name(fio_driver.SCRIPT_NAME)
HOST = ("sh", str(SCRIPT))  # how a test runs the package's copy
NULL_JOB = """\
[global]
ioengine=null
size=64m
time_based=1
runtime={runtime}
[null-p0]
rw=randread
bs=4k
write_iops_log=null-p0
log_avg_msec=1000
log_unix_epoch=1
"""


def run(argv: list[str], cwd: Path | None = None) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=cwd)
    assert proc.returncode == 0, f"{argv[:6]}: {proc.stdout}\n{proc.stderr}"
    return proc.stdout


def state(reply: str) -> str:
    return str(fio_driver.parse_reply(reply)[0]["state"])


@pytest.fixture()
def fio_server() -> Iterator[str]:
    """A real `fio --server` on this host: the address the step's client sends to."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(["fio", f"--server=ip:127.0.0.1,{port}"],
                              stdout=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 30
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        assert server.poll() is None and time.monotonic() < deadline, "fio --server did not start"
        time.sleep(0.1)
    yield f"127.0.0.1:{port}"
    os.killpg(server.pid, signal.SIGTERM)
    server.wait(timeout=30)


def start(root: Path, key: str, server: str, runtime: int) -> list[str]:
    request = fio_driver.StartRequest(key, {"here": NULL_JOB.format(runtime=runtime)},
                                      {"here": server}, 60, osds={"0": "u/0"})  # fmt: skip
    return request.argv(root=str(root), via=HOST)


def poll(root: Path, key: str, wait_s: int = 0) -> fio_driver.StepReport:
    return fio_driver.parse_report(
        run(fio_driver.poll_command(key, wait_s=wait_s, root=str(root), via=HOST))
    )


def fio_of(step_dir: Path) -> psutil.Process:
    """The step's `fio --client`, in the session the script started."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if (step_dir / "pid").exists():
            leader = psutil.Process(int((step_dir / "pid").read_text()))
            for proc in [leader, *leader.children(recursive=True)]:
                if proc.name() == "fio":
                    return proc
        time.sleep(0.05)
    raise AssertionError(f"no fio client under {step_dir}")


def test_a_step_from_start_to_stored_through_the_script(tmp_path: Path, fio_server: str) -> None:
    root, key = tmp_path / "steps", "randread4k-qd001-r1"
    assert poll(root, key).state == "missing"
    assert fio_driver.started(run(start(root, key, fio_server, runtime=2))) is True
    assert fio_driver.started(run(start(root, key, fio_server, runtime=2))) is False  # once
    running = poll(root, key)
    assert running.state == "running" and running.rc is None and running.age_s < 10
    client = fio_of(root / key)
    assert os.getsid(client.pid) != os.getsid(0)  # outlives the exec: a session of its own

    done = poll(root, key, wait_s=60)
    assert (done.state, done.rc) == ("done", 0), done.output[-2000:]
    assert 2 <= done.wall_s < 60 and done.age_s >= done.wall_s
    sections = step_log.parse_sections(done.output)
    (job,) = parse_fio_json(step_log.fio_output(sections))
    assert job.host == fio_server and job.directions[0].iops > 0
    assert list(step_log.iops_logs(sections)) == ["null-p0_iops.1.log.127.0.0.1"]
    assert sections[fio_driver.OSDS_FILE] == '{"0": "u/0"}'  # what the operator left

    end = fio_driver.end_command(key, stored=True, root=str(root), via=HOST)
    assert state(run(end)) == "stored"
    assert poll(root, key).state == "missing" and (root / f"{key}.stored" / "rc").exists()
    assert state(run(end)) == "missing"


def test_a_dropped_attempt_is_put_aside_and_its_key_free(tmp_path: Path, fio_server: str) -> None:
    """The fio client is interrupted (it asks its servers to stop and waits for them: a
    server-side job may run to its end); the step can start again at once."""
    root, key = tmp_path / "steps", "randread4k-qd004-r1"
    run(start(root, key, fio_server, runtime=2))
    client = fio_of(root / key)
    drop = fio_driver.end_command(key, stored=False, root=str(root), via=HOST)
    assert state(run(drop)) == "dropped"
    assert poll(root, key).state == "missing"
    assert len(list(root.glob(f"{key}.dropped.*"))) == 1
    client.wait(timeout=60)
    assert state(run(start(root, key, fio_server, runtime=1))) == "started"  # runs again
    assert poll(root, key, wait_s=60).rc == 0


def test_the_driver_keeps_the_last_stored_steps(tmp_path: Path) -> None:
    keys = [f"step-{i}" for i in range(5)]
    for i, key in enumerate(keys):
        (tmp_path / key).mkdir()
        (tmp_path / key / "rc").write_text("0\n")
        os.utime(tmp_path / key, (1000 + i, 1000 + i))  # ls -t: the newest first
        run(fio_driver.end_command(key, stored=True, root=str(tmp_path), via=HOST))
    # the script's KEEP_STORED: the last 3 stay to look at by hand
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{k}.stored" for k in keys[-3:]]


def test_a_pod_without_our_script_says_so_until_the_operators_copy_is_installed(
    tmp_path: Path,
) -> None:
    """Another image (fio.image): the pod's /results has no script. Run as the exec runs
    in the pod, with the pod's /results moved under tmp_path."""

    def in_pod(argv: list[str]) -> str:
        return run([a.replace("/results", str(tmp_path / "results")) for a in argv])

    (tmp_path / "results").mkdir()
    poll_argv = fio_driver.poll_command("k")
    assert state(in_pod(poll_argv)) == fio_driver.NO_DRIVER
    in_pod(fio_driver.install_command())
    installed = tmp_path / "results" / fio_driver.SCRIPT_NAME
    assert installed.read_text() == SCRIPT.read_text() == fio_driver.driver_script()
    assert fio_driver.parse_report(in_pod(poll_argv)).state == "missing"


def test_the_pod_takes_the_images_copy_only_when_it_is_the_operators(tmp_path: Path) -> None:
    job = fio_driver.fio_driver_job("r", "ns", PodOptions(image="x"), node=None,
                                    lifetime_s=0)  # fmt: skip
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["CB_DRIVER_SHA256"] == fio_driver.driver_sha256()
    image = tmp_path / "image"
    for copy, taken in ((SCRIPT.read_text(), True), ("# an older driver\n", False)):
        shutil.rmtree(tmp_path / "results", ignore_errors=True)
        image.mkdir(exist_ok=True)
        (image / fio_driver.SCRIPT_NAME).write_text(copy)
        script = container["command"][2].replace("/results", str(tmp_path / "results"))
        script = script.replace(str(Path(fio_driver.IMAGE_SCRIPT).parent), str(image))
        subprocess.run(["sh", "-c", script], env={**os.environ, **env}, check=True, timeout=30)
        assert (tmp_path / "results" / fio_driver.SCRIPT_NAME).exists() is taken


@pytest.mark.parametrize(
    "reply",
    ["", "sh: 1: cannot create", "state done 1 2", '{"state": "gone", "now": 1}',
     '{"state": "running", "now": "x", "started": 1}', '{"state": "done", "now": 1}',
     '{"state": "done", "now": 1, "started": 1, "ended": 2, "rc": 0.5}', "[]"],
)  # fmt: skip
def test_replies_that_are_not_the_scripts_are_refused(reply: str) -> None:
    with pytest.raises(ParseError, match="fio driver answered"):
        fio_driver.parse_report(reply)


def test_the_script_and_the_operator_name_the_same_files() -> None:
    text = SCRIPT.read_text()
    for name in (fio_driver.OSDS_FILE, fio_driver.REACTOR_OSDS_FILE, fio_driver.REACTOR_LOG,
                 step_log.FIO_OUTPUT, step_log.FIO_MESSAGES, f'"{fio_driver.STARTED}"',
                 f'"{fio_driver.EXISTS}"'):  # fmt: skip
        assert name in text, name


@pytest.mark.parametrize("reply", ['{"state": "running", "now": 1}', "", '{"now": 1}'])
def test_a_start_answered_otherwise_is_refused(reply: str) -> None:
    with pytest.raises(ParseError, match="fio driver answered"):
        fio_driver.started(reply)


def test_step_keys_cannot_reach_outside_the_steps_directory() -> None:
    for key in ("../x", "a/b", "a b", ""):
        with pytest.raises(ValueError):
            fio_driver.poll_command(key)
