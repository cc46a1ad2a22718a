"""The plan as plain JSON: what a results directory keeps of it (plan.json), for reports
and for a reader who wants to know exactly what ran."""

from __future__ import annotations

from typing import Any

from crimsonbench.plan.types import RunPlan


def plan_summary(plan: RunPlan) -> dict[str, Any]:
    # an external cluster's OSDs are not ours to plan: no hosts, no CPU layout
    first = plan.hosts[0].cpu if plan.hosts else None
    return {
        "cpu": {
            "policy": first.policy if first else None,
            "hyper_threads": first.hyper_threads if first else None,
            "alien_threads": first.alien_threads if first else None,
            "hosts": {
                h.node or "local": {
                    f"osd.{o.osd_id}": {"cpus": o.cpuset, "alien": o.alien_cpuset}
                    for o in h.cpu.osds
                }
                for h in plan.hosts
            },
        },
        "clients": {
            c.name: {"node": c.node, "cpus": c.cpuset, "images": list(c.images)}
            for c in plan.clients
        },
        "ceph_config": plan.ceph.config,
        "ceph_commands": [list(c) for c in plan.ceph.commands],
        "osd_resources": {"cpu": plan.osd_resources.cpu, "memory": plan.osd_resources.memory},
        "timing": {
            "runtime_s": plan.timing.runtime_s,
            "ramp_s": plan.timing.ramp_s,
            "deadline_s": plan.timing.deadline_s,
            "start_barrier": {
                "jobs": plan.timing.barrier_jobs,
                "cap_s": plan.timing.start_barrier_cap_s,
            },
        },
        "steps": [s.id for s in plan.steps],
    }
