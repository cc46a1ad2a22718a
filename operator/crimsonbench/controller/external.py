"""The run's RBD images are removed at the end, by a Job running as the user fio ran as.

External clusters: nothing else would. Rook: Rook deletes a CephBlockPool that holds
images only through a cleanup Job of its own (rook.io/force-deletion), which it schedules
without the cluster's tolerations and which it leaves behind; with the pool emptied here
first, Rook deletes the pool at once."""

from __future__ import annotations

from crimsonbench.controller.fio_setup import fio_access
from crimsonbench.controller.jobs import job_ended
from crimsonbench.controller.run_context import RunBase
from crimsonbench.manifests.maintenance import image_removal_summary, remove_images_job


def remove_images(ctx: RunBase) -> None:
    """NotReady until the removal Job has finished; a failed one is reported, not retried
    (the images are named in the condition, to remove by hand). Only the images the undo
    record names, and of those only the ones tagged with this run's uid (the Job checks).
    Done once per run: the record says so (record.imagesRemoved), and cleanup's last sweep
    deletes the Job."""
    book, undo = ctx.record.book, ctx.record.book.undo
    if undo.keep_images or book.images_removed or not undo.images:
        return
    if not ctx.record.status.images_created:
        return  # no image was created
    access = fio_access(ctx)
    job = remove_images_job(ctx.child, undo.pool, undo.images, ctx.uid, access,
                            ctx.settings.pod_options())  # fmt: skip
    out = job_ended(ctx.kube, job, f"removing {len(undo.images)} RBD images")
    if out.state == "failed":
        ctx.record.condition(
            "ImagesRemoved",
            False,
            "RemovalFailed",
            f"{out.where} failed; remove {undo.pool}/{{{','.join(undo.images)}}} "
            f"by hand: {out.text[-300:]}",
        )
        book.images_removed = "failed"
        return
    ctx.record.condition("ImagesRemoved", True, "Removed", image_removal_summary(out.text))
    book.images_removed = "done"
