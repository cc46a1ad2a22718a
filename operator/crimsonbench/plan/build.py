"""spec + topology (+ Ceph version) -> RunPlan. The one entry point executors call."""

from __future__ import annotations

from crimsonbench.plan.ceph_options import ceph_setup, option_family
from crimsonbench.plan.cpu import plan_cpus
from crimsonbench.plan.steps import expand_steps, image_names, prefill_jobs
from crimsonbench.plan.types import RunPlan, Topology
from crimsonbench.spec.models import BenchmarkRunSpec, Flavor


def build_plan(
    name: str, spec: BenchmarkRunSpec, topology: Topology, ceph_version: str | None = None
) -> RunPlan:
    """Raises InvalidSpec (naming the field) when the spec cannot run on this topology."""
    cpu = plan_cpus(topology, spec.osd, spec.client)
    version = spec.osd.ceph_version or ceph_version
    family = (
        option_family(spec.osd.option_naming, version)
        if spec.osd.flavor == Flavor.CRIMSON
        else "classic"
    )
    return RunPlan(
        name=name,
        cpu=cpu,
        ceph=ceph_setup(cpu, spec.osd, family),
        images=image_names(spec),
        prefill_jobs=prefill_jobs(spec, cpu.client_cpuset),
        steps=expand_steps(spec, cpu.client_cpuset),
    )
