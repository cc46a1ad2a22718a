"""Which step runs next, on real response curves: the captured rbd sweep (3 repeats x 7
iodepths, tests/fixtures/fio/jsonplus/sweep) replayed through SweepState as an executor
would run it, full sweep and knee search."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from crimsonbench.plan.build import build_plan
from crimsonbench.plan.knee_search import Observation, full_sweep_knee
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.results.fio_json import combine, parse_fio_json
from crimsonbench.results.rules import average_repeats, should_stop
from crimsonbench.results.sweep_state import SweepState
from crimsonbench.results.types import ResourceSummary, StepResult
from crimsonbench.spec.models import validate_spec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SWEEP = FIXTURES / "fio" / "jsonplus" / "sweep"
TOPO = parse_lscpu_json((FIXTURES / "lscpu" / "adjacent-2s-8c-ht.json").read_text())
DEPTHS = [1, 2, 4, 8, 16, 32, 64]


def measured(repeat: int, qd: int) -> StepResult:
    docs = sorted(SWEEP.glob(f"randread-r{repeat}-qd{qd}-p*.json"))
    fio = combine([j for d in docs for j in parse_fio_json(d.read_text())])
    return StepResult("", "randread4k", qd, repeat, fio, ResourceSummary(0, 0, 0, 0))


def averaged(repeat: int, qd: int) -> StepResult:
    """The mean of the 3 captured repeats at qd: the same real curve, less of this noisy
    machine's jitter (one repeat's qd2 is slower than its qd1)."""
    (row,) = average_repeats(measured(r, qd) for r in (1, 2, 3))
    return replace(row, repeat=repeat)


def plan(**sweep: object) -> object:
    spec = validate_spec(
        {
            "target": {"local": {}},
            "osd": {"flavor": "classic", "cpuSet": "0-7"},
            "client": {"cpuSet": "8-15"},
            "workloads": [{"preset": "randread4k"}],
            "sweep": {"iodepths": DEPTHS, "repeats": 3, **sweep},
        }
    )
    return build_plan("s", spec, TOPO)


def run(p: object, curve: Any = measured) -> list[str]:
    """Drive SweepState like an executor; 'running' a step returns its captured result."""
    state = SweepState(p.sweep, {}, p.bandwidth_workloads)  # type: ignore[attr-defined]
    ran = []
    while (step := state.next_step(p.steps)) is not None:  # type: ignore[attr-defined]
        result = replace(curve(step.repeat, step.iodepth), step_id=step.id)
        state.record(step, result)
        ran.append(step.id)
        assert len(ran) <= len(p.steps)  # type: ignore[attr-defined]
    return ran


def test_a_full_sweep_runs_every_step_in_plan_order() -> None:
    p = plan()
    assert run(p) == [s.id for s in p.steps]  # type: ignore[attr-defined]


@pytest.mark.parametrize("limit", [1.0, 2.0, 4.0, 8.0])
def test_knee_search_runs_fewer_steps_and_finds_the_full_sweeps_knee(limit: float) -> None:
    p = plan(kneeSearch={"latencyMs": limit, "metric": "mean"}, repeats=1)
    ran = run(p, averaged)
    assert len(ran) < len(p.steps)  # type: ignore[attr-defined]
    state = SweepState(p.sweep, {}, p.bandwidth_workloads)  # type: ignore[attr-defined]
    for s in p.steps:  # type: ignore[attr-defined]
        if s.id in ran:
            state.record(s, replace(averaged(s.repeat, s.iodepth), step_id=s.id))
    decision = state.knee(p.steps, "randread4k", 1)  # type: ignore[attr-defined]
    assert decision.done
    curve = {qd: averaged(1, qd).fio for qd in DEPTHS}
    full = full_sweep_knee(
        {qd: Observation(f.iops, f.clat_mean_ms) for qd, f in curve.items()}, limit
    )
    assert full is not None and decision.knee_iodepth is not None
    # within one step of the iodepth list of what the full sweep concludes
    assert abs(DEPTHS.index(full) - DEPTHS.index(decision.knee_iodepth)) <= 1, decision


def test_a_restarted_executor_continues_the_knee_search_exactly() -> None:
    p = plan(kneeSearch={"latencyMs": 2.0, "metric": "mean"})
    ran = run(p)
    half = {
        s.id: replace(measured(s.repeat, s.iodepth), step_id=s.id)
        for s in p.steps  # type: ignore[attr-defined]
        if s.id in ran[: len(ran) // 2]
    }
    state = SweepState(p.sweep, half, p.bandwidth_workloads)  # type: ignore[attr-defined]
    rest = []
    while (step := state.next_step(p.steps)) is not None:  # type: ignore[attr-defined]
        state.record(step, replace(measured(step.repeat, step.iodepth), step_id=step.id))
        rest.append(step.id)
    assert ran[: len(ran) // 2] + rest == ran


def test_early_exit_stops_a_repeat_and_skips_its_deeper_steps() -> None:
    p = plan(earlyExit={"enabled": True, "meanLatencyMsLimit": 1.0})
    ran = run(p)
    state = SweepState(p.sweep, {}, p.bandwidth_workloads)  # type: ignore[attr-defined]
    for s in p.steps:  # type: ignore[attr-defined]
        if s.id in ran:
            state.record(s, replace(measured(s.repeat, s.iodepth), step_id=s.id))
    skipped = [s for s in p.steps if s.id not in ran]  # type: ignore[attr-defined]
    assert skipped and all("stopped early" in (state.skip_reason(s) or "") for s in skipped)
    # every repeat ran up to its first step that meets the rule (tail or mean), then stopped
    for repeat in (1, 2, 3):
        mine = [s for s in p.steps if s.repeat == repeat and s.id in ran]  # type: ignore[attr-defined]
        stops = [should_stop(measured(repeat, s.iodepth).fio, 0.5, 1.0) for s in mine]
        assert stops[-1] is not None and all(reason is None for reason in stops[:-1])
