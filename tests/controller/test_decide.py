"""The operator's decisions, without a cluster: which OSDs and client nodes a run uses,
preflight against what a real cluster says of itself, rollout, fio servers, steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crimsonbench.controller import decide
from crimsonbench.controller.decide import (
    ClusterFacts,
    NodeInfo,
    OsdPod,
    PodState,
    Progress,
    expected_jobs,
    preflight,
    rollout,
    select_client_nodes,
    select_osds,
    server_addresses,
)
from crimsonbench.errors import ExecutionError, InvalidSpec
from crimsonbench.manifests.fio_driver import StepReport
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


# ---------------------------------------------------------------- rollout


def _plan(**client: Any) -> Any:
    s = validate_spec(
        {
            "target": {"rook": {"clusterName": "c"}},
            "osd": {"flavor": "classic", "count": 2, "cpuSet": "0-3"},
            "client": {"cpuSet": "8-11", **client},
        }
    )
    nodes = client.get("nodes") or [client["node"]]
    layout = ClusterLayout({n: ADJ for n in {"a", "b", *nodes}}, {0: "a", 1: "b"}, tuple(nodes))
    return build_plan("r", s, layout)


def test_rollout_waits_for_rook_then_every_osd_with_the_planned_limits() -> None:
    plan = _plan(node="a")
    want = (str(plan.osd_resources.cpu), plan.osd_resources.memory)
    ready = {"observedGeneration": 3, "phase": "Ready"}
    old = [OsdPod(0, "a", True, "1", "1Gi"), OsdPod(1, "b", True, "1", "1Gi")]
    new = [OsdPod(0, "a", True, *want), OsdPod(1, "b", True, *want)]
    assert not rollout(plan, {0: "a", 1: "b"}, new, {"observedGeneration": 2}, 3).done
    assert "not rolled out" in rollout(plan, {0: "a", 1: "b"}, old, ready, 3).message
    starting = [OsdPod(0, "a", False, *want), new[1]]
    assert "not Ready" in rollout(plan, {0: "a", 1: "b"}, starting, ready, 3).message
    assert rollout(plan, {0: "a", 1: "b"}, new, ready, 3) == Progress(
        True, "2 OSDs Ready with the planned resources"
    )


def test_an_osd_that_moved_fails_the_run() -> None:
    plan = _plan(node="a")
    want = (str(plan.osd_resources.cpu), plan.osd_resources.memory)
    moved = [OsdPod(0, "a", True, *want), OsdPod(1, "a", True, *want)]
    with pytest.raises(ExecutionError, match="osd.1 moved from node b to a"):
        rollout(plan, {0: "a", 1: "b"}, moved, {"observedGeneration": 1, "phase": "Ready"}, 1)


# ---------------------------------------------------------------- fio servers and steps


def test_servers_ready_on_their_nodes_give_their_addresses() -> None:
    plan = _plan(nodes=["a", "c"])
    up = {"a": PodState("Running", True, "10.0.0.1", "a"), "c": PodState("Pending")}
    waiting = server_addresses(plan, up, 8765)
    assert isinstance(waiting, Progress) and "c (Pending)" in waiting.message
    up["c"] = PodState("Running", True, "10.0.0.3", "c")
    assert server_addresses(plan, up, 8765) == {"a": "10.0.0.1:8765", "c": "10.0.0.3:8765"}
    up["c"] = PodState("Failed", reason="Evicted")
    with pytest.raises(ExecutionError, match="fio server of c ended"):
        server_addresses(plan, up, 8765)


def test_expected_job_counts() -> None:
    plan = _plan(nodes=["a", "c"])
    # the default 32 images over two clients, one job per image
    assert expected_jobs(plan) == {"a": 16, "c": 16}


# ---------------------------------------------------------------- OSDs at rest, restarts


def _pod(osd: int, **kw: object) -> decide.OsdPod:
    base: dict[str, object] = {"osd_id": osd, "node": "n1", "ready": True, "uid": f"u{osd}"}
    return decide.OsdPod(**{**base, **kw})  # type: ignore[arg-type]


def test_osds_at_rest_names_the_first_osd_that_is_not() -> None:
    assert decide.osds_at_rest([0, 1], [_pod(0), _pod(1)]) == ""
    going = [_pod(0), _pod(1, terminating=True), _pod(1, uid="new", ready=False)]
    assert decide.osds_at_rest([0, 1], going) == "osd.1 has 1 running and 1 terminating pods"
    assert decide.osds_at_rest([0, 1], [_pod(0), _pod(1, ready=False)]) == "osd.1 is not Ready"
    assert decide.osds_at_rest([2], [_pod(0)]) == "osd.2 has 0 running and 0 terminating pods"


def test_a_restart_during_a_step_is_a_disturbance() -> None:
    pods = [_pod(0), _pod(1)]
    before = decide.osd_incarnations([0, 1], pods)
    assert decide.osd_disturbance(before, pods) == ""
    restarted = [_pod(0, restarts=1), _pod(1)]  # same pod, its container restarted
    assert "osd.0 restarted during the step" in decide.osd_disturbance(before, restarted)
    replaced = [_pod(0), _pod(1, uid="u1-new")]  # a new pod
    assert "osd.1 restarted during the step" in decide.osd_disturbance(before, replaced)
    assert "osd.1 has no pod" in decide.osd_disturbance(before, [_pod(0)])


def test_osds_running_with_compares_quantities_not_strings() -> None:
    pods = [_pod(0, cpu_limit="2", memory_limit="4Gi"), _pod(1, cpu_limit="2000m",
                                                             memory_limit="4096Mi")]  # fmt: skip
    assert decide.osds_running_with([0, 1], pods, ("2", "4Gi")).done
    late = decide.osds_running_with([0, 1], pods, ("3", "4Gi"))
    assert not late.done and "osd.0 still has limits cpu=2" in late.message
    none = decide.osds_running_with([0], [_pod(0)], (None, None))  # the original had none
    assert none.done


@pytest.mark.parametrize(
    ("state", "started", "now", "wait"),
    [
        ("running", 100.0, 101.0, 0.0),  # 13 s left of 14: the next tick polls again
        ("running", 100.0, 112.5, 1.5 + decide.WAIT_MARGIN_S),  # ends before the next tick
        ("running", 100.0, 120.0, decide.WAIT_MARGIN_S),  # overdue: fio is ending
        ("running", 0.0, 120.0, 0.0),  # started not yet written
        ("missing", 0.0, 120.0, 0.0),
    ],
)
def test_a_tick_waits_in_the_driver_only_for_a_step_about_to_end(
    state: str, started: float, now: float, wait: float
) -> None:
    report = StepReport(state, now, started)
    assert decide.wait_for_step_end(report, expected_s=14, tick_s=2) == pytest.approx(wait)
