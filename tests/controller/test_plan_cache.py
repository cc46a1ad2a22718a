"""The operator's plan cache holds a few plans, and never more steps + jobs than its
budget: the largest specs admitted hold ~4 MiB of plan each (bench/bench_spec_bounds.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from crimsonbench.controller.plan_cache import PLAN_ITEMS_KEPT, PLANS_KEPT, PlanCache
from crimsonbench.plan.build import build_plan
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.plan.types import FioJob, RunPlan
from crimsonbench.spec.models import validate_spec

LSCPU = Path(__file__).resolve().parents[1] / "fixtures" / "lscpu" / "single-socket-8-noht.json"


def plan_with(jobs: int) -> RunPlan:
    spec = validate_spec({"target": {"local": {}}, "osd": {"flavor": "classic", "cpuSet": "0"},
                          "client": {"cpuSet": "1"}})  # fmt: skip
    plan = build_plan("p", spec, parse_lscpu_json(LSCPU.read_text()))
    fio = replace(plan.fio, jobs=tuple(FioJob(f"i{n}", "client-0") for n in range(jobs)))
    return replace(plan, fio=fio)


def test_small_plans_up_to_the_count() -> None:
    small, cache = plan_with(10), PlanCache()
    for i in range(PLANS_KEPT + 3):
        cache.remember((str(i),), small)
    assert list(cache.plans) == [(str(i),) for i in range(3, PLANS_KEPT + 3)]


def test_large_plans_up_to_the_item_budget_the_newest_always_kept() -> None:
    steps, cache = len(plan_with(0).steps), PlanCache()
    big = plan_with(PLAN_ITEMS_KEPT // 3 - steps)  # three fill the budget exactly
    for i in range(5):
        cache.remember((str(i),), big)
    assert list(cache.plans) == [("2",), ("3",), ("4",)]  # three fit the budget
    assert cache.get(("2",)) is big and list(cache.plans)[-1] == ("2",)  # used: newest
    huge = plan_with(PLAN_ITEMS_KEPT * 2)
    cache.remember(("huge",), huge)
    assert list(cache.plans) == [("huge",)]  # alone over budget, still kept
