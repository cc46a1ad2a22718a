"""A BenchmarkRun edited after it was planned (plan.meaning.effective_spec): steps are kept
by what they measure, so more iodepths, repeats or workloads run too; an edit that changes
what a step measures, or that no longer validates, is refused and the run goes on with the
spec it was planned with (to its restore), never without one when it can be had. From the
record alone: no cluster."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from crimsonbench.plan.meaning import effective_spec
from crimsonbench.spec.models import validate_spec

SPEC = json.loads((Path(__file__).resolve().parents[1] / "fixtures/driver/spec.json").read_text())
PLANNED = json.dumps(validate_spec(SPEC).model_dump(mode="json", by_alias=True), sort_keys=True)


def edited(section: str = "sweep", **fields: Any) -> dict[str, Any]:
    out = copy.deepcopy(SPEC)
    out[section].update(fields)
    return out


def test_before_it_is_planned_the_spec_as_it_is_now() -> None:
    spec, refused = effective_spec(edited(runtimeSeconds=30), "")
    assert refused is None and spec is not None and spec.sweep.runtime_seconds == 30


def test_the_spec_as_planned_and_more_steps_go_on() -> None:
    for now in (SPEC, edited(iodepths=[4, 16], repeats=2)):
        spec, refused = effective_spec(now, PLANNED)
        assert refused is None and spec == validate_spec(now)


def test_an_edit_that_changes_what_a_step_measures_is_refused_naming_it() -> None:
    spec, refused = effective_spec(edited(runtimeSeconds=30), PLANNED)
    assert refused is not None and refused.field == "spec"
    assert "spec.sweep.runtimeSeconds: 3 -> 30" in refused.message
    assert "create a new BenchmarkRun" in refused.message
    assert spec == validate_spec(SPEC)  # the run goes on, to its restore, as planned


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [("client", "cpuSet", "9-8"), ("osd", "cpuSet", "0-1"), ("client", "images", 0)],
)
def test_an_edit_the_crd_admits_and_python_refuses_never_skips_the_restore(
    section: str, field: str, value: Any
) -> None:
    """issue 36 #1: such an edit used to fail the run with nothing restored."""
    spec, refused = effective_spec(edited(section, **{field: value}), PLANNED)
    assert refused is not None and "no longer validates" in refused.message
    assert spec == validate_spec(SPEC)  # the planned spec: the run can still be restored


def test_a_planned_spec_this_operator_refuses_leaves_the_record_alone() -> None:
    """An operator upgrade that adds a stricter rule: no spec at all, only the cleanup."""
    broken = json.dumps({**json.loads(PLANNED), "osd": {"flavor": "classic", "count": 0}})
    spec, refused = effective_spec(SPEC, broken)
    assert spec is None and refused is not None
    assert "restores the cluster from its record" in refused.message
