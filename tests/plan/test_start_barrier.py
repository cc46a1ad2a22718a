"""A step with several fio processes (one per client) starts every job at one wall-clock
instant (plan/fio_jobs.py): the planner decides the allowance, the job text carries the
instant, and the command fio runs before each job (exec_prerun) waits for it, as fio runs
it (`sh -c`, like system())."""

from __future__ import annotations

import configparser
import subprocess
import time
from pathlib import Path

import pytest

from crimsonbench.plan.build import build_plan
from crimsonbench.plan.fio_jobs import (
    BARRIER_BASE_S,
    BARRIER_PER_JOB_S,
    step_job_file,
    step_job_files,
)
from crimsonbench.plan.ini import FIO, IniError, render_ini
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.plan.types import RunPlan
from crimsonbench.spec.models import validate_spec

LSCPU = Path(__file__).parents[1] / "fixtures" / "lscpu" / "single-socket-8-noht.json"


def _plan(count: int, images: int = 5, processes: int = 2) -> RunPlan:
    spec = validate_spec({
        "target": {"local": {}}, "osd": {"flavor": "classic", "cpuSet": "6-7"},
        "client": {"images": images, "cpuSet": "0-3", "count": count,
                   "processesPerImage": processes},
        "workloads": [{"preset": "randread4k"}],
        "sweep": {"iodepths": [4], "runtimeSeconds": 3, "rampSeconds": 2},
    })  # fmt: skip
    return build_plan("barrier", spec, parse_lscpu_json(LSCPU.read_text()))


def _global(text: str) -> dict[str, str]:
    ini = configparser.ConfigParser(interpolation=None)
    ini.read_string(text)
    return dict(ini["global"])


def test_one_fio_process_starts_its_own_jobs_together_without_a_barrier() -> None:
    plan = _plan(count=1)
    assert plan.timing.start_barrier_s == 0
    assert plan.timing.deadline_s == 3 + 2 + 120  # runtime + ramp + grace
    (text,) = step_job_files(plan, plan.steps[0], 1764111222.5).values()
    assert "exec_prerun" not in _global(text)


def test_several_fio_processes_wait_for_one_instant_after_the_launch() -> None:
    plan = _plan(count=2)  # 5 images: 3 and 2 per client, x 2 processes
    biggest = max(len(c.images) for c in plan.clients) * 2
    assert plan.timing.start_barrier_s == pytest.approx(
        BARRIER_BASE_S + BARRIER_PER_JOB_S * biggest
    )
    # the step's deadline and its expected end include the wait
    assert plan.timing.deadline_s == 3 + 2 + 120 + 3  # ceil(2.6 s)
    assert plan.timing.fio_s == pytest.approx(plan.timing.start_barrier_s + 5)
    files = step_job_files(plan, plan.steps[0], 1764111222.5)
    assert sorted(files) == [c.name for c in plan.clients]
    instant = f"{1764111222.5 + plan.timing.start_barrier_s:.3f}"
    for text in files.values():
        prerun = _global(text)["exec_prerun"]
        assert instant in prerun and prerun.startswith("python3 -c ")
    # a client's file alone cannot be made without the instant
    with pytest.raises(ValueError, match="start instant"):
        step_job_file(plan, plan.steps[0], plan.clients[0])


def _run_prerun(prerun: str) -> float:
    """Run the command as fio's exec_string does (system(): sh -c, output to a file)."""
    subprocess.run(["sh", "-c", f"{prerun} > /dev/null 2>&1"], check=True, timeout=30)
    return time.time()


def test_the_command_waits_for_the_instant_and_passes_one_already_gone() -> None:
    plan = _plan(count=2)
    launched = time.time()
    text = step_job_files(plan, plan.steps[0], launched)[plan.clients[0].name]
    instant = launched + plan.timing.start_barrier_s
    assert _run_prerun(_global(text)["exec_prerun"]) >= instant
    late = step_job_files(plan, plan.steps[0], launched - 3600)[plan.clients[0].name]
    t0 = time.time()
    assert _run_prerun(_global(late)["exec_prerun"]) - t0 < plan.timing.start_barrier_s


@pytest.mark.parametrize("value", ["a;b", "a#b"])
def test_a_fio_value_fio_would_cut_at_a_comment_is_refused(value: str) -> None:
    # fio ends a value at ';' or '#' (parse.c strip_blank_end): the rest would be dropped
    with pytest.raises(IniError, match="may not contain"):
        render_ini({"global": {"filename": value}}, FIO)
