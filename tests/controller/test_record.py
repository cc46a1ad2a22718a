"""What the operator remembers of a run, as one typed record: loaded from the status,
changed field by field, written back as the diff alone."""

from __future__ import annotations

from typing import Any

import pytest

from crimsonbench.controller.record import RunRecord
from crimsonbench.manifests.cephcluster import apply_merge_patch
from crimsonbench.spec.status import Phase


def test_a_new_run_writes_only_what_its_tick_changed() -> None:
    rec = RunRecord.load({})
    first = rec.status_patch()
    assert set(first) == {"record"}  # the record, made once
    status = apply_merge_patch({}, first)
    rec = RunRecord.load(status)
    assert rec.status_patch() == {} and not rec.migrated
    rec.status.phase, rec.status.client_nodes = Phase.PREPARING, ["a"]
    rec.book.step_retries = {"s": ["why"]}
    assert rec.status_patch() == {"phase": "Preparing", "clientNodes": ["a"],
                                  "record": {"stepRetries": {"s": ["why"]}}}  # fmt: skip


def test_a_condition_keeps_its_transition_time_until_its_status_flips() -> None:
    planned = {"type": "Planned", "status": "True", "reason": "CpuPlanned", "message": "m",
               "lastTransitionTime": "2026-11-25T10:00:00Z"}  # fmt: skip
    rec = RunRecord.load({"stage": "steps", "conditions": [planned]})
    rec.condition("Planned", True, "CpuPlanned", "again")
    assert rec.conditions()["Planned"].last_transition_time == "2026-11-25T10:00:00Z"
    rec.condition("Planned", False, "Replanned", "no")
    assert rec.conditions()["Planned"].last_transition_time != "2026-11-25T10:00:00Z"
    assert [c.type for c in rec.status.conditions] == ["Planned"]


@pytest.mark.parametrize("name", ["rollout", "pool", "removal", "target"])
def test_a_bounded_wait_begins_once(name: Any) -> None:
    rec = RunRecord.load({})
    assert rec.waited(name, 1000.0) == 0.0
    assert rec.waited(name, 1061.5) == 61.5  # from its first look, not this one
    later = RunRecord.load(apply_merge_patch({}, rec.status_patch()))
    assert later.waited(name, 1100.0) == 100.0
