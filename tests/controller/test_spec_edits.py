"""A BenchmarkRun edited after it was planned: steps are kept by what they measure, so more
iodepths, repeats or workloads run too; an edit that changes what a step measures stops
the run, naming each field (stages.check_meaning, from the record alone: no cluster)."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from crimsonbench.controller.record import RunRecord
from crimsonbench.controller.run_context import RunContext
from crimsonbench.controller.settings import Settings
from crimsonbench.controller.stages import check_meaning
from crimsonbench.errors import InvalidSpec
from crimsonbench.spec.models import validate_spec

SPEC = json.loads((Path(__file__).resolve().parents[1] / "fixtures/driver/spec.json").read_text())


def ctx(planned: dict[str, Any], now: dict[str, Any], stage: str = "steps") -> RunContext:
    spec = validate_spec(planned).model_dump(mode="json", by_alias=True)
    status = {"stage": stage, "record": {"plannedSpec": json.dumps(spec, sort_keys=True)}}
    return RunContext("r", "ns", "uid", validate_spec(now), RunRecord.load(status), None,  # type: ignore[arg-type]
                      Settings(), logging.getLogger("t"))  # fmt: skip


def edited(**sweep: Any) -> dict[str, Any]:
    out = copy.deepcopy(SPEC)
    out["sweep"].update(sweep)
    return out


def test_the_spec_as_planned_and_more_steps_go_on() -> None:
    check_meaning(ctx(SPEC, SPEC))
    check_meaning(ctx(SPEC, edited(iodepths=[4, 16], repeats=2)))


def test_an_edit_that_changes_what_a_step_measures_stops_the_run_naming_it() -> None:
    with pytest.raises(InvalidSpec) as err:
        check_meaning(ctx(SPEC, edited(runtimeSeconds=30)))
    assert err.value.field == "spec"
    assert "spec.sweep.runtimeSeconds: 3 -> 30" in err.value.message
    assert "create a new BenchmarkRun" in err.value.message


@pytest.mark.parametrize("stage", ["lease", "observe", "restore", "done"])
def test_before_it_is_planned_and_once_it_restores_nothing_is_compared(stage: str) -> None:
    check_meaning(ctx(SPEC, edited(runtimeSeconds=30), stage=stage))
