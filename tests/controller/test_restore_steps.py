"""The restore's decisions, without a cluster: from what it observed (the run's undo
record, its marks, the CephCluster, Rook's OSD pods, the clock) to the actions it takes,
in the order that keeps the cluster safe. restore.restore_cluster carries them out against
the real API (tests/k8s, tests/kind)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from crimsonbench.controller.decisions.observed import OsdPod
from crimsonbench.controller.decisions.restore_steps import (
    PATCHED_BY,
    UNDO_DIGEST,
    CleanConfig,
    Condition,
    Mark,
    PatchSpec,
    Refuse,
    Release,
    RestartOsds,
    RestoreView,
    foreign_patch,
    next_actions,
    trusted_changes,
)
from crimsonbench.errors import NotReady
from crimsonbench.manifests.cephcluster import apply_merge_patch
from crimsonbench.manifests.cephcluster_undo import Change, changes_digest, spec_changes
from crimsonbench.spec.status import OsdsRestarted, RestoreMarks

NOW = 1_800_000_000.0
ORIGINAL: dict[str, Any] = {
    "cephVersion": {"image": "quay.io/ceph/ceph:v18.2.7"},
    "resources": {"osd": {"limits": {"cpu": "4", "memory": "8Gi"}}},
    "cephConfig": {"global": {"osd_pool_default_size": "3"}},
}
# what a run's patch leaves: the reactor layout per OSD and Guaranteed OSD resources
PATCHED: dict[str, Any] = {
    **ORIGINAL,
    "resources": {
        "osd": {"limits": {"cpu": "2", "memory": "4Gi"}, "requests": {"cpu": "2", "memory": "4Gi"}}
    },  # fmt: skip
    "cephConfig": {**ORIGINAL["cephConfig"], "osd.0": {"crimson_seastar_cpu_cores": "0-1"}},
}
CHANGES = tuple(spec_changes(ORIGINAL, PATCHED))  # the run's undo record of its patch


def osd(osd_id: int, uid: str, cpu: str = "4", mem: str = "8Gi", **kw: Any) -> OsdPod:
    return OsdPod(osd_id, "node-a", kw.pop("ready", True), cpu, mem, uid=uid,
                  name=f"rook-ceph-osd-{osd_id}-{uid}", **kw)  # fmt: skip


ROLLED_BACK = (osd(0, "a"), osd(1, "b"))


def view(**kw: Any) -> RestoreView:
    base: dict[str, Any] = dict(changes=CHANGES, cluster_spec=ORIGINAL, marks=RestoreMarks(),
                                placement=[0], pods=ROLLED_BACK, now=NOW, timeout_s=600,
                                crimson=False)  # fmt: skip
    return RestoreView(**{**base, **kw})


def test_first_tick_puts_the_spec_back_exactly_and_waits_for_rook() -> None:
    rolling = (osd(0, "a", cpu="2", mem="4Gi"), osd(1, "b", cpu="2", mem="4Gi"))
    actions = next_actions(view(cluster_spec=PATCHED, pods=rolling))
    patch = actions[0]
    assert isinstance(patch, PatchSpec)
    assert apply_merge_patch(PATCHED, patch.patch) == ORIGINAL  # byte for byte, keys removed
    assert actions[1] == Mark(RestoreMarks(started=NOW))
    assert actions[2] == Condition("RolledBack", False, "RollingBack", str(actions[3]))
    assert isinstance(actions[3], NotReady) and "osd.0 still has limits cpu=2" in str(actions[3])
    assert len(actions) == 4  # no `config rm` while Rook could still apply the run's keys


def test_config_rm_only_once_every_osd_runs_the_original_again() -> None:
    started = RestoreMarks(started=NOW - 42)
    # osd.1 is not the run's, but Rook sizes all OSDs alike: it is waited for too
    half = (osd(0, "a"), osd(1, "b", cpu="2", mem="4Gi"))
    waiting = next_actions(view(marks=started, pods=half))
    assert isinstance(waiting[-1], NotReady) and "osd.1" in str(waiting[-1])
    assert not any(isinstance(a, CleanConfig) for a in waiting)
    back = next_actions(view(marks=started))
    assert back == [
        Condition(
            "RolledBack",
            True,
            "OsdsRestored",
            "2 OSDs Ready with limits cpu=4 memory=8Gi after 42 s",
        ),  # fmt: skip
        CleanConfig(),
    ]


def test_a_rollback_rook_never_finishes_is_given_up_and_the_config_cleaned_anyway() -> None:
    stuck = (osd(0, "a", ready=False), osd(1, "b"))
    late = next_actions(view(marks=RestoreMarks(started=NOW - 601), pods=stuck))
    assert late[0].reason == "RollbackTimeout"  # type: ignore[union-attr]
    assert "gave up waiting" in late[0].message  # type: ignore[union-attr]
    assert late[-1] == CleanConfig()


def test_after_config_rm_a_classic_restore_is_over_with_its_outcome() -> None:
    marks = RestoreMarks(started=NOW - 60, config_cleaned="failed: ceph config rm osd.0 x")
    # the spec and the rollback are not looked at again once `config rm` ran
    actions = next_actions(view(marks=marks, cluster_spec=PATCHED))
    over = marks.model_copy(update={"over": "failed: ceph config rm osd.0 x"})
    assert actions == [Mark(over), Release()]


def test_crimson_osds_restart_after_config_rm_then_the_restore_is_over() -> None:
    marks = RestoreMarks(started=NOW - 60, config_cleaned="done")
    first = next_actions(view(marks=marks, crimson=True))
    restart, record, wait = first[-3:]
    # only the planned OSD restarts; osd.1 is not the run's
    assert restart == RestartOsds((osd(0, "a"),), "after the restore, so it runs without "
                                  "the run's layout")  # fmt: skip
    restarted = OsdsRestarted(since=NOW, uids=["a"])
    assert record == Mark(marks.model_copy(update={"osds_restarted": restarted}))
    assert isinstance(wait, NotReady) and "restarting osd.0" in str(wait)
    marks = record.marks  # type: ignore[union-attr]
    # the old pod going away: never deleted twice, waited for
    going = (osd(0, "a", terminating=True), osd(1, "b"))
    again = next_actions(view(marks=marks, crimson=True, pods=going, now=NOW + 5))
    assert not any(isinstance(a, RestartOsds) for a in again)
    assert again[-1] == NotReady("waiting 5 s for osd.0 to restart")
    # Rook's next pod, Ready: over
    fresh = (osd(0, "c"), osd(1, "b"))
    done = next_actions(view(marks=marks, crimson=True, pods=fresh, now=NOW + 30))
    assert done[-3:] == [
        Condition(
            "OsdsRestarted",
            True,
            "CrimsonOsdsRestarted",
            "osd.0 restarted without the run's reactor layout after 30 s",
        ),  # fmt: skip
        Mark(marks.model_copy(update={"over": "done"})),
        Release(),
    ]
    # a next pod that never turns Ready: given up after the timeout, said so, and over
    never = (osd(0, "c", ready=False), osd(1, "b"))
    late = next_actions(view(marks=marks, crimson=True, pods=never, now=NOW + 601))
    assert late[-3].reason == "RestartTimeout"  # type: ignore[union-attr]
    assert late[-2:] == [Mark(marks.model_copy(update={"over": "done"})), Release()]


def test_nothing_is_done_twice_or_without_a_record() -> None:
    assert next_actions(view(changes=None)) == []  # never patched
    # the CephCluster was deleted, or the restore is over: only the saved copy goes
    assert next_actions(view(cluster_spec=None)) == [Release()]
    over = RestoreMarks(over="done")
    assert next_actions(view(marks=over, cluster_spec=PATCHED)) == [Release()]
    # a spec someone put back already is not patched again; the start is not re-recorded
    marks = RestoreMarks(started=NOW - 1)
    assert not any(isinstance(a, (PatchSpec, Mark)) for a in next_actions(view(marks=marks)))


def test_a_restarted_operator_resumes_from_the_marks_alone() -> None:
    """Every tick is a function of what is recorded: replaying the restore from each mark
    set it wrote gives the same remaining actions as going on without a restart."""
    seen = view(cluster_spec=PATCHED, crimson=True)
    applied: list[Any] = []
    for _ in range(10):
        actions = next_actions(seen)
        applied += actions
        if Release() in actions:
            break
        marks = seen.marks
        for a in actions:
            if isinstance(a, Mark):
                marks = a.marks
            elif isinstance(a, PatchSpec):
                seen = replace(seen, cluster_spec=apply_merge_patch(seen.cluster_spec, a.patch))
            elif isinstance(a, CleanConfig):
                marks = marks.model_copy(update={"config_cleaned": "done"})
            elif isinstance(a, RestartOsds):  # Rook's next pod for each, Ready
                gone = {p.uid for p in a.pods}
                pods = [replace(p, uid=p.uid + "-next") if p.uid in gone else p for p in seen.pods]
                seen = replace(seen, pods=tuple(pods))
        seen = replace(seen, marks=marks, now=seen.now + 10)
    kinds = [type(a).__name__ for a in applied if not isinstance(a, Condition)]
    assert kinds == ["PatchSpec", "Mark", "CleanConfig", "RestartOsds", "Mark", "NotReady",
                     "Mark", "Release"]  # fmt: skip
    over = [a for a in applied if isinstance(a, Mark) and a.marks.over]
    assert over and over[0].marks.over == "done"  # recorded before the copy goes


# ---------------------------------------------------------------- whose word is taken

HOLDER = "bench/run1/uid-1"
WHERE = "CephCluster rook-ceph/rook-ceph"
DIGEST = changes_digest(CHANGES)
OURS = {PATCHED_BY: HOLDER, UNDO_DIGEST: DIGEST}


def test_the_record_is_taken_only_when_it_matches_the_digest_on_the_cluster() -> None:
    assert trusted_changes(CHANGES, DIGEST, OURS, HOLDER, WHERE) == CHANGES
    # the run's patch is not on the cluster: nothing of it to restore, whatever is recorded
    assert trusted_changes(CHANGES, DIGEST, {}, HOLDER, WHERE) is None
    other = {**OURS, PATCHED_BY: "bench/run0/uid-0"}
    assert trusted_changes(CHANGES, DIGEST, other, HOLDER, WHERE) is None
    # a record changed since the patch (one value, a path added, or its digest redone)
    evil = Change(("cephVersion", "image"), None, '"evil.example/ceph:latest"', 0)
    for tampered in (
        (CHANGES[0].__class__(CHANGES[0].path, '"9"', CHANGES[0].after, 0), *CHANGES[1:]),
        (*CHANGES, evil),
    ):
        for recorded in (DIGEST, changes_digest(tampered)):
            refused = trusted_changes(tampered, recorded, OURS, HOLDER, WHERE)
            assert isinstance(refused, Refuse) and refused.reason == "UndoRecordMismatch"
            assert f"remove the annotations {PATCHED_BY} and {UNDO_DIGEST}" in refused.message
            assert "nothing was applied" in refused.message
    # the digest itself removed or changed on the cluster
    for marks in ({PATCHED_BY: HOLDER}, {**OURS, UNDO_DIGEST: "0" * 64}):
        assert isinstance(trusted_changes(CHANGES, DIGEST, marks, HOLDER, WHERE), Refuse)


def test_the_restore_writes_only_the_values_the_run_set() -> None:
    """Whatever else is in the spec, the restore writes back the run's values alone."""
    rolling = (osd(0, "a", cpu="2", mem="4Gi"), osd(1, "b", cpu="2", mem="4Gi"))
    (patch, *_) = next_actions(view(cluster_spec=PATCHED, pods=rolling))
    assert isinstance(patch, PatchSpec) and set(patch.patch) == {"cephConfig", "resources"}
    assert apply_merge_patch(PATCHED, patch.patch) == ORIGINAL


