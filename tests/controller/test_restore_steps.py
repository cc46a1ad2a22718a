"""The restore's decisions, without a cluster: from what it observed (the recorded original
spec, its marks, the CephCluster, Rook's OSD pods, the clock) to the actions it takes, in
the order that keeps the cluster safe. rook.restore_cluster carries them out against the
real API (tests/k8s, tests/rook)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from crimsonbench.controller.decide import OsdPod
from crimsonbench.controller.restore_steps import (
    CONFIG_CLEANED,
    CONFIG_RESTORED,
    ORIGINAL_DIGEST,
    OSDS_RESTARTED,
    PATCHED_BY,
    RESTORE_STARTED,
    CleanConfig,
    Condition,
    Mark,
    PatchSpec,
    Refuse,
    Release,
    RestartOsds,
    RestoreView,
    Wait,
    digest,
    foreign_patch,
    next_actions,
    trusted_original,
)
from crimsonbench.manifests.cephcluster import apply_merge_patch

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


def osd(osd_id: int, uid: str, cpu: str = "4", mem: str = "8Gi", **kw: Any) -> OsdPod:
    return OsdPod(osd_id, "node-a", kw.pop("ready", True), cpu, mem, uid=uid,
                  name=f"rook-ceph-osd-{osd_id}-{uid}", **kw)  # fmt: skip


ROLLED_BACK = (osd(0, "a"), osd(1, "b"))


def view(**kw: Any) -> RestoreView:
    base: dict[str, Any] = dict(original=ORIGINAL, cluster_spec=ORIGINAL, marks={},
                                placement=[0], pods=ROLLED_BACK, now=NOW, timeout_s=600,
                                crimson=False)  # fmt: skip
    return RestoreView(**{**base, **kw})


def test_first_tick_puts_the_spec_back_exactly_and_waits_for_rook() -> None:
    rolling = (osd(0, "a", cpu="2", mem="4Gi"), osd(1, "b", cpu="2", mem="4Gi"))
    actions = next_actions(view(cluster_spec=PATCHED, pods=rolling))
    patch = actions[0]
    assert isinstance(patch, PatchSpec)
    assert apply_merge_patch(PATCHED, patch.patch) == ORIGINAL  # byte for byte, keys removed
    assert actions[1] == Mark(RESTORE_STARTED, f"{NOW}")
    assert actions[2] == Condition("RolledBack", False, "RollingBack", actions[3].message)
    assert isinstance(actions[3], Wait) and "osd.0 still has limits cpu=2" in actions[3].message
    assert len(actions) == 4  # no `config rm` while Rook could still apply the run's keys


def test_config_rm_only_once_every_osd_runs_the_original_again() -> None:
    started = {RESTORE_STARTED: f"{NOW - 42}"}
    # osd.1 is not the run's, but Rook sizes all OSDs alike: it is waited for too
    half = (osd(0, "a"), osd(1, "b", cpu="2", mem="4Gi"))
    waiting = next_actions(view(marks=started, pods=half))
    assert isinstance(waiting[-1], Wait) and "osd.1" in waiting[-1].message
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
    late = next_actions(view(marks={RESTORE_STARTED: f"{NOW - 601}"}, pods=stuck))
    assert late[0].reason == "RollbackTimeout"  # type: ignore[union-attr]
    assert "gave up waiting" in late[0].message  # type: ignore[union-attr]
    assert late[-1] == CleanConfig()


def test_after_config_rm_a_classic_restore_is_over_with_its_outcome() -> None:
    marks = {RESTORE_STARTED: f"{NOW - 60}", CONFIG_CLEANED: "failed: ceph config rm osd.0 x"}
    # the spec and the rollback are not looked at again once `config rm` ran
    actions = next_actions(view(marks=marks, cluster_spec=PATCHED))
    assert actions == [Mark(CONFIG_RESTORED, "failed: ceph config rm osd.0 x"), Release()]


def test_crimson_osds_restart_after_config_rm_then_the_restore_is_over() -> None:
    marks: dict[str, str] = {RESTORE_STARTED: f"{NOW - 60}", CONFIG_CLEANED: "done"}
    first = next_actions(view(marks=marks, crimson=True))
    restart, record, wait = first[-3:]
    # only the planned OSD restarts; osd.1 is not the run's
    assert restart == RestartOsds((osd(0, "a"),), "after the restore, so it runs without "
                                  "the run's layout")  # fmt: skip
    assert record == Mark(OSDS_RESTARTED, json.dumps({"since": NOW, "uids": ["a"]}))
    assert isinstance(wait, Wait) and "restarting osd.0" in wait.message
    marks[OSDS_RESTARTED] = record.value  # type: ignore[union-attr]
    # the old pod going away: never deleted twice, waited for
    going = (osd(0, "a", terminating=True), osd(1, "b"))
    again = next_actions(view(marks=marks, crimson=True, pods=going, now=NOW + 5))
    assert not any(isinstance(a, RestartOsds) for a in again)
    assert again[-1] == Wait("waiting 5 s for osd.0 to restart")
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
        Mark(CONFIG_RESTORED, "done"),
        Release(),
    ]
    # a next pod that never turns Ready: given up after the timeout, said so, and over
    never = (osd(0, "c", ready=False), osd(1, "b"))
    late = next_actions(view(marks=marks, crimson=True, pods=never, now=NOW + 601))
    assert late[-3].reason == "RestartTimeout"  # type: ignore[union-attr]
    assert late[-2:] == [Mark(CONFIG_RESTORED, "done"), Release()]


def test_nothing_is_done_twice_or_without_a_record() -> None:
    assert next_actions(view(original=None)) == []  # never patched
    # the CephCluster was deleted, or the restore is over: only the saved copy goes
    assert next_actions(view(cluster_spec=None)) == [Release()]
    assert next_actions(view(marks={CONFIG_RESTORED: "done"}, cluster_spec=PATCHED)) == [Release()]
    # a spec someone put back already is not patched again; the start is not re-recorded
    marks = {RESTORE_STARTED: f"{NOW - 1}"}
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
        marks = dict(seen.marks)
        for a in actions:
            if isinstance(a, Mark):
                marks[a.key] = a.value
            elif isinstance(a, PatchSpec):
                seen = replace(seen, cluster_spec=apply_merge_patch(seen.cluster_spec, a.patch))
            elif isinstance(a, CleanConfig):
                marks[CONFIG_CLEANED] = "done"
            elif isinstance(a, RestartOsds):  # Rook's next pod for each, Ready
                gone = {p.uid for p in a.pods}
                pods = [replace(p, uid=p.uid + "-next") if p.uid in gone else p for p in seen.pods]
                seen = replace(seen, pods=tuple(pods))
        seen = replace(seen, marks=marks, now=seen.now + 10)
    kinds = [type(a).__name__ for a in applied if not isinstance(a, Condition)]
    assert kinds == ["PatchSpec", "Mark", "CleanConfig", "RestartOsds", "Mark", "Wait", "Mark",
                     "Release"]  # fmt: skip
    assert Mark(CONFIG_RESTORED, "done") in applied  # recorded before the copy goes


# ---------------------------------------------------------------- whose word is taken

HOLDER = "bench/run1/uid-1"
WHERE = "CephCluster rook-ceph/rook-ceph"
SAVED = json.dumps(ORIGINAL)
OURS = {PATCHED_BY: HOLDER, ORIGINAL_DIGEST: digest(SAVED)}


def test_the_saved_original_is_taken_only_when_it_matches_the_digest_on_the_cluster() -> None:
    assert trusted_original(SAVED, OURS, HOLDER, WHERE) == ORIGINAL
    # the run's patch is not on the cluster: nothing of it to restore, whatever is saved
    assert trusted_original(SAVED, {}, HOLDER, WHERE) is None
    assert trusted_original(None, {}, HOLDER, WHERE) is None
    assert trusted_original(SAVED, {**OURS, PATCHED_BY: "bench/run0/uid-0"}, HOLDER, WHERE) is None
    # a copy changed after it was saved (one byte), replaced by valid JSON, or gone
    evil = json.dumps({**ORIGINAL, "cephVersion": {"image": "evil.example/ceph:latest"},
                       "dataDirHostPath": "/etc", "cleanupPolicy": {"confirmation":
                       "yes-really-destroy-data"}})  # fmt: skip
    for tampered in (SAVED.replace("v18", "v19"), evil, SAVED + " "):
        refused = trusted_original(tampered, OURS, HOLDER, WHERE)
        assert isinstance(refused, Refuse) and refused.reason == "OriginalMismatch"
        assert "does not match the sha256 recorded on the CephCluster" in refused.message
        assert f"remove the annotations {PATCHED_BY} and {ORIGINAL_DIGEST}" in refused.message
        assert "nothing was applied" in refused.message
    gone = trusted_original(None, OURS, HOLDER, WHERE)
    assert isinstance(gone, Refuse) and gone.reason == "OriginalMissing"
    # the digest itself removed or changed on the cluster: the copy no longer matches it
    for marks in ({PATCHED_BY: HOLDER}, {**OURS, ORIGINAL_DIGEST: digest(evil)}):
        assert isinstance(trusted_original(SAVED, marks, HOLDER, WHERE), Refuse)
    # matching, but not a JSON object: refused too
    assert isinstance(trusted_original("[]", {**OURS, ORIGINAL_DIGEST: digest("[]")}, HOLDER,
                                       WHERE), Refuse)  # fmt: skip


def test_the_restore_writes_only_the_keys_a_run_changes() -> None:
    """Even a saved copy that matches cannot reach the image, dataDirHostPath or the
    cleanup policy: the restore patches cephConfig and resources, nothing else."""
    other = {**ORIGINAL, "cephVersion": {"image": "evil.example/ceph:latest"},
             "dataDirHostPath": "/etc", "cleanupPolicy": {"confirmation":
             "yes-really-destroy-data"}}  # fmt: skip
    rolling = (osd(0, "a", cpu="2", mem="4Gi"), osd(1, "b", cpu="2", mem="4Gi"))
    (patch, *_) = next_actions(view(original=other, cluster_spec=PATCHED, pods=rolling))
    assert isinstance(patch, PatchSpec) and set(patch.patch) == {"cephConfig", "resources"}
    restored = apply_merge_patch(PATCHED, patch.patch)
    assert restored == ORIGINAL  # the run's keys back; nothing else written


def test_a_cluster_another_run_left_patched_is_not_an_original() -> None:
    assert foreign_patch({}, HOLDER, WHERE) is None
    assert foreign_patch(OURS, HOLDER, WHERE) is None  # our own (a resumed tick)
    why = foreign_patch({**OURS, PATCHED_BY: "other/run0/uid-0"}, HOLDER, WHERE)
    assert why is not None and "carries the patch of BenchmarkRun other/run0" in why
    assert f"remove the annotations {PATCHED_BY} and {ORIGINAL_DIGEST}" in why
