"""Resume by content: a stored step is kept when the spec would measure what it measured.
What a step measures is its key (workload, iodepth, repeat) plus the spec's meaning;
sweeping more (iodepths, repeats, workloads) or with other stopping rules is not a change
of meaning, anything else is, named field by field."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest
from step_results import result

from crimsonbench.errors import InvalidSpec
from crimsonbench.plan.meaning import meaning_changes
from crimsonbench.plan.types import Step, step_key
from crimsonbench.results.sweep_state import SweepState
from crimsonbench.spec.models import validate_spec

SPEC: dict[str, Any] = {
    "target": {"local": {}},
    "osd": {"flavor": "classic", "objectStore": "memstore", "count": 1, "cpuSet": "0"},
    "client": {"cpuSet": "1", "images": 1, "imageSize": "64Mi"},
    "workloads": [{"preset": "randread4k"}, {"name": "mine", "rw": "randwrite", "bs": "16k"}],
    "sweep": {"iodepths": [1, 4], "runtimeSeconds": 3},
}


def changed(**paths: Any) -> dict[str, Any]:
    """SPEC with "a.b.c"-style paths (dots as __) set."""
    out = copy.deepcopy(SPEC)
    for path, value in paths.items():
        *parents, last = path.split("__")
        node = out
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
        node[last] = value
    return out


def test_a_step_is_keyed_by_what_it_measures_not_by_where_it_stands() -> None:
    first, moved = Step(0, "randread4k", 16, 1), Step(7, "randread4k", 16, 1)
    assert first.id == moved.id == step_key("randread4k", 16, 1) == "randread4k-qd016-r1"
    # a result an older version wrote (its position first) matches by content
    assert result(3, "randread4k", 16, 1000.0).key == first.id


@pytest.mark.parametrize(
    "other",
    [
        changed(sweep__iodepths=[1, 4, 16]),  # one more iodepth
        changed(sweep__iodepths=[4]),  # one fewer: the stored qd1 stays a measurement
        changed(sweep__repeats=3),
        changed(sweep__earlyExit={"enabled": False}),
        changed(sweep__latencyTarget={"percentile": 99, "latencyMs": 2.0}),
        {**SPEC, "workloads": [*SPEC["workloads"], {"preset": "seqread64k"}]},
        {**SPEC, "workloads": SPEC["workloads"][::-1]},  # another order
    ],
)
def test_sweeping_more_or_stopping_otherwise_keeps_the_meaning(other: dict[str, Any]) -> None:
    assert meaning_changes(SPEC, other) == []


@pytest.mark.parametrize(
    ("other", "named"),
    [
        (changed(osd__objectStore="bluestore"),
         'spec.osd.objectStore: "memstore" -> "bluestore"'),
        (changed(sweep__runtimeSeconds=10), "spec.sweep.runtimeSeconds: 3 -> 10"),
        (changed(sweep__rampSeconds=0), "spec.sweep.rampSeconds: 10 -> 0"),
        (changed(client__images=2), "spec.client.images: 1 -> 2"),
        (changed(workloads__1__bs="64k"), 'spec.workloads[mine].bs: "16k" -> "64k"'),
        (changed(workloads__1__options={"rwmixread": "70"}),
         'spec.workloads[mine].options.rwmixread: unset -> "70"'),
    ],
)  # fmt: skip
def test_a_change_of_what_a_step_measures_is_named(other: dict[str, Any], named: str) -> None:
    assert meaning_changes(SPEC, other) == [named]


def test_an_older_spec_file_without_todays_defaults_has_the_same_meaning() -> None:
    written = validate_spec(SPEC).model_dump(mode="json", by_alias=True)
    assert written != SPEC and meaning_changes(written, SPEC) == []


def test_a_stored_spec_that_no_longer_reads_is_a_change_saying_why() -> None:
    with pytest.raises(InvalidSpec, match="the stored spec cannot be read as a spec today"):
        meaning_changes({**SPEC, "retired": 1}, SPEC)


# ---------------------------------------------------------------- the sweep on resume


def plan_steps(iodepths: list[int]) -> list[Step]:
    return [Step(i, "randread4k", qd, 1) for i, qd in enumerate(iodepths)]


def test_results_under_positional_ids_are_found_by_content() -> None:
    sweep = validate_spec(changed(sweep__iodepths=[1, 4, 16])).sweep
    old = [result(0, "randread4k", 1, 1000.0), result(1, "randread4k", 4, 2000.0)]
    assert old[0].step_id == "0000-randread4k-qd001-r1"
    state = SweepState(sweep, {r.step_id: r for r in old})
    steps = plan_steps([1, 4, 16])
    assert [s.id for s in steps if state.skip_reason(s) is None] == ["randread4k-qd016-r1"]
    assert state.next_step(steps) == steps[2]


def test_an_iodepth_added_before_an_early_stop_runs_and_the_ones_after_do_not() -> None:
    """The sweep stopped at qd16 (the mean latency limit); qd8, listed before it, runs
    when added; qd32, after it, is skipped as it would have been."""
    spec = changed(sweep__iodepths=[1, 8, 16, 32],
                   sweep__earlyExit={"enabled": True, "meanLatencyMsLimit": 3.0})  # fmt: skip
    sweep = validate_spec(spec).sweep
    stopped = [result(0, "randread4k", 1, 1000.0), result(1, "randread4k", 16, 9000.0)]
    assert stopped[1].fio.clat_mean_ms > 3.0 > stopped[0].fio.clat_mean_ms
    state = SweepState(sweep, stopped)
    steps = plan_steps([1, 8, 16, 32])
    assert state.skip_reason(steps[1]) is None and state.next_step(steps) == steps[1]
    assert "stopped early" in (state.skip_reason(steps[3]) or "")
    state.record(steps[1], replace(result(2, "randread4k", 8, 5000.0), step_id=steps[1].id))
    assert state.next_step(steps) is None
