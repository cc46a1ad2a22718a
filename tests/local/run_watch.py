"""Helpers of the local-mode safety tests: `crimsonbench run` as a user runs it (its own
process, its output read as it comes), and what a run may have left on the machine."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import yaml

from crimsonbench.local.cleanup import destroy

CLI = [sys.executable, "-m", "crimsonbench.cli", "run"]


def write_spec(path: Path, name: str, spec: dict[str, Any]) -> Path:
    doc = {"apiVersion": "bench.crimson.ceph.io/v1alpha1", "kind": "BenchmarkRun",
           "metadata": {"name": name}, "spec": spec}  # fmt: skip
    path.write_text(yaml.safe_dump(doc))
    return path


class Run:
    """One `crimsonbench run` subprocess; its stdout+stderr collected line by line."""

    def __init__(self, spec_file: Path, results: Path, *args: str, **popen: Any) -> None:
        self.results = results
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(
            [*CLI, str(spec_file), "--results", str(results), *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen,
        )  # fmt: skip
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        with self._lock:
            return "\n".join(self.lines)

    def status(self) -> dict[str, Any]:
        try:
            return dict(json.loads((self.results / "status.json").read_text()))
        except (OSError, ValueError):
            return {}

    def wait_until(self, what: str, check: Callable[[], bool], timeout: float = 300) -> None:
        """Poll `check` until true; fails naming `what` if the run ends first or it times out."""
        deadline = time.monotonic() + timeout
        while not check():
            if self.proc.poll() is not None:
                raise AssertionError(f"the run ended ({self.proc.returncode}) before {what}:\n"
                                     f"{self.output[-3000:]}")  # fmt: skip
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} after {timeout:.0f} s:\n{self.output[-3000:]}")
            time.sleep(0.1)

    def stepping(self) -> bool:
        """A step is running (status.json names it)."""
        return bool(self.status().get("currentStep"))

    def said(self, text: str) -> bool:
        return text in self.output

    def finish(self, timeout: float = 300) -> int:
        rc = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return rc


def ours(marker: str) -> list[str]:
    """Processes whose command line names `marker` (a cluster or results directory)."""
    out = []
    for p in psutil.process_iter(["pid", "name", "cmdline"]):
        if p.info["pid"] == os.getpid():
            continue
        cmd = " ".join(p.info["cmdline"] or [])
        if marker in cmd:
            out.append(f"{p.info['pid']} {p.info['name']}: {cmd[:160]}")
    return out


def leftovers(root: Path, results: Path) -> list[str]:
    """Everything of a run's cluster still on the machine: processes (daemons, rbd, fio),
    loop devices, mounts, its directory's contents."""
    left = ours(str(root)) + ours(str(results / "steps"))
    loops = subprocess.run(["losetup", "--list", "--noheadings"], capture_output=True, text=True)
    left += [f"loop: {ln}" for ln in loops.stdout.splitlines() if str(root) in ln]
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    left += [f"mount: {ln}" for ln in mounts if str(root) in ln or str(results) in ln]
    if root.exists() and any(root.iterdir()):
        left.append(f"{root} holds {sorted(p.name for p in root.iterdir())}")
    return left


def clean_up(root: Path, results: Path) -> None:
    """Whatever a failing test left: its processes, loop devices and directory (so a test
    of the old code leaves the machine as it found it too)."""
    for line in ours(str(results / "steps")):
        pid = int(line.split()[0])
        if psutil.Process(pid).name() == "fio":
            psutil.Process(pid).kill()
    destroy(root)


def rbd_bench_images(root: Path) -> set[str]:
    """Images `rbd bench` writes right now for the cluster under root (the prefill)."""
    found = set()
    for p in psutil.process_iter(["name", "cmdline"]):
        cmd = p.info["cmdline"] or []
        if p.info["name"] == "rbd" and "bench" in cmd and str(root) in " ".join(cmd):
            match = re.search(r"/(fio_test_\d+)$", cmd[-1])
            if match:
                found.add(match.group(1))
    return found
