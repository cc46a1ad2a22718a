"""What putting a Rook cluster back does next: pure functions of what the restore observed
(the run's undo record, the restore's marks, the CephCluster, the OSD pods, the clock)
returning the actions to take. restore.restore_cluster observes, asks, and carries them
out; nothing here reads the API, so every branch is tested without a cluster.

The order is the safety argument: the spec goes back first; the mon database only once
Rook has rolled every OSD back (Rook applies a spec's cephConfig before it updates the
OSDs, so after that no reconcile can put the run's keys back); crimson OSDs are restarted
once more after that (crimson reads its reactor layout only at start); the record says
restored last. Each mark is kept in the run's record (status.record.restore:
spec.status.RestoreMarks), so a restarted operator goes on where the restore stopped and
never runs the cleanup Job twice.

What is put back: only the values the run's patch set (its undo record: path, before,
after; manifests/cephcluster_undo.py), and each only while the cluster still holds the
run's value. Whatever someone else changed during the run, that value or any other,
stays as they left it and is named (the SpecRestored condition).

Whose word the restore takes (trusted_changes): the undo record lives in the run's status,
and its sha256 is put on the CephCluster by the very patch that changes the spec
(UNDO_DIGEST, with PATCHED_BY naming the run), where only who may write the CephCluster
anyway can change it. A record that does not match is refused: nothing is applied, a
condition and an event say why, and the annotations stay so the next run on the cluster
refuses too (foreign_patch).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crimsonbench.controller.decisions.observed import OsdPod
from crimsonbench.controller.decisions.rollout import original_osd_limits, osds_running_with
from crimsonbench.errors import NotReady
from crimsonbench.manifests.cephcluster_undo import Change, after_undo, changes_digest, undo_patch
from crimsonbench.manifests.naming import GROUP
from crimsonbench.spec.status import OsdsRestarted, RestoreMarks

# On the CephCluster, set by the patch that changes its spec, removed when the restore is
# over: which run patched it ("namespace/name/uid") and the sha256 of its undo record.
PATCHED_BY = f"{GROUP}/patched-by"
UNDO_DIGEST = f"{GROUP}/undo-sha256"


# ---------------------------------------------------------------- actions


@dataclass(frozen=True)
class PatchSpec:
    """Merge-patch the CephCluster's spec."""

    patch: dict[str, Any]


@dataclass(frozen=True)
class Mark:
    """Record how far the restore got: these marks from now on (the run's record)."""

    marks: RestoreMarks


@dataclass(frozen=True)
class Condition:
    type: str
    ok: bool
    reason: str
    message: str


@dataclass(frozen=True)
class CleanConfig:
    """Run (or await) the Job that `ceph config rm`s the run's keys; its outcome becomes the
    config_cleaned mark, and the restore is asked again."""


@dataclass(frozen=True)
class RestartOsds:
    """Delete these OSD pods; Rook's Deployments recreate them on their nodes."""

    pods: tuple[OsdPod, ...]
    why: str


@dataclass(frozen=True)
class Release:
    """The restore is over (or there is nothing left to restore): remove the run's
    annotations from the CephCluster."""


Action = PatchSpec | Mark | Condition | CleanConfig | RestartOsds | NotReady | Release


@dataclass(frozen=True)
class Refuse:
    """The saved original cannot be trusted: apply nothing. `reason` and `message` go into
    the ClusterRestored condition and a Warning event."""

    reason: str
    message: str


# ---------------------------------------------------------------- whose word is taken


def trusted_changes(
    changes: Sequence[Change], recorded_digest: str, annotations: Mapping[str, str],
    holder: str, where: str,
) -> tuple[Change, ...] | Refuse | None:  # fmt: skip
    """The run's recorded changes to undo, a Refuse, or None when this run has no patch on
    the cluster (never patched, or the restore is over: nothing to apply).

    changes, recorded_digest: the run's undo record; annotations: the CephCluster's;
    holder: the run ("namespace/name/uid"); where: the cluster as messages name it."""
    if annotations.get(PATCHED_BY) != holder:
        return None
    on_cluster = annotations.get(UNDO_DIGEST, "")
    mine = changes_digest(changes)
    if on_cluster and mine == on_cluster == recorded_digest:
        return tuple(changes)
    return Refuse(
        "UndoRecordMismatch",
        f"the run's record of what it changed in {where} does not match the sha256 its "
        f"patch put on the CephCluster ({UNDO_DIGEST}: {on_cluster[:16] or 'none'}, the "
        f"record: {mine[:16]}): it was changed since; nothing was applied: {where} keeps "
        "the run's cephConfig and resources; put them back by hand, then remove the "
        f"annotations {PATCHED_BY} and {UNDO_DIGEST} from the CephCluster (until then "
        "every run on it is refused)",
    )


def foreign_patch(annotations: Mapping[str, str], holder: str, where: str) -> str | None:
    """Why a run must not patch the cluster: another run's patch is still on it (its
    restore was refused or never finished), so the spec found is not an original."""
    other = annotations.get(PATCHED_BY)
    if not other or other == holder:
        return None
    return (
        f"{where} still carries the patch of BenchmarkRun {other.rsplit('/', 1)[0]} "
        f"(annotation {PATCHED_BY}): its restore did not finish, so its spec is not an "
        "original to record; see that run's ClusterRestored condition, put the cluster back "
        f"by hand if needed, then remove the annotations {PATCHED_BY} and {UNDO_DIGEST}"
    )


# ---------------------------------------------------------------- what was observed


