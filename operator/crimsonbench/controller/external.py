"""The run's RBD images are removed at the end, by a Job running as the user fio ran as.

External clusters: nothing else would. Rook: Rook deletes a CephBlockPool that holds
images only through a cleanup Job of its own (rook.io/force-deletion), which it schedules
without the cluster's tolerations and which it leaves behind; with the pool emptied here
first, Rook deletes the pool at once."""

from __future__ import annotations

from crimsonbench.controller.fio_stage import fio_access
from crimsonbench.controller.run_context import RunContext
from crimsonbench.errors import NotReady
from crimsonbench.manifests.maintenance import remove_images_job
from crimsonbench.manifests.naming import GROUP
from crimsonbench.manifests.results import run_configmap_name
from crimsonbench.plan.types import RunPlan

# On the run's `<run>-run` ConfigMap: "done" or "failed" once the removal Job ended. The
# delete handler writes no status, and cleanup's last sweep deletes the Job: without a
# durable mark a retried cleanup would run the Job again (on Rook as a cephx user that is
# gone by then, so its pod never starts).
IMAGES_REMOVED = f"{GROUP}/images-removed"


def remove_images(ctx: RunContext, plan: RunPlan | None) -> None:
    """NotReady until the removal Job has finished; a failed one is reported, not retried
    (the images are named in the condition, to remove by hand). Done once per run
    (status.imagesRemoved, and IMAGES_REMOVED on the run's record)."""
    if ctx.target.kind == "local" or ctx.spec.keep_images or ctx.get("imagesRemoved"):
        return
    if plan is None or not ctx.get("imagesCreated"):
        return  # never planned, or no image was created
    record = run_configmap_name(ctx.name)
    marks = ctx.kube.configmap_annotations(ctx.namespace, record)
    if (marks or {}).get(IMAGES_REMOVED):
        return  # an earlier cleanup call saw the Job end
    images = plan.pool.images
    access = fio_access(ctx, plan)
    job = remove_images_job(ctx.name, plan.pool.name, images, access, ctx.settings.pod_options())
    ns, name = access.namespace, job["metadata"]["name"]
    state = ctx.kube.job_state(ns, name)
    if state == "missing":
        ctx.kube.ensure_job(ns, job)
        raise NotReady(f"removing {len(images)} RBD images (Job {ns}/{name})")
    if state == "running":
        raise NotReady(f"removing {len(images)} RBD images (Job {ns}/{name} running)")
    if state == "failed":
        ctx.condition(
            "ImagesRemoved",
            False,
            "RemovalFailed",
            f"Job {ns}/{name} failed; remove {plan.pool.name}/{{{','.join(images)}}} "
            "by hand: " + ctx.kube.failed_job_text(ns, name, 300),
        )
        if marks is not None:
            ctx.kube.annotate_configmap(ctx.namespace, record, {IMAGES_REMOVED: "failed"})
        return
    ctx.condition("ImagesRemoved", True, "Removed", f"{len(images)} RBD images removed")
    if marks is not None:  # the record exists once the run was planned
        ctx.kube.annotate_configmap(ctx.namespace, record, {IMAGES_REMOVED: "done"})
    ctx.set(imagesRemoved=True)
