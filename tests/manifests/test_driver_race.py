"""The fio driver under polls that never stop: hundreds of polls, by several pollers at
once, while many steps start, run and end (the real script, real fio with its null engine,
no fio server needed). Every reply must be one the operator parses; a step is `missing`,
then `running` (its `started` 0 until it has begun), then `done`, never back.

The writer is slowed where it matters: `date` here takes 0.15 s when the step's own shell
(`fio-driver.sh run`) calls it, what a descheduled process on a busy node does. The script
that wrote `date > started` in place answered `"started":}` to a poll in that window; the
operator read a ParseError and failed the run (issue 35: twice in one cold `make test`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

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
SLOW_DATE = """\
#!/bin/sh
# the step's writer descheduled (`date > started` had made its file, empty, by then)
case "$(tr '\\0' ' ' < /proc/$PPID/cmdline)" in *" run "*) sleep 0.15 ;; esac
exec {date} "$@"
"""
STEPS = 12
POLLERS = 4
ORDER = {"missing": 0, "running": 1, "done": 2}


@pytest.fixture()
def slow_writer_env(tmp_path: Path) -> dict[str, str]:
    shims = tmp_path / "bin"
    shims.mkdir()
    real = shutil.which("date")
    assert real
    (shims / "date").write_text(SLOW_DATE.format(date=real))
    (shims / "date").chmod(0o755)
    return {**os.environ, "PATH": f"{shims}:{os.environ['PATH']}"}


def _sh(argv: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, f"{argv[:4]}: {proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_polls_during_many_starts_and_ends_always_parse(
    tmp_path: Path, slow_writer_env: dict[str, str]
) -> None:
    if not shutil.which("fio"):
        pytest.fail("fio is not installed: scripts/setup.sh installs it")
    root = tmp_path / "steps"
    keys = [f"randread4k-qd{i:03d}-r1" for i in range(STEPS)]
    replies: list[tuple[str, fio_driver.StepReport]] = []
    errors: list[str] = []
    stop = threading.Event()

    def poller(n: int) -> None:
        while not stop.is_set():
            for key in keys[n::POLLERS] + keys:  # its own steps often, every step sometimes
                argv = fio_driver.poll_command(key, root=str(root), via=("sh", str(SCRIPT)))
                text = _sh(argv, slow_writer_env)
                try:
                    replies.append((key, fio_driver.parse_report(text)))
                except Exception as exc:  # noqa: BLE001 - every failure is the verdict
                    errors.append(f"{key}: {exc}")
                if stop.is_set():
                    return

    threads = [threading.Thread(target=poller, args=(n,)) for n in range(POLLERS)]
    for t in threads:
        t.start()
    try:
        for i, key in enumerate(keys):
            start = [
                "sh", str(SCRIPT), "start", str(root), key, "60", "1",
                "step.fio", LOCAL_NULL_JOB, "step.fio",
            ]  # fmt: skip
            assert '"started"' in _sh(start, slow_writer_env)
            if i % 3 == 2:  # some steps end while others start: wait for this one's end
                _sh(fio_driver.poll_command(key, wait_s=30, root=str(root),
                                            via=("sh", str(SCRIPT))), slow_writer_env)  # fmt: skip
        deadline = time.monotonic() + 120
        while not all((root / k / "rc").exists() for k in keys):
            assert time.monotonic() < deadline, "steps did not end in 120 s"
            time.sleep(0.2)
        time.sleep(0.5)  # polls of the finished steps
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)

    assert not errors, f"{len(errors)} of {len(replies) + len(errors)} polls: {errors[:3]}"
    assert len(replies) >= 300, f"only {len(replies)} polls: the test proves little"
    by_key: dict[str, list[fio_driver.StepReport]] = {k: [] for k in keys}
    for key, report in replies:
        by_key[key].append(report)
    for key, reports in by_key.items():
        reports.sort(key=lambda r: r.now)
        states = [ORDER[r.state] for r in reports]
        assert states == sorted(states), f"{key} went back: {[r.state for r in reports]}"
        assert {r.state for r in reports} >= {"running", "done"}, key
        done = [r for r in reports if r.state == "done"]
        assert all(r.rc == 0 and r.started > 0 and r.ended >= r.started for r in done), key
    mid_write = [r for rs in by_key.values() for r in rs if r.state == "running" and not r.started]
    # the slow writer's window was seen: the test did reach the race it is about
    assert mid_write, "no poll landed between a step's start and its `started`"
