"""tests/helpers/quiet.py: the tests that judge interference pause make test's background
prefetch, all of it: its session and every descendant that made a session of its own (a
container's processes do), and let it go on afterwards."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from quiet import PREFETCH_PGID, prefetch_paused

# a session leader whose child leaves the session (as runc's container process does); both
# spin, and the leader prints both pids
TREE = """
import os, sys, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    os.write(w, str(os.getpid()).encode())
    while True:
        pass
child = int(os.read(r, 32))
print(os.getpid(), child, flush=True)
while True:
    time.sleep(0.01)
"""


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _wait(pids: list[int], stopped: bool) -> list[str]:
    """The processes' states once all are stopped (T) or none is, or after 10 s."""
    deadline = time.monotonic() + 10
    while (("T" in (states := [_state(p) for p in pids])) != stopped or
           (stopped and set(states) != {"T"})) and time.monotonic() < deadline:  # fmt: skip
        time.sleep(0.05)
    return states


def test_the_prefetch_and_what_left_its_session_are_paused_then_go_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert proc.stdout is not None
    leader, child = map(int, proc.stdout.readline().split())
    try:
        assert os.getsid(child) == child != leader == os.getsid(leader)
        monkeypatch.setenv(PREFETCH_PGID, str(leader))
        with prefetch_paused() as paused:
            assert paused == 2
            assert _wait([leader, child], stopped=True) == ["T", "T"]
        assert "T" not in _wait([leader, child], stopped=False)
    finally:
        for pid in (child, leader):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=10)
