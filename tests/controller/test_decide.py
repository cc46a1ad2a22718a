"""The operator's decisions before anything is touched, without a cluster: which OSDs and
client nodes a run uses, preflight against what a real cluster says of itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crimsonbench.controller.decisions.decide import (
    ClusterFacts,
    preflight,
    select_client_nodes,
    select_osds,
)
from crimsonbench.controller.decisions.observed import NodeInfo, OsdPod
from crimsonbench.errors import ExecutionError, InvalidSpec
from crimsonbench.plan.build import build_plan
from crimsonbench.plan.hosts import ClusterLayout
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.results.step_log import parse_sections
from crimsonbench.spec.models import ClientSpec, RookTarget, validate_spec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# what the facts Job printed on a real pacific cluster (tests/fixtures/ceph/capture.py)
PACIFIC = ClusterFacts.from_sections(
    parse_sections((FIXTURES / "ceph" / "facts-16.2.15-classic.txt").read_text())
)
ADJ = parse_lscpu_json((FIXTURES / "lscpu" / "adjacent-2s-8c-ht.json").read_text())


def pods(**placement: str | None) -> list[OsdPod]:
    return [OsdPod(int(k[3:]), v, ready=True) for k, v in placement.items()]


# ---------------------------------------------------------------- where OSDs run


def test_every_osd_stays_where_rook_runs_it() -> None:
    found = select_osds(pods(osd0="a", osd1="b", osd2="a"), RookTarget(cluster_name="c"))
    assert found == {0: "a", 1: "b", 2: "a"}


def test_osd_nodes_and_ids_narrow_the_run() -> None:
    p = pods(osd0="a", osd1="b", osd2="a", osd3="c")
    assert select_osds(p, RookTarget(cluster_name="c", osd_nodes=["a"])) == {0: "a", 2: "a"}
    only = RookTarget(cluster_name="c", osd_nodes=["a", "c"], osd_ids=[3])
    assert select_osds(p, only) == {3: "c"}


def test_a_node_without_osds_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidSpec, match="no OSD of the cluster runs on z") as err:
        select_osds(pods(osd0="a"), RookTarget(cluster_name="c", osd_nodes=["z"]))
    assert err.value.field == "spec.target.rook.osdNodes"
    with pytest.raises(InvalidSpec, match=r"osd\(s\) \[5\]") as err:
        select_osds(pods(osd0="a"), RookTarget(cluster_name="c", osd_ids=[5]))
    assert err.value.field == "spec.target.rook.osdIds"


def test_an_unscheduled_osd_stops_planning_and_terminating_pods_do_not_count() -> None:
    with pytest.raises(ExecutionError, match=r"\[1\] are not running"):
        select_osds(pods(osd0="a", osd1=None), RookTarget(cluster_name="c"))
    old = OsdPod(1, "x", ready=False, terminating=True)
    assert select_osds([*pods(osd0="a"), old], RookTarget(cluster_name="c")) == {0: "a"}


def test_osd_count_must_match_the_cluster() -> None:
    spec = validate_spec(
        {
            "target": {"rook": {"clusterName": "c"}},
            "osd": {"flavor": "classic", "count": 3},
            "client": {"cpuSet": "15", "node": "a"},
        }
    )
    layout = ClusterLayout({"a": ADJ, "b": ADJ}, {0: "a", 1: "b"}, ("a",))
    with pytest.raises(InvalidSpec, match="plans 3 OSDs but 2 are selected") as err:
        build_plan("r", spec, layout)
    assert err.value.field == "spec.osd.count"


def test_an_osd_node_without_fio_plans_its_cpus_for_the_osd_alone() -> None:
    """kind's 2-CPU workers: osd.0's reactor on CPU 0 and its alien threads on CPU 1 of
    node a, fio on CPU 1 of node b; planned per node, a alone would leave fio nothing."""
    vm = parse_lscpu_json((FIXTURES / "lscpu" / "this-vm.json").read_text())
    spec = validate_spec(
        {
            "target": {"rook": {"clusterName": "c", "osdNodes": ["a"]}},
            "osd": {"objectStore": "bluestore", "reactors": 1, "cpuSet": "0",
                    "alienCpuSet": "1", "cephVersion": "20.2.4"},
            "client": {"nodes": ["b"], "nodeCpuSets": {"b": "1"}},
        }
    )  # fmt: skip
    plan = build_plan("r", spec, ClusterLayout({"a": vm, "b": vm}, {0: "a"}, ("b",)))
    (host,) = plan.hosts
    assert host.node == "a" and host.cpu.osds[0].reactors == (0,)
    assert host.cpu.osds[0].alien == (1,)
    assert [(c.node, c.cpus) for c in plan.clients] == [("b", (1,))]
    # fio on a as well: nothing left for it there, said with the node and the field
    both = spec.model_copy(update={"client": spec.client.model_copy(update={"nodes": ["a", "b"]})})
    with pytest.raises(InvalidSpec, match="on node a: .*none is left for fio") as err:
        build_plan("r", both, ClusterLayout({"a": vm, "b": vm}, {0: "a"}, ("a", "b")))
    assert err.value.field == "spec.client.cpuSet"


# ---------------------------------------------------------------- client nodes


NODES = [
    NodeInfo("w3", {"role": "client"}),
    NodeInfo("w1", {"role": "client"}),
    NodeInfo("w2", {"role": "storage"}),
]


def test_client_nodes_named_or_selected_by_label_in_name_order() -> None:
    assert select_client_nodes(ClientSpec(nodes=["w2", "w1"]), NODES) == ("w2", "w1")
    assert select_client_nodes(ClientSpec(node="w3"), NODES) == ("w3",)
    chosen = select_client_nodes(ClientSpec(node_selector={"role": "client"}), NODES)
    assert chosen == ("w1", "w3")
    one = ClientSpec(node_selector={"role": "client"}, count=1)
    assert select_client_nodes(one, NODES) == ("w1",)


def test_client_node_problems_name_the_field() -> None:
    with pytest.raises(InvalidSpec, match="no node named nope") as err:
        select_client_nodes(ClientSpec(nodes=["w1", "nope"]), NODES)
    assert err.value.field == "spec.client.nodes"
    few = ClientSpec(node_selector={"role": "client"}, count=3)
    with pytest.raises(InvalidSpec, match="2 node") as err:
        select_client_nodes(few, NODES)
    assert err.value.field == "spec.client.nodeSelector"


# ---------------------------------------------------------------- preflight, real facts


def spec(**osd: Any) -> Any:
    return validate_spec(
        {
            "target": {"rook": {"clusterName": "c"}},
            "osd": {"count": 2, **osd},
            "client": {"node": "vm", "pool": "bench"},
        }
    )


def test_a_classic_spec_on_the_classic_pacific_cluster_passes() -> None:
    assert (
        preflight(spec(flavor="classic", objectStore="memstore"), PACIFIC, {0: "vm", 1: "vm"}) == ""
    )


def test_a_crimson_spec_against_classic_osds_is_refused_saying_so() -> None:
    with pytest.raises(InvalidSpec, match=r"osd\.0 on vm is a classic ceph-osd OSD") as err:
        preflight(spec(flavor="crimson", objectStore="bluestore"), PACIFIC, {0: "vm", 1: "vm"})
    assert err.value.field == "spec.osd.flavor"


def test_the_object_store_must_be_the_one_deployed() -> None:
    with pytest.raises(InvalidSpec, match="osd.0 runs memstore") as err:
        preflight(spec(flavor="classic", objectStore="bluestore"), PACIFIC, {0: "vm"})
    assert err.value.field == "spec.osd.objectStore"


def test_an_existing_pool_is_never_adopted() -> None:
    s = validate_spec(
        {
            "target": {"rook": {"clusterName": "c"}},
            "osd": {"flavor": "classic", "objectStore": "memstore", "count": 1},
            "client": {"node": "vm", "pool": "rbd"},
        }
    )
    with pytest.raises(InvalidSpec, match="pool rbd exists already") as err:
        preflight(s, PACIFIC, {0: "vm"})
    assert err.value.field == "spec.client.pool"


def test_the_option_names_come_from_the_mons_and_pacific_has_no_cpu_set() -> None:
    """Real pacific mons know crimson_osd_* options but no crimson CPU-set option."""
    assert {o for o in PACIFIC.known_options if o.startswith("crimson_")} == {
        "crimson_osd_obc_lru_size",
        "crimson_osd_scheduler_concurrency",
    }
    crimson_facts = ClusterFacts(
        PACIFIC.known_options,
        {0: PACIFIC.osds[0].__class__(0, True, "bluestore", "vm")},
        PACIFIC.pools,
    )
    with pytest.raises(InvalidSpec, match="know no crimson CPU-set option"):
        preflight(spec(flavor="crimson", objectStore="bluestore"), crimson_facts, {0: "vm"})


def test_option_names_the_mons_do_not_know_are_refused_before_anything_is_touched() -> None:
    """Against the option list a real pacific mon printed (`ceph config ls`): a real name
    passes; a misspelt one, or one only newer Cephs know, is refused naming the field,
    with the closest name the mons know."""
    ok = spec(flavor="classic", objectStore="memstore", cephConfig={"osd_op_num_shards": "4"})
    assert "osd_op_num_shards" in PACIFIC.known_options
    assert preflight(ok, PACIFIC, {0: "vm", 1: "vm"}) == ""
    typo = spec(flavor="classic", objectStore="memstore",
                cephConfig={"osd_op_num_shards": "4", "osd_op_num_shardz": "4",
                            "crimson_cpu_set": "0"})  # fmt: skip
    with pytest.raises(InvalidSpec) as err:
        preflight(typo, PACIFIC, {0: "vm", 1: "vm"})
    assert err.value.field == "spec.osd.cephConfig"
    said = str(err.value)
    assert "know no option crimson_cpu_set" in said and "`ceph config ls`" in said
    assert "osd_op_num_shardz (did you mean osd_op_num_shards?)" in said
