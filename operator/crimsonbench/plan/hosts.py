"""Which machine runs what. Every OSD host is planned from its own CPU topology (the OSDs
already there keep their place: placement is observed, never decided here); every fio
client gets its CPUs and its share of the images. Pure.

A local run is one host (node None, this machine) with `client.count` fio clients sharing
the client CPU set; on Kubernetes each client node runs one client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from crimsonbench.errors import InvalidSpec
from crimsonbench.plan.cpu import plan_cpus
from crimsonbench.plan.types import ClientPlan, CpuPlan, HostPlan, OsdCpus, Topology
from crimsonbench.spec.cpuset import format_cpuset, parse_cpuset
from crimsonbench.spec.models import BenchmarkRunSpec, ClientSpec

Node = str | None  # None: this machine


@dataclass(frozen=True)
class ClusterLayout:
    """What the executor observed: each machine's CPUs, where each OSD runs, and the
    nodes fio runs on (in client order)."""

    topologies: Mapping[Node, Topology]
    placement: Mapping[int, Node]  # OSD id -> the node it runs on
    client_nodes: tuple[Node, ...]
    osd_field: str = "spec.osd.count"  # how an OSD-count mismatch is named
    plan_osds: bool = True  # False for external clusters: their OSDs are not ours to touch

    @classmethod
    def single(cls, topology: Topology, spec: BenchmarkRunSpec) -> ClusterLayout:
        """One machine with every OSD and client: local mode, or `plan` for a host
        described by an lscpu file."""
        clients = spec.client.count or len(spec.client.named_nodes) or 1
        return cls({None: topology}, dict.fromkeys(range(spec.osd.count)), (None,) * clients)


def plan_hosts(
    spec: BenchmarkRunSpec, layout: ClusterLayout, owner: str = ""
) -> tuple[tuple[HostPlan, ...], tuple[ClientPlan, ...]]:
    """owner: the run's tag in its image names (plan.build.build_plan)."""
    if not layout.plan_osds:
        return (), _clients(spec, layout, (), owner)
    _check_count(spec, layout)
    nodes = sorted(set(layout.placement.values()), key=lambda n: n or "")
    # on Kubernetes a refusal names the node: its CPUs, not the spec alone, decided it
    named = any(n is not None for n in nodes)
    hosts = tuple(_host(spec, layout, node, named) for node in nodes)
    clients = _clients(spec, layout, hosts, owner)
    return hosts, clients


def _check_count(spec: BenchmarkRunSpec, layout: ClusterLayout) -> None:
    found = len(layout.placement)
    if found != spec.osd.count:
        where = ", ".join(
            f"{n}: {sum(1 for m in layout.placement.values() if m == n)}"
            for n in sorted({n or "local" for n in layout.placement.values()})
        )
        raise InvalidSpec(
            layout.osd_field,
            f"the spec plans {spec.osd.count} OSDs but {found} are selected on the cluster "
            f"({where or 'none'}); set osd.count: {found}, or select OSDs with "
            "target.rook.osdNodes / osdIds. OSDs are never moved or created by a run",
        )


def _host(spec: BenchmarkRunSpec, layout: ClusterLayout, node: Node, named: bool) -> HostPlan:
    ids = sorted(i for i, n in layout.placement.items() if n == node)
    topology = _topology(layout, node)
    osd = spec.osd.model_copy(update={"count": len(ids)})
    try:
        runs_fio = node in layout.client_nodes
        cpu = plan_cpus(topology, osd, _client_spec_on(spec.client, node), runs_fio)
    except InvalidSpec as exc:
        if not named:
            raise
        raise InvalidSpec(exc.field, f"on node {node}: {exc.message}") from None
    osds = tuple(
        OsdCpus(osd_id, o.reactors, o.alien) for osd_id, o in zip(ids, cpu.osds, strict=True)
    )
    planned = CpuPlan(cpu.policy, cpu.hyper_threads, osds, cpu.client, cpu.alien_threads)
    return HostPlan(node, planned)


def _topology(layout: ClusterLayout, node: Node) -> Topology:
    try:
        return layout.topologies[node]
    except KeyError:
        raise ValueError(f"no CPU topology for node {node!r}") from None


def _client_spec_on(client: ClientSpec, node: Node) -> ClientSpec:
    """The client section as it applies on one node (its own CPU set, if given)."""
    override = client.node_cpu_sets.get(node) if node is not None else None
    return client if override is None else client.model_copy(update={"cpu_set": override})


def _clients(
    spec: BenchmarkRunSpec, layout: ClusterLayout, hosts: Sequence[HostPlan], owner: str
) -> tuple[ClientPlan, ...]:
    by_node = {h.node: h for h in hosts}
    cpus: list[tuple[str, Node, tuple[int, ...]]] = []
    if all(n is None for n in layout.client_nodes):  # local: split this machine's client set
        shared = by_node[None].cpu.client if None in by_node else ()
        for i, part in enumerate(_split(shared, len(layout.client_nodes))):
            cpus.append((f"client-{i}", None, part))
    else:
        for node in layout.client_nodes:
            host = by_node.get(node)
            own = host.cpu.client if host else _client_only_cpus(spec.client, layout, node)
            cpus.append((str(node), node, own))
    prefix = f"{spec.client.image_prefix}{owner}-" if owner else spec.client.image_prefix
    images = [f"{prefix}{i}" for i in range(spec.client.images)]
    if len(images) < len(cpus):
        raise InvalidSpec(
            "spec.client.images",
            f"{len(images)} images for {len(cpus)} fio clients: every client needs at least "
            f"one image; set client.images to {len(cpus)} or more",
        )
    return tuple(
        ClientPlan(name, node, part, tuple(images[i :: len(cpus)]))
        for i, (name, node, part) in enumerate(cpus)
    )


def _split(cpus: tuple[int, ...], count: int) -> list[tuple[int, ...]]:
    """count disjoint, nearly equal parts of the client CPUs, in CPU order."""
    if count > len(cpus):
        raise InvalidSpec(
            "spec.client.count",
            f"{count} fio clients need at least {count} client CPUs, but client.cpuSet has "
            f"{len(cpus)} ({format_cpuset(cpus)}); lower client.count or widen client.cpuSet",
        )
    base, extra = divmod(len(cpus), count)
    parts, at = [], 0
    for i in range(count):
        size = base + (1 if i < extra else 0)
        parts.append(tuple(cpus[at : at + size]))
        at += size
    return parts


def _client_only_cpus(client: ClientSpec, layout: ClusterLayout, node: Node) -> tuple[int, ...]:
    """A client node without planned OSDs: its cpuSet (or nodeCpuSets entry), else every
    online CPU of the node."""
    topology = _topology(layout, node)
    online = topology.ids()
    given = _client_spec_on(client, node).cpu_set
    if given is None:
        return tuple(sorted(online))
    cpus = parse_cpuset(given)
    missing = sorted(cpus - online)
    if missing:
        field = "spec.client.nodeCpuSets" if node in client.node_cpu_sets else "spec.client.cpuSet"
        raise InvalidSpec(
            field,
            f"on node {node}: CPUs {format_cpuset(missing)} are not online there (it has "
            f"{format_cpuset(online)}); use CPUs of that node",
        )
    return tuple(sorted(cpus))
