"""The run's bounds, carried out for stages.tick (stuck.py decides): an unexpected error
kept in the run's record, shown while it lasts and, past errorTimeoutSeconds, turned into
the run's failure; a restore past restoreTimeoutSeconds ended, what it left named, the
cluster's lease released."""

from __future__ import annotations

import time

from crimsonbench.controller import lease
from crimsonbench.controller.decisions import stuck
from crimsonbench.controller.record import now_iso
from crimsonbench.controller.run_context import RunBase
from crimsonbench.spec.status import Phase

SHOWN_IMAGES = 8  # images named in a message; the rest counted


def note_error(ctx: RunBase, stage: str, exc: BaseException) -> str | None:
    """Keep the error in the run's record (when the run's errors began, the latest one) and
    say so in the status (message, the Stalled condition); returns why the run fails now
    once they have lasted past errorTimeoutSeconds, else None (the tick is retried)."""
    now, bound = time.time(), ctx.settings.error_timeout_seconds
    book = ctx.record.book
    book.error = mark = stuck.noted(book.error, stage, stuck.error_text(exc), now)
    lasting = stuck.lasting(mark, now, bound)
    ctx.record.status.message = lasting
    ctx.record.condition("Stalled", True, type(exc).__name__, lasting)
    return stuck.gave_up(mark, now, bound) if stuck.overdue(mark, now, bound) else None


def clear_error(
    ctx: RunBase, reason: str = "Recovered", message: str = "the last error went away"
) -> None:
    """A tick got on without an error (or the error failed the run): a later one starts a
    new count."""
    if ctx.record.book.error is None:
        return
    ctx.record.book.error = None
    ctx.record.condition("Stalled", False, reason, message)


def restore_overdue(ctx: RunBase) -> float | None:
    """Seconds since the restore began, once past restoreTimeoutSeconds; None before (its
    start is kept in the record from the first tick of the restore on)."""
    book, now = ctx.record.book, time.time()
    if book.restoring_since is None:
        book.restoring_since = round(now, 1)
    waited = now - book.restoring_since
    overdue = stuck.restore_overdue(book.restoring_since, now, ctx.settings.restore_timeout_seconds)
    return waited if overdue else None


def restore_wait(ctx: RunBase, what: str) -> None:
    """The restore waits (NotReady): it ends once past restoreTimeoutSeconds."""
    waited = restore_overdue(ctx)
    if waited is not None:
        end_restore(ctx, waited, what)
    else:
        clear_error(ctx)


def restore_error(ctx: RunBase, exc: Exception) -> str:
    """An error in the restore: said in the status, retried (raised) until the restore is
    past restoreTimeoutSeconds, then it ends ("done")."""
    note_error(ctx, "restore", exc)  # the restore's own bound rules, not errorTimeoutSeconds
    waited = restore_overdue(ctx)
    if waited is None:
        raise exc
    end_restore(ctx, waited, stuck.error_text(exc))
    return "done"


def end_restore(ctx: RunBase, waited_s: float, last: str) -> None:
    """The restore did not finish in time: the run ends Failed, its ClusterRestored
    condition (and an event) naming what is left to do by hand, and the cluster's lease is
    released. The CephCluster keeps the run's marks if its spec was not put back: every
    later run on it is refused until someone finishes the restore."""
    todo = stuck.left_by_hand(leftovers(ctx))
    message = stuck.restore_gave_up(waited_s, ctx.settings.restore_timeout_seconds, last, todo)
    message += release_lease(ctx)
    record, status = ctx.record, ctx.record.status
    record.condition("ClusterRestored", False, "RestoreTimeout", message)
    if record.conditions().get("Succeeded") is None or status.failure == "":
        record.condition("Succeeded", False, "RestoreTimeout", message)
    ctx.warn("RestoreTimeout", message)
    failure = status.failure
    status.phase, status.stage, status.finished_at = Phase.FAILED, "done", now_iso()
    status.message = (f"{failure}; " if failure else "") + message
    status.current_step = ""


def release_lease(ctx: RunBase) -> str:
    """Let the cluster go as a run ends; '' when done, else what to tell (the run ends
    anyway: an API that refuses even that must not keep it going)."""
    try:
        lease.release(ctx)
    except Exception as exc:  # noqa: BLE001 (any refusal: said, the run ends regardless)
        ns, name = ctx.lease
        return (f"; the cluster's Lease {ns}/{name} could not be released "
                f"({stuck.error_text(exc)}): delete it by hand")  # fmt: skip
    return ""


def delete_jobs(ctx: RunBase, namespace: str) -> None:
    """The run's Jobs there, as a run that touched nothing else fails: best effort (the API
    that failed the run may refuse this too; the Jobs end by their own deadline)."""
    try:
        ctx.kube.delete_jobs(namespace, ctx.selector)
    except Exception as exc:  # noqa: BLE001 (logged: the run fails regardless)
        ctx.logger.warning("could not delete the run's Jobs in %s: %s", namespace,
                           stuck.error_text(exc))  # fmt: skip


def leftovers(ctx: RunBase) -> stuck.Leftovers:
    """What the restore may have left, from the run's undo record (never the spec)."""
    status, book = ctx.record.status, ctx.record.book
    undo = book.undo
    images = ""
    if undo.images and status.images_created and book.images_removed != "done":
        names = list(undo.images)
        more = f",... {len(names) - SHOWN_IMAGES} more" if len(names) > SHOWN_IMAGES else ""
        images = f"{undo.pool}/{{{','.join(names[:SHOWN_IMAGES])}{more}}}"
    kinds = (("CephBlockPool", undo.pool_object), ("CephClient", undo.client_object))
    objects = [f"{kind} {undo.rook_namespace}/{name}" for kind, name in kinds if name]
    rook = undo.target == "rook"
    return stuck.Leftovers(
        where=undo.where if rook else "",
        spec_changes=undo.spec_changes,
        mon_changes=undo.mon_changes,
        marks=book.restore,
        images=images,
        rook_objects=objects,
        jobs=f"delete the run's Jobs: kubectl -n {undo.jobs_namespace or '?'} delete jobs -l "
        f"{ctx.selector}",
    )
