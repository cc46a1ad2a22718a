"""A local run under hostile conditions, on real clusters (issue 36, class 10): a second
Ctrl-C during the teardown, the terminal closed, Ctrl-C mid-prefill, the disk full, two
runs on the same CPUs, a run killed outright. Each run is the real `crimsonbench run`, in
its own process, signalled when its own output or status says it got there; what it
leaves is checked from outside (psutil, losetup, /proc/mounts)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import signal
import subprocess
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from run_watch import Run, clean_up, leftovers, rbd_bench_images, write_spec
from test_local_run import quick_spec

pytestmark = pytest.mark.ceph


def spec_of(tmp_path: Path, name: str, store: str = "memstore", **sweep: Any) -> Path:
    spec = quick_spec(store, **sweep)
    spec["target"]["local"]["workDir"] = str(tmp_path / f"{name}-cluster")
    return write_spec(tmp_path / f"{name}.yaml", name, spec)


@contextlib.contextmanager
def cleaned(tmp_path: Path, *names: str) -> Iterator[None]:
    try:
        yield
    finally:
        for name in names:
            clean_up(tmp_path / f"{name}-cluster", tmp_path / f"{name}-res")


def test_ctrl_c_again_and_again_during_the_teardown_leaves_nothing(tmp_path: Path) -> None:
    """Bluestore on a loop device (the longest teardown: a clean OSD stop, the loop
    detached): Ctrl-C, then Ctrl-C every 50 ms until the run has exited. Before, the second
    one broke off the teardown and left the OSD, the mon, the loop device behind."""
    spec = quick_spec("bluestore", runtimeSeconds=20)
    spec["target"]["local"].update(workDir=str(tmp_path / "loop-cluster"), bluestoreBacking="loop")
    res = tmp_path / "loop-res"
    run = Run(write_spec(tmp_path / "loop.yaml", "loop", spec), res)
    with cleaned(tmp_path, "loop"):
        run.wait_until("a step running", run.stepping)
        run.proc.send_signal(signal.SIGINT)
        while run.proc.poll() is None:  # every later one lands in the teardown or before
            with contextlib.suppress(ProcessLookupError):
                run.proc.send_signal(signal.SIGINT)
            time.sleep(0.05)
        rc = run.finish()
        assert leftovers(tmp_path / "loop-cluster", res) == [], run.output[-3000:]
        assert rc == 130, run.output[-3000:]
        assert "SIGINT during the teardown of" in run.output  # they did reach it
        status = run.status()
        assert (
            status["phase"] == "Failed" and "interrupted (stopped by SIGINT)" in status["message"]
        )


def _in_a_terminal(spec_file: Path, res: Path) -> tuple[Run, int]:
    """The run as the only process of a terminal session (a pty it controls); returns it
    and the terminal's side to close."""
    master, slave = pty.openpty()

    def own_terminal() -> None:  # the session leader takes the pty as its terminal
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    run = Run.__new__(Run)
    run.results, run.lines, run._lock = res, [], threading.Lock()
    run.proc = subprocess.Popen(
        [*__import__("run_watch").CLI, str(spec_file), "--results", str(res)],
        stdin=slave, stdout=slave, stderr=slave, preexec_fn=own_terminal, close_fds=True,
    )  # fmt: skip
    os.close(slave)

    def drain() -> None:  # a terminal nobody reads would block the run's output
        with contextlib.suppress(OSError):
            while chunk := os.read(master, 65536):
                with run._lock:
                    run.lines.append(chunk.decode(errors="replace"))

    run._reader = threading.Thread(target=drain, daemon=True)
    run._reader.start()
    return run, master


def test_closing_the_terminal_tears_the_cluster_down(tmp_path: Path) -> None:
    """SIGHUP from the kernel when the terminal goes, mid-step: before, its default action
    killed the run and left the whole cluster up (daemons in their own sessions)."""
    res = tmp_path / "hup-res"
    run, master = _in_a_terminal(spec_of(tmp_path, "hup", runtimeSeconds=20), res)
    with cleaned(tmp_path, "hup"):
        run.wait_until("a step running", run.stepping)
        os.close(master)  # the terminal window closes
        rc = run.finish()
        assert leftovers(tmp_path / "hup-cluster", res) == []
        status = run.status()
        assert status["phase"] == "Failed", status
        assert "interrupted (stopped by SIGHUP)" in status["message"], status
        assert rc == 130


