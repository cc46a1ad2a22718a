"""The plans the operator keeps (in kopf's memo): the largest take ~0.25 s to plan, and a
run's plan is the same every tick."""

from __future__ import annotations

from collections import OrderedDict

from crimsonbench.plan.types import RunPlan

# up to 16 plans, and at most PLAN_ITEMS_KEPT steps + jobs among them (the largest specs
# admitted hold 40,960 steps or 65,536 jobs, ~4 MiB each: bench/bench_spec_bounds.py)
PLANS_KEPT = 16
PLAN_ITEMS_KEPT = 200_000


def _items(plan: RunPlan) -> int:
    return len(plan.steps) + len(plan.fio.jobs)


class PlanCache:
    """The newest plans by their inputs, bounded by count and by steps + jobs."""

    def __init__(self, kept: int = PLANS_KEPT, items: int = PLAN_ITEMS_KEPT) -> None:
        self.plans: OrderedDict[tuple[str, ...], RunPlan] = OrderedDict()
        self.kept, self.items = kept, items

    def get(self, key: tuple[str, ...]) -> RunPlan | None:
        plan = self.plans.get(key)
        if plan is not None:
            self.plans.move_to_end(key)
        return plan

    def remember(self, key: tuple[str, ...], plan: RunPlan) -> None:
        """Into the cache, the oldest out while it holds too many plans or items."""
        self.plans[key] = plan
        while len(self.plans) > 1 and (
            len(self.plans) > self.kept or sum(map(_items, self.plans.values())) > self.items
        ):
            self.plans.popitem(last=False)
