"""What the operator does for external clusters that Rook does for its own: the run's RBD
images are removed at the end (on Rook, deleting the run's CephBlockPool removes them)."""

from __future__ import annotations

from crimsonbench.controller.run_context import RunContext
from crimsonbench.controller.steps_stage import ceph_access, jobs_namespace
from crimsonbench.errors import NotReady
from crimsonbench.manifests.jobs import remove_images_job
from crimsonbench.plan.steps import image_names


def remove_images(ctx: RunContext) -> None:
    """NotReady until the removal Job has finished; a failed one is reported, not retried
    (the images are named in the condition, to remove by hand). Done once per run
    (status.imagesRemoved), so the Job is deleted when it has succeeded."""
    if ctx.spec.target.external is None or ctx.spec.keep_images or ctx.get("imagesRemoved"):
        return
    images = image_names(ctx.spec)
    job = remove_images_job(
        ctx.name,
        ctx.spec.client.pool,
        images,
        ctx.settings.fio_image,
        ceph_access(ctx),
        **ctx.settings.job_options(),
    )
    ns, name = jobs_namespace(ctx), job["metadata"]["name"]
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
            f"Job {ns}/{name} failed; remove {ctx.spec.client.pool}/{{{','.join(images)}}} "
            "by hand: " + ctx.kube.job_log(ns, name)[-300:],
        )
        return
    ctx.condition("ImagesRemoved", True, "Removed", f"{len(images)} RBD images removed")
    ctx.set(imagesRemoved=True)  # remembered, so the Job can go now
    ctx.kube.delete_job(ns, name)
