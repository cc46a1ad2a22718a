"""The operator's plan cache holds a few plans, and never more steps + jobs than its
budget: the largest specs admitted hold ~4 MiB of plan each (bench/bench_spec_bounds.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from crimsonbench.controller import stages
from crimsonbench.plan.build import build_plan
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.plan.types import FioJob, RunPlan
from crimsonbench.spec.models import validate_spec

LSCPU = Path(__file__).resolve().parents[1] / "fixtures" / "lscpu" / "single-socket-8-noht.json"


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    stages._PLANS.clear()
    yield
    stages._PLANS.clear()


def plan_with(jobs: int) -> RunPlan:
    spec = validate_spec({"target": {"local": {}}, "osd": {"flavor": "classic", "cpuSet": "0"},
                          "client": {"cpuSet": "1"}})  # fmt: skip
    plan = build_plan("p", spec, parse_lscpu_json(LSCPU.read_text()))
    fio = replace(plan.fio, jobs=tuple(FioJob(f"i{n}", "client-0") for n in range(jobs)))
    return replace(plan, fio=fio)


def test_small_plans_up_to_the_count() -> None:
    small = plan_with(10)
    for i in range(stages._PLANS_KEPT + 3):
        stages.remember_plan((str(i),), small)
    assert list(stages._PLANS) == [(str(i),) for i in range(3, stages._PLANS_KEPT + 3)]


def test_large_plans_up_to_the_item_budget_the_newest_always_kept() -> None:
    steps = len(plan_with(0).steps)
    big = plan_with(stages._PLAN_ITEMS_KEPT // 3 - steps)  # three fill the budget exactly
    for i in range(5):
        stages.remember_plan((str(i),), big)
    assert list(stages._PLANS) == [("2",), ("3",), ("4",)]  # three fit the budget
    huge = plan_with(stages._PLAN_ITEMS_KEPT * 2)
    stages.remember_plan(("huge",), huge)
    assert list(stages._PLANS) == [("huge",)]  # alone over budget, still kept
