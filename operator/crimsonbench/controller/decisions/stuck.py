"""Every run ends: pure decisions from the run's record and the clock (passed in), carried
out by bounded.py for stages.tick. Nothing here reads the API or the clock.

- An unexpected error: any exception but the three the stages raise on purpose
  (InvalidSpec, ExecutionError, ParseError end the run at once), and the run's target gone
  (TargetMissing). The API refusing or failing a call (403, 409, 422, 429, 500), a quota,
  a ConfigMap too large... would otherwise be retried for ever with the cluster patched.
  The record keeps when the first of them appeared and the latest one's text (ErrorMark);
  a tick that hits one again keeps that start, the first tick without one clears it.
  Past errorTimeoutSeconds the run fails: at once if it changed nothing yet, else after
  its restore.
- The restore: its start is kept too. Past restoreTimeoutSeconds the run ends Failed and
  lets the cluster go, naming in its ClusterRestored condition what is left to do by hand;
  the CephCluster keeps the run's marks until then, so no other run patches it meanwhile
  (restore_steps.foreign_patch).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from crimsonbench.controller.decisions.restore_steps import PATCHED_BY, UNDO_DIGEST
from crimsonbench.spec.status import ERROR_CHARS, ErrorMark, MonChange, RestoreMarks, SpecChange

# ---------------------------------------------------------------- unexpected errors


def error_text(exc: BaseException) -> str:
    """An error as the record and the conditions say it: its class and message, cut. A
    Kubernetes API refusal comes as kube_errors.KubeError (Forbidden, Conflict, ...), whose
    message is the status, reason and the API server's own words, never its headers."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else repr(exc)
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 3] + "..."


def noted(mark: ErrorMark | None, stage: str, text: str, now: float) -> ErrorMark:
    """The record's error mark after a tick that hit an error: the first one's time kept."""
    if mark is None:
        return ErrorMark(since=round(now, 1), stage=stage, text=text)  # validated: cut to fit
    return ErrorMark(since=mark.since, stage=stage, text=text, ticks=mark.ticks + 1)


def overdue(mark: ErrorMark, now: float, bound_s: float) -> bool:
    """The error has lasted longer than bound_s (errorTimeoutSeconds)."""
    return now - mark.since > bound_s


def lasting(mark: ErrorMark, now: float, bound_s: float) -> str:
    """What the status says while an error lasts."""
    return (
        f"{mark.text} (for {now - mark.since:.0f} s, {mark.ticks} tick(s) in a row; the run "
        f"fails after errorTimeoutSeconds {bound_s:.0f} s)"
    )


def gave_up(mark: ErrorMark, now: float, bound_s: float) -> str:
    """Why the run fails: the error, and that it lasted past the bound."""
    return (
        f"{mark.text} (at stage {mark.stage or '?'}, for {now - mark.since:.0f} s, past "
        f"errorTimeoutSeconds {bound_s:.0f} s)"
    )


# ---------------------------------------------------------------- the restore


def restore_overdue(since: float, now: float, bound_s: float) -> bool:
    return now - since > bound_s


SHOWN = 20  # changes named one by one in a message; the rest are in the undo record


@dataclass(frozen=True)
class Leftovers:
    """What the restore may have left undone: the run's undo record, as the I/O side read
    it, and how far the restore got."""

    where: str  # the CephCluster, as messages name it ("": not a Rook target)
    spec_changes: Sequence[SpecChange]  # what the run's patch set in its spec
    mon_changes: Sequence[MonChange]  # what that made Rook set in the mon database
    marks: RestoreMarks  # how far the restore got
    images: str  # "<pool>/{a,b}" still to remove; "" when removed (or never made)
    rook_objects: Sequence[str]  # the run's CephBlockPool and CephClient, "<Kind> <ns>/<name>"
    jobs: str  # how to delete the run's Jobs and their pods


def left_by_hand(left: Leftovers) -> list[str]:
    """What to do by hand to finish a restore that stopped, in the order the restore does
    it (the images and the run's pool before any OSD restarts)."""
    todo = []
    if left.images:
        todo.append(f"remove the run's RBD images {left.images}")
    if left.rook_objects:
        todo.append(f"see that Rook removed {', '.join(left.rook_objects)} (delete them if not)")
    marks = left.marks
    if left.where and left.spec_changes and marks.over is None:
        if marks.config_cleaned is None:
            todo.append(
                f"where {left.where}'s spec still holds the run's value, put back "
                f"{_listed([_spec_back(c) for c in left.spec_changes])}, and wait until Rook "
                "has rolled every OSD back"
            )
            if left.mon_changes:
                todo.append("then in the mon database: "
                            + _listed([_mon_back(c) for c in left.mon_changes]))  # fmt: skip
        elif marks.config_cleaned.startswith("failed"):
            todo.append(f"in the mon database: {marks.config_cleaned.removeprefix('failed: ')}")
        todo.append(
            f"remove the annotations {PATCHED_BY} and {UNDO_DIGEST} from {left.where} "
            "(until then every BenchmarkRun on it is refused)"
        )
    todo.append(left.jobs)
    return todo


def _spec_back(change: SpecChange) -> str:
    where = "spec." + ".".join(change.path)
    return f"{where} = {change.before}" if change.before is not None else f"{where} removed"


def _mon_back(change: MonChange) -> str:
    if change.before is None:
        return f"ceph config rm {change.who} {change.key}"
    return f"ceph config set {change.who} {change.key} {change.before}"


def _listed(items: Sequence[str]) -> str:
    more = len(items) - SHOWN
    shown = "; ".join(items[:SHOWN])
    return shown + (f"; and {more} more (the run's status.record.undo)" if more > 0 else "")


def restore_gave_up(waited_s: float, bound_s: float, last: str, todo: Sequence[str]) -> str:
    """The ClusterRestored condition of a restore that did not finish in time."""
    steps = "; ".join(f"({i}) {t}" for i, t in enumerate(todo, 1))
    return (
        f"the restore did not finish in restoreTimeoutSeconds ({bound_s:.0f} s; "
        f"{waited_s:.0f} s since it began), so the run ends and releases the cluster; it "
        f"stopped at: {last or 'unknown'}. Left to do by hand: {steps}"
    )
