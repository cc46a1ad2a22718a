"""The plan as plain JSON: what a results directory keeps of it (plan.json), for reports
and for a reader who wants to know exactly what ran."""

from __future__ import annotations

from typing import Any

from crimsonbench.plan.types import RunPlan


def plan_summary(plan: RunPlan) -> dict[str, Any]:
    return {
        "cpu": {
            "policy": plan.cpu.policy,
            "hyper_threads": plan.cpu.hyper_threads,
            "client": plan.cpu.client_cpuset,
            "alien_threads": plan.cpu.alien_threads,
            "osds": {
                f"osd.{o.osd_id}": {"cpus": o.cpuset, "alien": o.alien_cpuset}
                for o in plan.cpu.osds
            },
        },
        "ceph_config": plan.ceph.config,
        "ceph_commands": [list(c) for c in plan.ceph.commands],
        "steps": [s.id for s in plan.steps],
    }
