"""Invariants of plan_cpus over the real-lscpu fixtures and random specs (hypothesis)."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from crimsonbench.errors import InvalidSpec
from crimsonbench.plan.cpu import plan_cpus
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.plan.types import CpuPlan, Topology
from crimsonbench.spec.cpuset import format_cpuset, parse_cpuset
from crimsonbench.spec.models import ClientSpec, OsdSpec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lscpu"
TOPOLOGIES = {
    p.name: parse_lscpu_json(p.read_text())
    for p in sorted(FIXTURES.glob("*.json"))
    if not p.name.startswith("this-vm")  # 2 CPUs: almost every spec fails there
}


@st.composite
def cases(draw: st.DrawFn) -> tuple[Topology, OsdSpec, ClientSpec]:
    topo = TOPOLOGIES[draw(st.sampled_from(sorted(TOPOLOGIES)))]
    online = sorted(topo.ids())
    client = draw(st.sets(st.sampled_from(online), min_size=1, max_size=max(1, len(online) // 4)))
    rest = [c for c in online if c not in client]
    osd_set = draw(st.none() | st.sets(st.sampled_from(rest), min_size=1) if rest else st.none())
    flavor = draw(st.sampled_from(["crimson", "classic"]))
    physical = draw(st.sampled_from(["dual", "physical"]))
    # Steer toward plannable sizes: the OSDs' share of the pool fits (most examples plan;
    # the share is asserted below), yet over-asks still happen (the +2) to test refusals.
    pool = len(osd_set) if osd_set else len(rest)
    units = max(1, pool // (2 if physical == "physical" else 1))
    count = draw(st.integers(1, max(1, min(8, units))))
    fields: dict[str, Any] = {
        "flavor": flavor,
        "count": count,
        "cpu_policy": draw(st.sampled_from(["default", "osd", "socket"])),
        "hyper_threads": physical,
        "cpu_set": format_cpuset(osd_set) if osd_set else None,
    }
    if flavor == "crimson":
        fields["reactors"] = draw(st.integers(1, max(1, units // count // 2) + 2))
        fields["object_store"] = draw(st.sampled_from(["seastore", "bluestore"]))
        if fields["object_store"] == "bluestore" and rest and draw(st.booleans()):
            alien = draw(st.sets(st.sampled_from(rest), min_size=1, max_size=4))
            fields["alien_cpu_set"] = format_cpuset(alien)
    else:
        fields["object_store"] = "bluestore"
        fields["cpus_per_osd"] = draw(st.none() | st.integers(1, max(1, units // count) + 2))
    osd_only = draw(st.booleans()) and osd_set is not None  # fio gets what the OSDs leave
    return topo, OsdSpec(**fields), ClientSpec(cpu_set=None if osd_only else format_cpuset(client))


OUTCOMES: Counter[str] = Counter()
MIN_PLANNED_SHARE = 0.6  # measured 0.82 (327 of 400) with the strategy above


@settings(
    max_examples=int(os.environ.get("PLAN_EXAMPLES", "400")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(cases())
def _plan_invariants(case: tuple[Topology, OsdSpec, ClientSpec]) -> None:
    topo, osd, client = case
    try:
        plan = plan_cpus(topo, osd, client)
    except InvalidSpec as exc:  # anything else fails the test
        event(f"InvalidSpec {exc.field}")
        OUTCOMES["refused"] += 1
        assert exc.field.startswith("spec.") and exc.message
        return
    event("planned")
    OUTCOMES["planned"] += 1
    check_plan(topo, osd, client, plan)


def test_plan_invariants_on_mostly_plannable_specs() -> None:
    """The invariants over every example, and a floor on how many examples really plan:
    a strategy that drifts into refusals would otherwise check nothing."""
    OUTCOMES.clear()
    _plan_invariants()
    total = sum(OUTCOMES.values())
    assert total >= 50, OUTCOMES
    assert OUTCOMES["planned"] / total >= MIN_PLANNED_SHARE, OUTCOMES
    assert OUTCOMES["refused"] > 0, "no refusal was exercised: widen the over-asks"


def check_plan(topo: Topology, osd: OsdSpec, client: ClientSpec, plan: CpuPlan) -> None:
    online = topo.ids()
    given_client, alien = _ids(client.cpu_set), _ids(osd.alien_cpu_set)
    allowed = _ids(osd.cpu_set) if osd.cpu_set else online - given_client
    reactors = [c for o in plan.osds for c in o.reactors]
    assert len(reactors) == len(set(reactors)), "a CPU was given twice"
    assert set(reactors) <= allowed - alien
    assert not set(plan.client) & plan.osd_cpus(), "fio shares CPUs with the OSDs"
    assert set(plan.client) == (given_client if client.cpu_set else online - allowed - alien)
    sizes = {len(o.reactors) for o in plan.osds}
    assert len(plan.osds) == osd.count and len(sizes) == 1 and min(sizes) >= 1
    if osd.flavor == "crimson":
        assert sizes == {osd.reactors_per_osd}
    _check_aliens(osd, plan, allowed, set(reactors))
    _check_policy(topo, osd, plan, allowed - alien)


def _ids(text: str | None) -> frozenset[int]:
    return parse_cpuset(text) if text else frozenset()


def _check_aliens(osd: OsdSpec, plan: CpuPlan, allowed: frozenset[int], used: set[int]) -> None:
    if osd.alien_thread_count == 0:
        assert all(o.alien == () for o in plan.osds) and plan.alien_threads == 0
        return
    alien = set(plan.osds[0].alien)
    assert alien and all(set(o.alien) == alien for o in plan.osds)
    assert not alien & used
    if osd.alien_cpu_set:
        assert alien == _ids(osd.alien_cpu_set)
    else:
        assert alien == set(allowed) - used  # the CPUs the reactors leave free
    assert plan.alien_threads == osd.alien_thread_count


def _check_policy(topo: Topology, osd: OsdSpec, plan: CpuPlan, pool: frozenset[int]) -> None:
    by_id = topo.by_id()
    domains = sorted({by_id[c].node for c in pool})  # the nodes reactors may use
    for o in plan.osds:
        per_node = Counter(by_id[c].node for c in o.reactors)
        if osd.cpu_policy == "osd":
            assert len(per_node) == 1, f"OSD {o.osd_id} spans nodes {sorted(per_node)}"
        if osd.cpu_policy == "socket":
            counts = [per_node.get(d, 0) for d in domains]
            assert max(counts) - min(counts) <= 1, f"OSD {o.osd_id} split {counts}"
    if osd.hyper_threads == "physical":
        cores = [by_id[c].physical_core for o in plan.osds for c in o.reactors]
        assert len(cores) == len(set(cores)), "two reactors on one physical core"


@settings(max_examples=100, deadline=None)
@given(cases())
def test_plan_is_deterministic(case: tuple[Topology, OsdSpec, ClientSpec]) -> None:
    topo, osd, client = case
    try:
        first = plan_cpus(topo, osd, client)
    except InvalidSpec:
        return
    assert plan_cpus(topo, osd, client) == first
