"""What the operator remembers of a run, as one typed record: loaded from the status (and,
for a run an older operator started, from where that one kept things), changed field by
field, written back as the diff alone."""

from __future__ import annotations

import json
from typing import Any

import pytest

from crimsonbench.controller.record import LEGACY_ANNOTATIONS, LegacyMarks, RunRecord
from crimsonbench.manifests.cephcluster import apply_merge_patch
from crimsonbench.spec.status import Phase

G = "bench.crimson.ceph.io"
# the status an operator before the record left mid-run (its keys as it wrote them)
OLD_STATUS: dict[str, Any] = {
    "phase": "Running", "stage": "steps", "clientNodes": ["a"], "osdPlacement": {"0": "a"},
    "optionFamily": "legacy", "patchedGeneration": 3, "rolloutSince": 1700000000.0,
    "prefilled": True, "imagesCreated": True, "imagesRemoved": True,
    "conditions": [{"type": "Planned", "status": "True", "reason": "CpuPlanned",
                    "message": "m", "lastTransitionTime": "2026-11-25T10:00:00Z"}],
}  # fmt: skip
OLD_ANNOTATIONS = {
    f"{G}/step-retries": json.dumps({"003-randread4k-qd004-r1": ["osd.0 restarted"]}),
    f"{G}/osd-incarnations": json.dumps({"0": "uid-a/0"}),
    f"{G}/pool-wait-since": "1700000100.5",
    f"{G}/removal-wait-since": "1700000200.0",
    "kopf.zalando.org/last-handled-configuration": "{}",  # not ours: left alone
}
OLD_MARKS = LegacyMarks(
    run_record={f"{G}/images-removed": "failed", f"{G}/removal-wait-since": "1700000150.0"},
    saved_original={
        f"{G}/restore-started": "1700000300.0",
        f"{G}/config-cleaned": "done",
        f"{G}/crimson-osds-restarted": json.dumps({"since": 1700000400.0, "uids": ["p1"]}),
    },
)


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


def test_a_run_an_older_operator_started_is_moved_into_the_record() -> None:
    """Its annotations, its ConfigMaps' marks and its status fields, once; the annotations
    removed on the next tick, once the record holding them was written."""
    rec = RunRecord.load(OLD_STATUS, OLD_ANNOTATIONS, OLD_MARKS)
    assert rec.migrated and rec.stale_annotations == ()  # not before the record is written
    book = rec.book
    assert book.step_retries == {"003-randread4k-qd004-r1": ["osd.0 restarted"]}
    assert book.osd_incarnations == {"0": "uid-a/0"}
    assert (book.waits.rollout, book.waits.pool, book.waits.removal) == (
        1700000000.0, 1700000100.5, 1700000150.0)  # fmt: skip
    assert book.images_removed == "failed"  # the ConfigMap's word over imagesRemoved
    restore = book.restore
    assert (restore.started, restore.config_cleaned, restore.over) == (1700000300.0, "done", None)
    assert restore.osds_restarted is not None and restore.osds_restarted.uids == ["p1"]
    assert book.step_keys == "position"  # its fio driver holds steps by position
    assert rec.placement == {0: "a"} and rec.status.patched_generation == 3
    patch = rec.status_patch()
    assert patch["rolloutSince"] is None and patch["imagesRemoved"] is None  # moved in
    written = apply_merge_patch(OLD_STATUS, patch)
    assert "rolloutSince" not in written and written["record"]["stepKeys"] == "position"
    later = RunRecord.load(written, OLD_ANNOTATIONS)
    assert not later.migrated and later.status_patch() == {}
    assert later.stale_annotations == LEGACY_ANNOTATIONS  # now they go
    assert later.book.step_retries == book.step_retries  # the record's word, not theirs


def test_only_a_run_that_started_something_looks_for_an_older_operators_marks() -> None:
    assert RunRecord.needs_legacy_marks(OLD_STATUS)
    assert not RunRecord.needs_legacy_marks({"stage": "lease"})
    assert not RunRecord.needs_legacy_marks({**OLD_STATUS, "record": {}})
    # a run waiting for its lease, or new: its fio driver keys steps by content
    assert RunRecord.load({"stage": "lease"}).book.step_keys == "content"


def test_a_condition_keeps_its_transition_time_until_its_status_flips() -> None:
    rec = RunRecord.load(OLD_STATUS)
    rec.condition("Planned", True, "CpuPlanned", "again")
    assert rec.conditions()["Planned"].last_transition_time == "2026-11-25T10:00:00Z"
    rec.condition("Planned", False, "Replanned", "no")
    assert rec.conditions()["Planned"].last_transition_time != "2026-11-25T10:00:00Z"
    assert [c.type for c in rec.status.conditions] == ["Planned"]


@pytest.mark.parametrize("name", ["rollout", "pool", "removal"])
def test_a_bounded_wait_begins_once(name: Any) -> None:
    rec = RunRecord.load({})
    assert rec.waited(name, 1000.0) == 0.0
    assert rec.waited(name, 1061.5) == 61.5  # from its first look, not this one
    later = RunRecord.load(apply_merge_patch({}, rec.status_patch()))
    assert later.waited(name, 1100.0) == 100.0
