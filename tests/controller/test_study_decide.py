"""What a BenchmarkStudy does next (controller.decisions.study_decide), from the runs it plans
and the BenchmarkRuns it finds: runs one at a time in the interleaved order, a failed run is a
finding and the study goes on, a run of the same name that is not the study's is never
adopted; and the child run the operator creates (manifests.study)."""

from __future__ import annotations

import pytest

from crimsonbench.controller.decisions.study_decide import (
    ChildRun,
    CreateRun,
    Finish,
    Refuse,
    WaitFor,
    next_study_action,
    progress,
)
from crimsonbench.manifests.study import LABEL_STUDY, LABEL_VARIANT, child_run
from crimsonbench.plan.study import expand_study, study_runs
from crimsonbench.spec.models import validate_as
from crimsonbench.spec.study import BenchmarkStudySpec

UID = "3f0c2a4e-0000-4000-8000-000000000001"
BASE = {
    "target": {"rook": {"clusterName": "rook-ceph", "namespace": "rook-ceph"}},
    "osd": {"flavor": "classic", "objectStore": "bluestore"},
    "client": {"node": "node-a", "images": 2},
    "sweep": {"iodepths": [1, 4], "runtimeSeconds": 5},
}
SPEC = validate_as(BenchmarkStudySpec, {
    "base": BASE, "vary": [{"field": "client.images", "values": [1, 2]}], "repeats": 2,
})  # fmt: skip
VARIANTS = expand_study(SPEC)
RUNS = study_runs("st", VARIANTS, SPEC.repeats)


def child(name: str, phase: str, owner: str = UID) -> ChildRun:
    return ChildRun(name, owner, phase)


def test_the_first_run_is_created_first_and_then_waited_for() -> None:
    assert next_study_action(RUNS, {}, UID) == CreateRun(RUNS[0])
    going = {RUNS[0].name: child(RUNS[0].name, "Running")}
    assert next_study_action(RUNS, going, UID) == WaitFor(RUNS[0])
    fresh = {RUNS[0].name: child(RUNS[0].name, "")}  # its operator has not written yet
    assert next_study_action(RUNS, fresh, UID) == WaitFor(RUNS[0])


def test_runs_follow_the_interleaved_order_and_a_failed_one_does_not_stop_the_study() -> None:
    assert [r.name for r in RUNS] == ["st-images-1-r1", "st-images-2-r1",
                                      "st-images-1-r2", "st-images-2-r2"]  # fmt: skip
    done = {RUNS[0].name: child(RUNS[0].name, "Completed"),
            RUNS[1].name: child(RUNS[1].name, "Failed")}  # fmt: skip
    assert next_study_action(RUNS, done, UID) == CreateRun(RUNS[2])
    assert progress(RUNS, done, UID) == "2/4"
    everything = {**done, **{r.name: child(r.name, "Completed") for r in RUNS[2:]}}
    assert next_study_action(RUNS, everything, UID) == Finish((RUNS[1].name,))
    assert progress(RUNS, everything, UID) == "4/4"


@pytest.mark.parametrize("owner", ["", "another-uid"])
def test_a_run_of_the_same_name_that_is_not_the_studys_is_never_adopted(owner: str) -> None:
    theirs = {RUNS[0].name: child(RUNS[0].name, "Completed", owner)}
    action = next_study_action(RUNS, theirs, UID)
    assert isinstance(action, Refuse)
    assert f"a BenchmarkRun named {RUNS[0].name} exists and is not this study's" in action.message
    assert progress(RUNS, theirs, UID) == "0/4"


def test_the_child_run_is_the_variants_spec_owned_by_the_study() -> None:
    body = child_run("st", "bench", UID, RUNS[1], VARIANTS[1])
    meta = body["metadata"]
    assert meta["name"] == "st-images-2-r1" and meta["namespace"] == "bench"
    assert meta["labels"][LABEL_STUDY] == "st" and meta["labels"][LABEL_VARIANT] == "images-2"
    assert meta["ownerReferences"] == [{"apiVersion": "bench.crimson.ceph.io/v1alpha1",
                                        "kind": "BenchmarkStudy", "name": "st", "uid": UID,
                                        "controller": True}]  # fmt: skip
    assert body["spec"]["client"] == {"node": "node-a", "images": 2}  # as written, no defaults
    assert body["spec"]["osd"] == BASE["osd"]
