"""Whether a run's Guaranteed pods fit their nodes, decided before anything is touched:
pure functions of what was observed (every node's allocatable, what every pod there
requests) and what the run will ask.

Why: Rook sizes every OSD pod of the cluster alike (`resources.osd`), the ones the run
does not plan too, so the patch grows every OSD pod to the planned Guaranteed size; the
run's fio servers (and its driver) come on top on the client nodes. On a shared cluster a
node without that much room keeps the new OSD pod Pending (the OSD is down until the
restore) or the fio server never starts. The scheduler counts requests against
allocatable, whatever the pods use: so does this.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from crimsonbench.controller.decisions.observed import NodeInfo, PodRequests, Size, total
from crimsonbench.errors import InvalidSpec

OSD_APP = "rook-ceph-osd"  # Rook's OSD pods' `app` label
OSD_CONTAINER = "osd"  # the container resources.osd sizes
_GIB = 2**30
_SLACK = 1e-6  # rounding of quantities parsed as floats


@dataclass(frozen=True)
class Growth:
    """What a run adds to one node's requests, and why (for the message)."""

    node: str
    what: str
    size: Size


def osd_growth(
    on_nodes: Mapping[str, Sequence[PodRequests]], rook_namespace: str, planned: Size
) -> list[Growth]:
    """Every OSD pod of the cluster (Rook's, in its namespace), resized to `planned` by
    the patch: what each adds to its node (nothing when it is that size already)."""
    out = []
    for node, pods in sorted(on_nodes.items()):
        for pod in pods:
            if pod.namespace != rook_namespace or pod.app != OSD_APP:
                continue
            after = pod.resized(OSD_CONTAINER, planned).requests
            grows = after - pod.requests
            if grows.cpu > _SLACK or grows.memory > _SLACK:
                out.append(Growth(node, f"OSD pod {pod.name}", grows))
    return out


def room_refusal(
    nodes: Mapping[str, NodeInfo],
    on_nodes: Mapping[str, Sequence[PodRequests]],
    growth: Sequence[Growth],
    osd_field: str,
) -> InvalidSpec | None:
    """None when every node has room for what the run adds there; else an InvalidSpec
    naming each node short of room, its allocatable, what its pods request, what the run
    adds, and the field that sizes it (osd_field for OSD pods, spec.client.cpuSet for fio
    alone). Nodes that state no allocatable are not judged."""
    short = []
    osd_short = False
    for name in sorted({g.node for g in growth}):
        node = nodes.get(name)
        if node is None or node.allocatable is None:
            continue
        adds = [g for g in growth if g.node == name]
        used = total(p.requests for p in on_nodes.get(name, ()))
        free = node.allocatable - used
        need = total(g.size for g in adds)
        if need.cpu <= free.cpu + _SLACK and need.memory <= free.memory + _SLACK:
            continue
        osd_short = osd_short or any(g.what.startswith("OSD pod") for g in adds)
        what = "; ".join(f"{g.what} +{_fmt(g.size)}" for g in adds)
        short.append(
            f"node {name} has {_fmt(free)} free (allocatable {_fmt(node.allocatable)} minus "
            f"{_fmt(used)} requested by its {len(on_nodes.get(name, ()))} pods), the run "
            f"adds {_fmt(need)} there ({what})"
        )
    if not short:
        return None
    field = osd_field if osd_short else "spec.client.cpuSet"
    return InvalidSpec(
        field,
        "the run's Guaranteed pods would not fit: " + "; ".join(short) + ". Rook resizes "
        "every OSD pod of the cluster to the run's size (resources.osd), the OSDs the run "
        "does not plan too, and a pod without room stays Pending (its OSD down until the "
        f"restore); ask for less ({field}: CPUs, and memory per reactor or image data), or "
        "free that room on the node first",
    )


def _fmt(size: Size) -> str:
    memory = size.memory / _GIB
    return f"cpu {size.cpu:.3g}, memory {memory:.3g} GiB"