def test_an_admin_edit_during_the_run_is_kept_and_named() -> None:
    """issue 36 #6: an admin's `kubectl edit` mid-run, of a value the run set and of one it
    never touched, both stay as the admin left them; the rest of the run's values go back."""
    edited = json.loads(json.dumps(PATCHED))
    edited["resources"]["osd"]["limits"]["memory"] = "6Gi"  # the run set 4Gi: now the admin's
    edited["cephConfig"]["global"]["osd_pool_default_size"] = "2"  # never the run's
    rolling = (osd(0, "a", cpu="2", mem="6Gi"), osd(1, "b", cpu="2", mem="6Gi"))
    actions = next_actions(view(cluster_spec=edited, pods=rolling))
    (patch,) = [a for a in actions if isinstance(a, PatchSpec)]
    restored = apply_merge_patch(edited, patch.patch)
    assert restored["resources"]["osd"] == {"limits": {"cpu": "4", "memory": "6Gi"}}
    assert restored["cephConfig"] == {"global": {"osd_pool_default_size": "2"}}
    kept = [a for a in actions if isinstance(a, Condition) and a.reason == "EditsKept"]
    assert kept and "resources.osd.limits.memory" in kept[0].message


def test_a_cluster_another_run_left_patched_is_not_an_original() -> None:
    assert foreign_patch({}, HOLDER, WHERE) is None
    assert foreign_patch(OURS, HOLDER, WHERE) is None  # our own (a resumed tick)
    why = foreign_patch({**OURS, PATCHED_BY: "other/run0/uid-0"}, HOLDER, WHERE)
    assert why is not None and "carries the patch of BenchmarkRun other/run0" in why
    assert f"remove the annotations {PATCHED_BY} and {UNDO_DIGEST}" in why


