"""The processes the harness starts and waits for: a component in its own process group
that dies with us (spawn), its readiness (wait_component), a command's output (run)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil


class NotReadyError(RuntimeError):
    """A component did not become ready in time (the message names it and shows its log)."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join(text.splitlines()[-lines:])


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class Component:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.proc.poll() is None

    def rss_bytes(self) -> int:
        try:
            return int(psutil.Process(self.proc.pid).memory_info().rss)
        except psutil.Error:
            return 0

    def stop(self, grace: float = 10.0) -> None:
        if self.proc.poll() is not None:
            self._reap_group()
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        self._reap_group()

    def _reap_group(self) -> None:
        # Anything the component forked shares its process group (it is the group leader).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)


def spawn(name: str, argv: list[str], workdir: Path) -> Component:
    """Start `argv` in its own process group, output in workdir/<name>.log; it dies with us."""
    log = workdir / f"{name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            start_new_session=True,  # own process group: killpg reaches all of it
            preexec_fn=_die_with_parent,
        )
    return Component(name, proc, log)


def wait_component(comp: Component, probe: Callable[[], Any], what: str, timeout: float) -> float:
    """Poll `probe` (truthy, or (ok, what it said)) while `comp` runs; the seconds it took.
    NotReadyError with the component's log tail when it exits or `timeout` passes."""
    t0, last = time.monotonic(), "no answer yet"
    while time.monotonic() < t0 + timeout:
        if not comp.alive():
            raise NotReadyError(f"{comp.name} exited with code {comp.proc.returncode} before {what}"
                                f"\n--- tail of {comp.log}:\n{tail(comp.log, 40)}")  # fmt: skip
        try:
            got = probe()
            ok, last = got if isinstance(got, tuple) else (bool(got), last)
        except Exception as exc:  # not up yet
            ok, last = False, f"{type(exc).__name__}: {exc}"
        if ok:
            return time.monotonic() - t0
        time.sleep(0.1)
    raise NotReadyError(f"{comp.name} is not ready after {timeout:.0f}s: {what} said {last!r}"
                        f"\n--- tail of {comp.log}:\n{tail(comp.log, 40)}")  # fmt: skip


def run(
    cmd: Sequence[str],
    env: dict[str, str],
    timeout: float,
    input: str | bytes | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """CMD's output; RuntimeError with its stderr's tail when it fails (unless not check)."""
    proc = subprocess.run(
        list(cmd),
        capture_output=True,
        text=True,
        env=env,
        input=input if not isinstance(input, bytes) else input.decode(),
        timeout=timeout,
        check=False,
    )
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd[:6])} failed (rc={proc.returncode}):\n"
            f"{proc.stderr[-3000:]}\n{proc.stdout[-1000:]}"
        )
    return proc