def test_ctrl_c_mid_prefill_starts_no_other_image(tmp_path: Path) -> None:
    """Six images, two written at a time, 4k writes (seconds each): Ctrl-C while the first
    two are written. Before, every queued image was still prefilled after it."""
    spec = quick_spec("memstore")
    spec["target"]["local"]["workDir"] = str(tmp_path / "pre-cluster")
    spec["client"].update(images=6, imageSize="128Mi", prefillBlockSize="4k")
    root, res = tmp_path / "pre-cluster", tmp_path / "pre-res"
    run = Run(write_spec(tmp_path / "pre.yaml", "pre", spec), res)
    seen: set[str] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.update(rbd_bench_images(root))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    with cleaned(tmp_path, "pre"):
        run.wait_until("the first two images in prefill",
                       lambda: {"fio_test_0", "fio_test_1"} <= seen)  # fmt: skip
        run.proc.send_signal(signal.SIGINT)
        rc = run.finish()
        done.set()
        watcher.join(timeout=10)
        assert seen == {"fio_test_0", "fio_test_1"}, run.output[-2000:]
        assert rc == 130 and leftovers(root, res) == []
        assert run.status()["phase"] == "Failed"


@contextlib.contextmanager
def small_filesystem(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted at `where`, unmounted and removed afterwards."""
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                   check=True)  # fmt: skip
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], check=False)
        where.rmdir()


def _fill(fs: Path) -> None:
    """Write until the filesystem is full."""
    with (fs / "filler").open("wb") as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"\0" * 2**20)
            fh.flush()


def test_a_full_disk_mid_run_is_one_line_and_a_failed_status(tmp_path: Path) -> None:
    """The results directory on a 16 MiB tmpfs, filled to the last byte once the first step
    is stored. Before: a traceback, status.json left Running, the cluster torn down only
    by the exception's way out."""
    with small_filesystem(tmp_path / "small", "16m") as fs:
        res = fs / "res"
        run = Run(spec_of(tmp_path, "full", runtimeSeconds=3), res)
        with cleaned(tmp_path, "full"):
            first = res / "steps" / "randread4k-qd001-r1" / "result.json"
            run.wait_until("the first step stored", first.exists)
            _fill(fs)
            rc = run.finish()
            out = run.output
            assert rc == 1, out[-3000:]
            assert "Traceback" not in out, out[-3000:]
            full = [ln for ln in out.splitlines() if "the disk is full" in ln]
            assert len(full) == 1 and "(No space left on device)" in full[0], out[-3000:]
            assert full[0].endswith("a run with the same --results resumes"), full  # one line
            status = json.loads((res / "status.json").read_text())
            assert status["phase"] == "Failed" and "the disk is full" in status["message"]
            assert status["stepsDone"] >= 1  # the finished step is kept
            assert leftovers(tmp_path / "full-cluster", res) == []


def test_images_that_do_not_fit_are_refused_before_a_cluster_starts(tmp_path: Path) -> None:
    """3 x 512Mi into one 1Gi memstore OSD: before, the run brought the cluster up and the
    prefill stalled on a full OSD until its deadline (7 minutes here, hours for the
    default 32 x 2Gi into 8Gi). Now `run` refuses it naming the fields, starting nothing."""
    spec = quick_spec("memstore")
    spec["target"]["local"].update(workDir=str(tmp_path / "big-cluster"), bluestoreSize="1Gi")
    spec["client"].update(images=3, imageSize="512Mi")
    run = Run(write_spec(tmp_path / "big.yaml", "big", spec), tmp_path / "big-res")
    with cleaned(tmp_path, "big"):
        try:
            rc = run.finish(timeout=120)  # the old code was still prefilling by then
        finally:
            run.proc.kill()
        errors = [ln for ln in run.output.splitlines() if ln.startswith("error:")]
        assert rc == 2 and len(errors) == 1, run.output[-2000:]
        assert errors[0].startswith("error: spec.client.images: 3 images x 512Mi = 1.5 GiB do "
                                    "not fit in 1 OSD(s) x 1Gi")  # fmt: skip
        assert not (tmp_path / "big-cluster").exists() and not (tmp_path / "big-res").exists()
