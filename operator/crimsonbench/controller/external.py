"""The run's RBD images are removed at the end, by a Job running as the user fio ran as.

External clusters: nothing else would. Rook: Rook deletes a CephBlockPool that holds
images only through a cleanup Job of its own (rook.io/force-deletion), which it schedules
without the cluster's tolerations and which it leaves behind; with the pool emptied here
first, Rook deletes the pool at once."""

from __future__ import annotations

from crimsonbench.controller.fio_setup import fio_access
from crimsonbench.controller.jobs import job_outcome
from crimsonbench.controller.run_context import RunContext
from crimsonbench.errors import NotReady
from crimsonbench.manifests.maintenance import remove_images_job
from crimsonbench.plan.types import RunPlan


def remove_images(ctx: RunContext, plan: RunPlan | None) -> None:
    """NotReady until the removal Job has finished; a failed one is reported, not retried
    (the images are named in the condition, to remove by hand). Done once per run: the
    record says so (record.imagesRemoved), and cleanup's last sweep deletes the Job."""
    book = ctx.record.book
    if ctx.target.kind == "local" or ctx.spec.keep_images or book.images_removed:
        return
    if plan is None or not ctx.record.status.images_created:
        return  # never planned, or no image was created
    images = plan.pool.images
    access = fio_access(ctx, plan)
    job = remove_images_job(ctx.name, plan.pool.name, images, access, ctx.settings.pod_options())
    out = job_outcome(ctx.kube, job)
    if out.state == "pending":
        raise NotReady(f"removing {len(images)} RBD images ({out.where} {out.text})")
    if out.state == "failed":
        ctx.record.condition(
            "ImagesRemoved",
            False,
            "RemovalFailed",
            f"{out.where} failed; remove {plan.pool.name}/{{{','.join(images)}}} "
            f"by hand: {out.text[-300:]}",
        )
        book.images_removed = "failed"
        return
    ctx.record.condition("ImagesRemoved", True, "Removed", f"{len(images)} RBD images removed")
    book.images_removed = "done"