def _patched(original: dict[str, Any]) -> dict[str, Any]:
    """What a run's patch makes of it: every OSD resources key on the run's limits."""
    run = {"limits": {"cpu": "2", "memory": "4Gi"}, "requests": {"cpu": "2", "memory": "4Gi"}}
    return {**original, "resources": dict.fromkeys(original["resources"], run)}


def test_the_rollback_knows_osds_sized_by_their_device_class() -> None:
    """Rook (>= 1.19) sizes an OSD of class ssd by resources.osd-ssd when the spec has it.
    The rollback read only resources.osd and waited the whole timeout (30 min) for limits
    no OSD would ever get again; each pod is now matched by its device class."""
    original = {**ORIGINAL, "resources": {
        "osd": {"limits": {"cpu": "4", "memory": "8Gi"}},
        "osd-ssd": {"limits": {"cpu": "6", "memory": "12Gi"}},
    }}  # fmt: skip
    undo = tuple(spec_changes(original, _patched(original)))
    started = RestoreMarks(started=NOW - 42)
    pods = (osd(0, "a", cpu="6", mem="12Gi", device_class="ssd"), osd(1, "b"))
    done = next_actions(view(changes=undo, cluster_spec=original, marks=started, pods=pods))
    assert done[-1] == CleanConfig(), done
    assert "2 OSDs Ready with limits cpu=6 memory=12Gi; cpu=4 memory=8Gi" in str(done[0])
    # an ssd OSD still on the run's limits is waited for
    late = (osd(0, "a", cpu="2", mem="4Gi", device_class="ssd"), osd(1, "b"))
    waiting = next_actions(view(changes=undo, cluster_spec=original, marks=started,
                                pods=late))  # fmt: skip
    assert isinstance(waiting[-1], NotReady) and "osd.0 still has limits cpu=2" in str(waiting[-1])


def test_a_pod_without_a_device_class_label_may_run_any_class_of_the_original() -> None:
    """Only osd-hdd in the spec (no resources.osd): Rook gives that class's limits to its
    OSDs; a pod whose label is missing is accepted with them, or with none (older Rook)."""
    original = {**ORIGINAL, "resources": {"osd-hdd": {"limits": {"cpu": "3", "memory": "6Gi"}}}}
    undo = tuple(spec_changes(original, _patched(original)))
    started = RestoreMarks(started=NOW - 5)
    for cpu, mem in (("3", "6Gi"), (None, None)):
        pods = (osd(0, "a", cpu=cpu, mem=mem),)
        done = next_actions(view(changes=undo, cluster_spec=original, marks=started,
                                 pods=pods))  # fmt: skip
        assert done[-1] == CleanConfig(), done
