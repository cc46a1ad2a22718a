"""plan_cpus on topologies captured from the real lscpu: exact layouts and error messages."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from crimsonbench.errors import InvalidSpec
from crimsonbench.plan.cpu import plan_cpus
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.plan.types import CpuPlan, Topology
from crimsonbench.spec.models import ClientSpec, OsdSpec, validate_spec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lscpu"


def topo(name: str) -> Topology:
    return parse_lscpu_json((FIXTURES / name).read_text())


REF = topo("xeon-8276m-2s.json")  # 2 x 28 cores x 2 threads, siblings i and i+56
ADJ = topo("adjacent-2s-8c-ht.json")  # 2 x 8 cores x 2 threads, siblings 2k and 2k+1
CLIENT = "52-55,108-111"  # the last 4 cores of node 1 for fio


def plan(t: Topology = REF, client: str | None = CLIENT, **osd: Any) -> CpuPlan:
    osd.setdefault("object_store", "seastore")  # no alien threads unless a test asks
    return plan_cpus(t, OsdSpec(**osd), ClientSpec(cpu_set=client))


def reactors(p: CpuPlan) -> list[list[int]]:
    return [list(o.reactors) for o in p.osds]


def nodes_of(t: Topology, cpus: list[int]) -> list[int]:
    by_id = t.by_id()
    return [by_id[c].node for c in cpus]


def raises(field: str, *words: str) -> Any:
    return pytest.raises(
        InvalidSpec, match=re.escape(field) + ".*" + ".*".join(map(re.escape, words))
    )


# ---------------------------------------------------------------- one big OSD


def test_one_osd_56_dual_reactors_fill_node_0_exactly() -> None:
    p = plan(client=None, count=1, reactors=56, cpu_set="0-27,56-83")
    assert p.osds[0].cpuset == "0-27,56-83"
    assert p.osds[0].reactors[:6] == (0, 56, 1, 57, 2, 58)  # siblings next to each other
    assert p.client_cpuset == "28-55,84-111"  # the rest of the machine goes to fio
    assert p.policy == "default" and p.hyper_threads == "dual"


# ---------------------------------------------------------------- 8 OSDs x 5 reactors


def test_default_dual_is_contiguous_in_node_core_thread_order() -> None:
    r = reactors(plan(count=8, reactors=5))
    assert r[0] == [0, 56, 1, 57, 2]
    assert r[1] == [58, 3, 59, 4, 60]
    assert r[5] == [68, 13, 69, 14, 70]
    assert r[7] == [73, 18, 74, 19, 75]
    assert set(nodes_of(REF, sum(r, []))) == {0}  # 40 reactors fit on node 0


def test_default_physical_uses_one_thread_per_core_and_crosses_nodes_in_order() -> None:
    r = reactors(plan(count=8, reactors=5, hyper_threads="physical"))
    assert r[0] == [0, 1, 2, 3, 4]
    assert r[5] == [25, 26, 27, 28, 29]  # node 0 is full after CPU 27
    assert r[7] == [35, 36, 37, 38, 39]
    assert not {c + 56 for c in sum(r, [])} & set(sum(r, []))  # no sibling is a reactor


def test_osd_policy_alternates_nodes_and_keeps_each_osd_on_one() -> None:
    p = plan(count=8, reactors=5, cpu_policy="osd")
    r = reactors(p)
    assert r[0] == [0, 56, 1, 57, 2]
    assert r[1] == [28, 84, 29, 85, 30]
    assert r[2] == [58, 3, 59, 4, 60]
    assert r[3] == [86, 31, 87, 32, 88]
    assert [set(nodes_of(REF, cpus)) for cpus in r] == [{0}, {1}] * 4


def test_socket_policy_splits_5_as_3_2_then_2_3() -> None:
    r = reactors(plan(count=8, reactors=5, cpu_policy="socket"))
    assert r[0] == [0, 56, 1, 28, 84]
    assert r[1] == [57, 2, 29, 85, 30]
    assert r[2] == [58, 3, 59, 86, 31]
    assert r[3] == [4, 60, 87, 32, 88]
    split = [(nodes_of(REF, c).count(0), nodes_of(REF, c).count(1)) for c in r]
    assert split == [(3, 2), (2, 3)] * 4
    all_nodes = nodes_of(REF, sum(r, []))
    assert all_nodes.count(0) == all_nodes.count(1) == 20


def test_socket_policy_physical() -> None:
    r = reactors(plan(count=2, reactors=5, cpu_policy="socket", hyper_threads="physical"))
    assert r == [[0, 1, 2, 28, 29], [3, 4, 30, 31, 32]]


# ---------------------------------------------------------------- sibling numbering


def test_adjacent_numbering_dual_and_physical() -> None:
    dual = reactors(plan(ADJ, client="30-31", count=2, reactors=4))
    assert dual == [[0, 1, 2, 3], [4, 5, 6, 7]]
    physical = reactors(plan(ADJ, client="30-31", count=2, reactors=4, hyper_threads="physical"))
    assert physical == [[0, 2, 4, 6], [8, 10, 12, 14]]


def test_physical_takes_the_lowest_allowed_thread_of_a_core() -> None:
    # fio owns CPU 0, so core 0 is represented by its other thread, 56.
    r = reactors(plan(client="0", count=1, reactors=3, hyper_threads="physical"))
    assert r == [[56, 1, 2]]


# ---------------------------------------------------------------- classic


def test_classic_default_share_is_an_equal_split_of_units() -> None:
    p = plan(
        client="100-111",
        flavor="classic",
        object_store="bluestore",
        count=4,
        hyper_threads="physical",
    )
    assert [len(o.reactors) for o in p.osds] == [14] * 4
    assert p.osds[0].cpuset == "0-13"
    assert all(o.alien == () for o in p.osds)
    assert p.alien_threads == 0


def test_classic_osd_policy_share_fits_the_fullest_node() -> None:
    # floor(56/3) = 18, but node 0 hosts 2 of the 3 OSDs and has only 28 cores.
    p = plan(
        client="100-111",
        flavor="classic",
        object_store="memstore",
        count=3,
        cpu_policy="osd",
        hyper_threads="physical",
    )
    assert [len(o.reactors) for o in p.osds] == [14] * 3
    assert [set(nodes_of(REF, list(o.reactors))) for o in p.osds] == [{0}, {1}, {0}]


def test_classic_explicit_cpus_per_osd() -> None:
    p = plan(
        ADJ, client="30-31", flavor="classic", object_store="bluestore", count=2, cpus_per_osd=3
    )
    assert reactors(p) == [[0, 1, 2], [3, 4, 5]]


# ---------------------------------------------------------------- alien threads


def test_bluestore_aliens_default_to_the_osd_cpus_reactors_leave_free() -> None:
    p = plan(
        ADJ,
        client="16-31",
        cpu_set="0-15",
        object_store="bluestore",
        count=2,
        reactors=4,
        hyper_threads="physical",
    )
    assert reactors(p) == [[0, 2, 4, 6], [8, 10, 12, 14]]
    assert p.osds[0].alien_cpuset == "1,3,5,7,9,11,13,15"  # the reactors' siblings
    assert p.osds[1].alien == p.osds[0].alien  # one set shared by all OSDs
    assert p.alien_threads == 4 * 2 * 4


def test_explicit_alien_cpu_set_is_kept_away_from_reactors() -> None:
    p = plan(
        ADJ,
        client="16-31",
        cpu_set="0-15",
        object_store="bluestore",
        count=2,
        reactors=4,
        alien_cpu_set="0-3",
        alien_threads=6,
    )
    assert reactors(p) == [[4, 5, 6, 7], [8, 9, 10, 11]]
    assert p.osds[0].alien_cpuset == "0-3"
    assert p.alien_threads == 6


# ---------------------------------------------------------------- errors


def test_no_cpu_set_at_all_asks_to_reserve_cpus_for_fio() -> None:
    with raises("spec.client.cpuSet", "reserve CPUs for fio"):
        plan(client=None, count=1)


def test_cpus_not_on_the_machine_are_named() -> None:
    with raises("spec.osd.cpuSet", "CPUs 112-200 are not on this machine", "0-111"):
        plan(cpu_set="0-200")
    with raises("spec.client.cpuSet", "CPUs 500 are not on this machine"):
        plan(client="500")


def test_offline_cpus_are_named() -> None:
    with raises("spec.osd.cpuSet", "CPUs 5 are offline"):
        plan(topo("offline-cpu5.json"), client="0", cpu_set="1-7")


def test_overlapping_sets_are_named() -> None:
    with raises("spec.client.cpuSet", "share CPUs 10-11"):
        plan(client="10-20", cpu_set="0-11")
    with raises("spec.osd.alienCpuSet", "share CPUs 52-53"):
        plan(client=CLIENT, object_store="bluestore", alien_cpu_set="40-53")


def test_not_enough_physical_cores_says_needed_vs_offered() -> None:
    with raises(
        "spec.osd.reactors",
        "8 OSDs × 5 reactors need 40 CPUs (physical cores only) but osd.cpuSet offers 28",
        "hyperThreads: dual",
    ):
        plan(client=None, count=8, reactors=5, cpu_set="0-27,56-83", hyper_threads="physical")


def test_not_enough_logical_cpus_names_count_when_reactors_default() -> None:
    with raises(
        "spec.osd.count",
        "20 OSDs × 1 reactor need 20 CPUs (logical CPUs)",
        "the machine outside client.cpuSet offers 16",
    ):
        plan(ADJ, client="0-15", count=20)


def test_osd_policy_shortage_names_the_node_and_numbers() -> None:
    # node 1 gets only cores 28-35 but has to host 2 of the 4 OSDs (10 cores)
    with raises(
        "spec.osd.reactors",
        "node 1 hosts 2 of the 4 OSDs × 5 reactors",
        "needs 10 CPUs (physical cores only)",
        "offers 8 there",
        "cpuPolicy default",
    ):
        plan(
            client=None,
            count=4,
            reactors=5,
            cpu_policy="osd",
            cpu_set="0-35",
            hyper_threads="physical",
        )


def test_socket_policy_shortage_names_the_node_and_numbers() -> None:
    with raises(
        "spec.osd.reactors",
        "cpuPolicy socket",
        "6 reactors over 2 NUMA nodes",
        "for 4 OSDs node 1 needs 12 CPUs (logical CPUs)",
        "offers 4 there",
    ):
        plan(client=None, count=4, reactors=6, cpu_policy="socket", cpu_set="0-27,28-29,84-85")


def test_classic_with_more_osds_than_cpus() -> None:
    with raises("spec.osd.count", "5 OSDs need at least one CPU each", "offers 4"):
        plan(
            ADJ,
            client="8-31",
            flavor="classic",
            object_store="bluestore",
            count=5,
            hyper_threads="physical",
        )


def test_client_or_osd_taking_everything() -> None:
    with raises("spec.osd.cpuSet", "client.cpuSet takes every online CPU"):
        plan(ADJ, client="0-31")
    with raises("spec.client.cpuSet", "none is left for fio"):
        plan(ADJ, client=None, cpu_set="0-31")


def test_bluestore_without_a_free_cpu_for_aliens() -> None:
    with raises("spec.osd.alienCpuSet", "none is left for the 32 BlueStore alien threads"):
        plan(ADJ, client="8-31", cpu_set="0-7", object_store="bluestore", count=2, reactors=4)


def test_bad_cpu_list_in_the_spec_is_reported_for_its_field() -> None:
    # refused when the spec is parsed, before any planning
    with raises("spec.osd.alienCpuSet", "runs backwards"):
        validate_spec(
            {
                "target": {"local": {}},
                "osd": {"objectStore": "bluestore", "alienCpuSet": "9-3"},
            }
        )


def test_alien_cpu_set_covering_every_osd_cpu_leaves_no_reactor() -> None:
    with raises("spec.osd.alienCpuSet", "none is left for reactors"):
        plan(ADJ, client="8-31", cpu_set="0-7", object_store="bluestore", alien_cpu_set="0-7")


# ---------------------------------------------------------------- nodes without fio


VM = topo("this-vm.json")  # this machine: 2 CPUs, 1 socket


def test_a_node_without_fio_gives_its_osds_every_cpu() -> None:
    """Multi-node Rook: an OSD node that runs no fio client needs no CPU left for fio (seen
    on kind: 2-CPU workers, reactor on 0 and alien threads on 1, fio on the other worker)."""
    osd = OsdSpec(object_store="bluestore", reactors=1, cpu_set="0", alien_cpu_set="1")
    p = plan_cpus(VM, osd, ClientSpec(), runs_fio=False)
    assert reactors(p) == [[0]] and p.osds[0].alien == (1,) and p.client == ()
    # the same node hosting a fio client: refused, naming the field and the fix
    with pytest.raises(InvalidSpec, match="none is left for fio") as err:
        plan_cpus(VM, osd, ClientSpec())
    assert err.value.field == "spec.client.cpuSet"