@dataclass(frozen=True)
class RestoreView:
    changes: tuple[Change, ...] | None  # the run's patch, value by value; None: never patched
    cluster_spec: Mapping[str, Any] | None  # the CephCluster's spec now; None: it is gone
    marks: RestoreMarks  # how far the restore got
    placement: Sequence[int]  # the OSD ids the run planned
    pods: Sequence[OsdPod]  # Rook's OSD pods now
    now: float  # epoch seconds
    timeout_s: float  # rolloutTimeoutSeconds: how long to wait for Rook before giving up
    crimson: bool


def next_actions(seen: RestoreView) -> list[Action]:
    """The restore's actions for this tick, in order; [] when there is nothing to do (never
    patched). Ends with NotReady when Rook must act first, with CleanConfig when the
    cleanup Job's outcome decides the rest, or with Release when the restore is over
    (after the `over` mark; alone when restored already or the CephCluster was deleted)."""
    marks = seen.marks
    if seen.changes is None:
        return []
    if marks.over or seen.cluster_spec is None:
        return [Release()]
    if marks.config_cleaned is None:
        actions: list[Action] = []
        # Until the mon database is cleaned: the run's values back (again, if Rook or
        # someone set them meanwhile), then Rook's rollback. After it, neither is looked at
        # again: a crimson OSD's restart below must not read as a rollback undone.
        undo = undo_patch(seen.changes, seen.cluster_spec)
        if undo.patch:
            actions.append(PatchSpec(undo.patch))
        if undo.left:
            actions.append(Condition(
                "SpecRestored", True, "EditsKept",
                f"put back what the run set, except {len(undo.left)} value(s) changed by "
                f"someone else during the run, kept as they are: {', '.join(undo.left[:20])}",
            ))  # fmt: skip
        since = seen.now if marks.started is None else marks.started
        if marks.started is None:
            actions.append(Mark(marks.model_copy(update={"started": round(seen.now, 1)})))
        restored = after_undo(seen.changes, seen.cluster_spec)
        actions += rollback(seen, restored, waited_s=seen.now - since)
        if isinstance(actions[-1], NotReady):
            return actions
        return [*actions, CleanConfig()]  # its Job is deleted once done: never run it twice
    done = Mark(marks.model_copy(update={"over": marks.config_cleaned}))
    if not seen.crimson:
        return [done, Release()]
    restarts = crimson_restarts(seen)
    return restarts if isinstance(restarts[-1], NotReady) else [*restarts, done, Release()]


def rollback(seen: RestoreView, original: Mapping[str, Any], *, waited_s: float) -> list[Action]:
    """Every OSD (the planned ones and any other Rook runs: Rook sizes them all alike) runs
    one Ready pod with the original spec's limits again; waits for it, and gives up (said in
    the RolledBack condition) after timeout_s: the config is cleaned anyway."""
    ids = sorted({p.osd_id for p in seen.pods} | set(seen.placement))
    # by each pod's device class: Rook sizes an OSD by resources.osd-<class> when present
    progress = osds_running_with(
        ids, seen.pods, lambda p: original_osd_limits(original, p.device_class)
    )
    if not isinstance(progress, NotReady):
        return [Condition("RolledBack", True, "OsdsRestored",
                          f"{progress} after {waited_s:.0f} s")]  # fmt: skip
    message = f"waiting {waited_s:.0f} s for Rook to roll the OSDs back: {progress}"
    if waited_s > seen.timeout_s:
        return [Condition("RolledBack", False, "RollbackTimeout", message + "; gave up waiting")]
    return [Condition("RolledBack", False, "RollingBack", message), NotReady(message)]


def crimson_restarts(seen: RestoreView) -> list[Action]:
    """Crimson reads its reactor and alien CPU sets only when it starts, and Rook rolled the
    OSDs back before `config rm` removed the run's (seen on kind: osd.0 kept the run's
    reactor CPU after the restore). So the planned OSDs restart once more: their pods
    deleted (recorded, so a restarted operator does not delete the next ones), then waited
    for until each runs in a new Ready pod; given up after timeout_s, said so."""
    marks, now = seen.marks, seen.now
    ids = sorted(seen.placement)
    planned = [p for p in seen.pods if p.osd_id in ids]
    if marks.osds_restarted is None:
        old = tuple(p for p in planned if not p.terminating)
        record = OsdsRestarted(since=round(now, 1), uids=[p.uid for p in old])
        message = f"restarting {osd_list(ids)} to start without the run's reactor layout"
        return [
            RestartOsds(old, "after the restore, so it runs without the run's layout"),
            Mark(marks.model_copy(update={"osds_restarted": record})),
            NotReady(message),
        ]
    done = marks.osds_restarted
    fresh = {p.osd_id for p in planned
             if p.ready and not p.terminating and p.uid not in done.uids}  # fmt: skip
    waiting = [i for i in ids if i not in fresh]
    waited = now - done.since
    if not waiting:
        return [Condition("OsdsRestarted", True, "CrimsonOsdsRestarted",
                          f"{osd_list(ids)} restarted without the run's reactor layout "
                          f"after {waited:.0f} s")]  # fmt: skip
    message = f"waiting {waited:.0f} s for {osd_list(waiting)} to restart"
    if waited > seen.timeout_s:
        return [Condition("OsdsRestarted", False, "RestartTimeout",
                          f"{message}; gave up: until they restart they keep the run's "
                          "reactor layout")]  # fmt: skip
    return [NotReady(message)]


def osd_list(ids: Sequence[int]) -> str:
    return ", ".join(f"osd.{i}" for i in ids)
