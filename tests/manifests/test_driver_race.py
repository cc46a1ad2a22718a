"""The fio driver under polls that never stop: hundreds of polls, by several pollers at
once, while many steps start, run and end (the real script, real fio with its null engine,
no fio server needed). Every reply must be one the operator parses; a step is `missing`,
then `running` (its `started` 0 until it has begun), then `done`, never back: a poll that
returned before another began never saw a later state than it (the reply's `now` cannot
order concurrent polls: a poller descheduled between its `date` and its look at the
directory reports an earlier `now` for a later state).

The window is held open on purpose: `date`, when the step's own shell (`fio-driver.sh run`)
calls it, waits at a gate the test opens, as a descheduled process on a busy node would
stop there. The script that wrote `date > started` in place had made that file, empty,
before `date` ran: a poll in the window answered `"started":}`, the operator read a
ParseError and failed the run (issue 35: twice in one cold `make test`). Each step is
polled while its writer is held at the gate, so the old script fails every time."""

from __future__ import annotations

import bisect
import itertools
import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from crimsonbench.errors import ParseError
from crimsonbench.manifests import fio_driver

SCRIPT = Path(fio_driver.__file__).with_name(fio_driver.SCRIPT_NAME)
LOCAL_NULL_JOB = """\
[global]
ioengine=null
size=16m
time_based=1
runtime=1
[null]
rw=randread
bs=4k
"""
# the step's writer held until the test opens the gate (at most 10 s: never a hang)
GATED_DATE = """\
#!/bin/sh
case "$(tr '\\0' ' ' < /proc/$PPID/cmdline)" in
  *" run "*)
    touch "{gates}/held.$PPID"
    i=0
    while [ ! -e "{gates}/open" ] && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done ;;
esac
exec {date} "$@"
"""
STEPS = 8
POLLERS = 3
ORDER = {"missing": 0, "running": 1, "done": 2}


@dataclass(frozen=True)
class Poll:
    began: float  # the test's monotonic clock, around the whole exec
    returned: float
    report: fio_driver.StepReport


def went_back(polls: list[Poll]) -> list[tuple[str, str]]:
    """(earlier state, later state) of polls that were not concurrent, where the later poll
    saw an earlier state."""
    by_return = sorted(polls, key=lambda p: p.returned)
    ends = [p.returned for p in by_return]
    highest = list(itertools.accumulate((ORDER[p.report.state] for p in by_return), max))
    names = {v: k for k, v in ORDER.items()}
    back = []
    for q in polls:
        n = bisect.bisect_left(ends, q.began)  # polls that returned before q began
        if n and highest[n - 1] > ORDER[q.report.state]:
            back.append((names[highest[n - 1]], q.report.state))
    return back


def test_went_back_orders_only_polls_that_did_not_overlap() -> None:
    def poll(began: float, returned: float, state: str) -> Poll:
        return Poll(began, returned, fio_driver.StepReport(state=state, now=began))

    overlapping = [poll(0, 3, "running"), poll(1, 2, "missing"), poll(4, 5, "done")]
    assert went_back(overlapping) == []
    assert went_back([poll(0, 1, "running"), poll(2, 3, "missing")]) == [("running", "missing")]


@pytest.fixture()
def gated(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """(an environment whose `date` waits at the gate in the step's shell, the gates)."""
    shims, gates = tmp_path / "bin", tmp_path / "gates"
    shims.mkdir()
    gates.mkdir()
    real = shutil.which("date")
    assert real
    (shims / "date").write_text(GATED_DATE.format(gates=gates, date=real))
    (shims / "date").chmod(0o755)
    return {**os.environ, "PATH": f"{shims}:{os.environ['PATH']}"}, gates


def _sh(argv: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, f"{argv[:4]}: {proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _poll(root: Path, key: str, env: dict[str, str]) -> fio_driver.StepReport:
    argv = fio_driver.poll_command(key, root=str(root), via=("sh", str(SCRIPT)))
    return fio_driver.parse_report(_sh(argv, env))


def test_polls_during_many_starts_and_ends_always_parse(
    tmp_path: Path, gated: tuple[dict[str, str], Path]
) -> None:
    if not shutil.which("fio"):
        pytest.fail("fio is not installed: scripts/setup.sh installs it")
    env, gates = gated
    root = tmp_path / "steps"
    keys = [f"randread4k-qd{i:03d}-r1" for i in range(STEPS)]
    replies: list[tuple[str, Poll]] = []
    errors: list[str] = []
    stop = threading.Event()

    def poller() -> None:  # every step, without pause, while steps start and end
        while not stop.is_set():
            for key in keys:
                began = time.monotonic()
                try:
                    report = _poll(root, key, env)
                    replies.append((key, Poll(began, time.monotonic(), report)))
                except ParseError as exc:
                    errors.append(f"{key}: {exc}")

    threads = [threading.Thread(target=poller) for _ in range(POLLERS)]
    for t in threads:
        t.start()
    held: list[fio_driver.StepReport] = []
    try:
        for key in keys:
            (gates / "open").unlink(missing_ok=True)
            start = ["sh", str(SCRIPT), "start", str(root), key, "60", "1",
                     "step.fio", LOCAL_NULL_JOB, "step.fio"]  # fmt: skip
            assert '"started"' in _sh(start, env)
            deadline = time.monotonic() + 30
            while not list(gates.glob("held.*")):  # the step's writer is at the gate now
                assert time.monotonic() < deadline, "the step's shell never called date"
                time.sleep(0.02)
            for _ in range(3):  # polls inside the window, for certain
                try:
                    held.append(_poll(root, key, env))
                except ParseError as exc:
                    errors.append(f"{key} (held): {exc}")
            for marker in gates.glob("held.*"):
                marker.unlink()
            (gates / "open").touch()
        deadline = time.monotonic() + 120
        while not all((root / k / "rc").exists() for k in keys):
            assert time.monotonic() < deadline, "steps did not end in 120 s"
            time.sleep(0.2)
        time.sleep(0.5)  # polls of the finished steps
    finally:
        (gates / "open").touch()
        stop.set()
        for t in threads:
            t.join(timeout=120)

    assert not errors, f"{len(errors)} of {len(replies) + len(held) + len(errors)} polls: " + (
        f"{errors[:3]}"
    )
    # inside the window: "not yet", never a protocol error
    assert held and all(r.state == "running" and r.started == 0 for r in held), held
    assert len(replies) >= 100, f"only {len(replies)} polls: the test proves little"
    by_key: dict[str, list[Poll]] = {k: [] for k in keys}
    for key, p in replies:
        by_key[key].append(p)
    for key, polls in by_key.items():
        back = went_back(polls)
        assert not back, f"{key} went back: {back}"
        done = [p.report for p in polls if p.report.state == "done"]
        assert done and all(r.rc == 0 and r.started > 0 and r.ended >= r.started for r in done)
