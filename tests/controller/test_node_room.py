"""Preflight's capacity check, without a cluster (controller/decisions/node_room.py): Rook resizes
every OSD pod of the cluster to the run's Guaranteed size, and the run's fio pods come on
top; a node without that room is refused by name, with its sizes and the field to change.
The same against a real API server's nodes and pods, under the operator's RBAC:
tests/k8s/test_reach.py."""

from __future__ import annotations

from crimsonbench.controller.decisions.node_room import Growth, osd_growth, room_refusal
from crimsonbench.controller.decisions.observed import NodeInfo, PodRequests, Size

GIB = 2**30
ROOK = "rook-ceph"
PLANNED = Size(8, 12 * GIB)  # the run's OSD pod: requests == limits


def osd(name: str, cpu: float, mem_gib: float) -> PodRequests:
    return PodRequests(ROOK, name, (("osd", Size(cpu, mem_gib * GIB)),
                                    ("log-collector", Size(0.1, 0.125 * GIB))),
                       init=(Size(0.5, 1 * GIB),), app="rook-ceph-osd")  # fmt: skip


def other(name: str, cpu: float, mem_gib: float, ns: str = "shop") -> PodRequests:
    return PodRequests(ns, name, (("app", Size(cpu, mem_gib * GIB)),))


def node(name: str, cpu: float, mem_gib: float) -> NodeInfo:
    return NodeInfo(name, {}, Size(cpu, mem_gib * GIB))


def test_a_pods_requests_count_as_the_scheduler_counts_them() -> None:
    pod = PodRequests("ns", "p", (("a", Size(1, 1)), ("b", Size(2, 2))),
                      init=(Size(5, 1),), sidecars=(Size(0.5, 4),),
                      overhead=Size(0.25, 8))  # fmt: skip
    # running: 1 + 2 + 0.5 sidecar; starting: the biggest init beside the sidecar
    assert pod.requests == Size(5.5 + 0.25, 7 + 8)
    assert pod.resized("a", Size(4, 4)).requests == Size(6.5 + 0.25, 10 + 8)


def test_every_osd_pod_of_the_cluster_grows_the_planned_ones_and_the_others() -> None:
    on = {"w1": [osd("rook-ceph-osd-0", 2, 4), other("web", 1, 1)],
          "w2": [osd("rook-ceph-osd-1", 8, 12)],  # already the run's size: no growth
          "w3": [osd("rook-ceph-osd-2", 1, 2), other("x", 1, 1, ns=ROOK)]}  # fmt: skip
    grown = osd_growth(on, ROOK, PLANNED)
    assert [(g.node, g.what, g.size) for g in grown] == [
        ("w1", "OSD pod rook-ceph-osd-0", Size(6, 8 * GIB)),
        ("w3", "OSD pod rook-ceph-osd-2", Size(7, 10 * GIB)),
    ]
    assert osd_growth(on, "another-rook", PLANNED) == []


def test_a_node_without_room_is_refused_naming_the_node_the_sizes_and_the_fix() -> None:
    on = {"w1": [osd("rook-ceph-osd-0", 2, 4), other("db", 20, 40)],
          "w2": [osd("rook-ceph-osd-1", 2, 4)]}  # fmt: skip
    nodes = {"w1": node("w1", 28, 64), "w2": node("w2", 28, 64)}
    refused = room_refusal(nodes, on, osd_growth(on, ROOK, PLANNED), "spec.osd.reactors")
    assert refused is not None and refused.field == "spec.osd.reactors"
    said = str(refused)
    # w1: 28 CPUs, 22.1 requested; +6 for its OSD pod does not fit. w2 has room.
    assert "node w1 has cpu 5.9, memory 19.9 GiB free (allocatable cpu 28, memory 64 GiB " \
        "minus cpu 22.1, memory 44.1 GiB requested by its 2 pods)" in said  # fmt: skip
    assert "the run adds cpu 6, memory 8 GiB there (OSD pod rook-ceph-osd-0 +cpu 6" in said
    assert "node w2" not in said
    assert "the OSDs the run does not plan too" in said and "free that room" in said
    nodes["w1"] = node("w1", 29, 64)
    assert room_refusal(nodes, on, osd_growth(on, ROOK, PLANNED), "spec.osd.reactors") is None


def test_fio_pods_alone_name_the_clients_field_and_silent_nodes_are_not_judged() -> None:
    on = {"c1": [other("busy", 15.5, 1)]}
    fio = [Growth("c1", "fio server c1", Size(1, 1 * GIB)),
           Growth("c1", "fio driver", Size(0.1, 0.25 * GIB))]  # fmt: skip
    refused = room_refusal({"c1": node("c1", 16, 32)}, on, fio, "spec.osd.reactors")
    assert refused is not None and refused.field == "spec.client.cpuSet"
    assert "fio server c1 +cpu 1" in str(refused) and "fio driver +cpu 0.1" in str(refused)
    assert room_refusal({"c1": NodeInfo("c1", {})}, on, fio, "spec.osd.reactors") is None
    assert room_refusal({}, on, fio, "spec.osd.reactors") is None
