"""parse_lscpu_json against output captured from the real lscpu (tests/fixtures/lscpu)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from crimsonbench.errors import ParseError
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.plan.types import Topology
from crimsonbench.spec.cpuset import format_cpuset

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lscpu"
ALL = sorted(p.name for p in FIXTURES.glob("*.json"))


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def topo(name: str) -> Topology:
    return parse_lscpu_json(text(name))


def sibling_groups(t: Topology) -> set[frozenset[int]]:
    return {frozenset(t.siblings(c.id)) for c in t.online()}


def node_cpus(t: Topology, node: int) -> str:
    return format_cpuset(c.id for c in t.online() if c.node == node)


@pytest.mark.parametrize("name", ALL)
def test_every_fixture_parses_one_cpu_per_row(name: str) -> None:
    t = topo(name)
    rows = len(re.findall(r'"cpu":', text(name)))
    assert [c.id for c in t.cpus] == sorted({c.id for c in t.cpus})
    assert len(t.cpus) == rows
    assert t.online()


def test_reference_xeon_siblings_are_i_and_i_plus_56() -> None:
    t = topo("xeon-8276m-2s.json")
    assert len(t.cpus) == 112
    assert t.nodes() == (0, 1)
    assert node_cpus(t, 0) == "0-27,56-83"
    assert node_cpus(t, 1) == "28-55,84-111"
    assert all(t.siblings(i) == (i, i + 56) for i in range(56))
    assert {c.socket for c in t.cpus if c.node == 1} == {1}


def test_physical_core_ids_give_the_same_siblings_as_logical_ones() -> None:
    # `-y` prints the kernel's core_id, which restarts per socket and has gaps.
    logical, physical = topo("xeon-8276m-2s.json"), topo("xeon-8276m-2s-physical-ids.json")
    assert {c.core for c in physical.cpus if c.socket == 1} != {
        c.core for c in logical.cpus if c.socket == 1
    }
    assert sibling_groups(physical) == sibling_groups(logical)
    assert [c.node for c in physical.cpus] == [c.node for c in logical.cpus]


@pytest.mark.parametrize("name", ["adjacent-2s-8c-ht.json", "adjacent-2s-8c-ht-plain.json"])
def test_adjacent_siblings_are_detected_by_socket_and_core(name: str) -> None:
    t = topo(name)
    assert len(t.cpus) == 32
    assert all(t.siblings(2 * k) == (2 * k, 2 * k + 1) for k in range(16))
    assert node_cpus(t, 0) == "0-15"
    assert node_cpus(t, 1) == "16-31"


def test_single_socket_without_hyperthreads_has_one_cpu_per_core() -> None:
    t = topo("single-socket-8-noht.json")
    assert t.nodes() == (0,)
    assert all(t.siblings(c.id) == (c.id,) for c in t.cpus)


def test_offline_cpu_with_lscpu_bare_dash_is_parsed_as_offline() -> None:
    raw = text("offline-cpu5.json")
    with pytest.raises(json.JSONDecodeError):  # lscpu 2.38 really prints `"node": -`
        json.loads(raw)
    t = parse_lscpu_json(raw)
    assert [c.id for c in t.cpus if not c.online] == [5]
    assert t.ids() == frozenset({0, 1, 2, 3, 4, 6, 7})
    assert t.siblings(0) == (0, 4)
    assert t.siblings(1) == (1,)  # its sibling 5 is offline and shows no topology


@pytest.mark.parametrize("name", ["no-numa-2s.json", "no-numa-2s-plain.json"])
def test_without_numa_the_node_is_the_socket(name: str) -> None:
    t = topo(name)
    assert all(c.node == c.socket for c in t.cpus)
    assert t.nodes() == (0, 1)
    assert t.siblings(0) == (0, 8)


def test_this_vm() -> None:
    t = topo("this-vm.json")
    assert t.ids() == frozenset({0, 1})
    assert topo("this-vm-plain.json") == t


# ------------------------------------------------- other lscpu versions' spellings


def _rewrite(name: str, **changes: object) -> str:
    """A real fixture with each row's values rewritten, as other lscpu versions print them."""
    doc = json.loads(re.sub(r"(:\s*)-(?=\s*[,}\]])", r'\1"-"', text(name)))
    for row in doc["cpus"]:
        for key, fn in changes.items():
            if key in row:
                row[key] = fn(row[key])  # type: ignore[operator]
    return json.dumps(doc)


def test_online_as_yes_no_strings() -> None:
    yes_no = _rewrite("offline-cpu5.json", online=lambda v: "yes" if v else "no")
    assert parse_lscpu_json(yes_no) == topo("offline-cpu5.json")


def test_numbers_as_strings_and_quoted_dash() -> None:
    # util-linux before 2.37 printed every cell as a string; 2.41 quotes the empty "-".
    as_strings = _rewrite(
        "offline-cpu5.json", cpu=str, node=str, socket=str, core=str, online=lambda v: v
    )
    assert '"node": "-"' in as_strings
    assert parse_lscpu_json(as_strings) == topo("offline-cpu5.json")


# ------------------------------------------------- garbage


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ("", "printed nothing"),
        ("CPU NODE SOCKET\n0 0 0\n", "not JSON"),
        ('{"lscpu": [{"field": "CPU(s):", "data": "2"}]}', "summary"),
        ('{"cpus": []}', "no 'cpus' list"),
        ('{"cpus": [7]}', "not an object"),
        ('{"cpus": [{"cpu": 0, "core": 0, "online": true}]}', "no SOCKET column"),
        ('{"cpus": [{"cpu": 0, "socket": 0, "core": "x"}]}', "core of CPU 0 is 'x'"),
        ('{"cpus": [{"cpu": 0, "socket": 0, "core": 0, "online": "maybe"}]}', "true/false"),
        (
            '{"cpus": [{"cpu": 1, "socket": 0, "core": 0}, {"cpu": 1, "socket": 0, "core": 1}]}',
            "CPU 1 more than once",
        ),
        ('{"cpus": [{"cpu": 0, "socket": null, "core": null, "online": false}]}', "no online CPU"),
    ],
)
def test_garbage_raises_parse_error_saying_what_is_wrong(bad: str, words: str) -> None:
    with pytest.raises(ParseError, match=re.escape(words)):
        parse_lscpu_json(bad)
