"""Decide which CPU runs what: OSD reactors (crimson) or affinity sets (classic), BlueStore
alien threads, and fio. Pure: a Topology and the spec in, a CpuPlan out.

A *unit* is a CPU the planner may hand to one reactor. hyperThreads dual: every allowed
logical CPU, the two siblings of a core next to each other, so reactors 2k and 2k+1 share
a physical core. physical: one CPU per physical core (its lowest allowed id); the sibling
is never given to a reactor. Units are ordered by (NUMA node, (socket, core), CPU id): lscpu
numbers cores in order of their lowest CPU id, so the order does not depend on whether the
kernel numbers siblings i, i+N or 2k, 2k+1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from crimsonbench.errors import InvalidSpec
from crimsonbench.plan.types import Cpu, CpuPlan, OsdCpus, Topology
from crimsonbench.spec.cpuset import format_cpuset, parse_cpuset
from crimsonbench.spec.models import ClientSpec, CpuPolicy, Flavor, HyperThreads, OsdSpec

Units = dict[int, list[int]]  # NUMA node -> its units in placement order


@dataclass(frozen=True)
class _Pools:
    osd: frozenset[int]  # CPUs the OSDs may use: reactors and (default) alien threads
    reactors: frozenset[int]  # osd minus an explicit alienCpuSet
    client: frozenset[int]
    alien: frozenset[int] | None  # osd.alienCpuSet when given
    source: str  # how error messages name the reactor pool


@dataclass(frozen=True)
class _Ask:
    """What one placement needs: n OSDs x r units each, and how to word a shortage."""

    n: int
    r: int
    policy: CpuPolicy
    field: str
    what: str  # "reactor" or "CPU", pluralised in messages
    kind: str  # "(physical cores only)" or "(logical CPUs)"
    source: str
    fixes: tuple[str, ...]  # ways out, joined as "a, b, or c"


def plan_cpus(
    topology: Topology, osd: OsdSpec, client: ClientSpec, runs_fio: bool = True
) -> CpuPlan:
    """Place every OSD's reactors (or classic affinity set), the alien threads and fio.
    runs_fio False: a node with OSDs and no fio client, where the OSDs may take every CPU."""
    by_id = topology.by_id()
    pools = _resolve_pools(topology, by_id, osd, client, runs_fio)
    physical = osd.hyper_threads == HyperThreads.PHYSICAL
    units = _units(by_id, pools.reactors, physical)
    ask = _ask(osd, units, pools.source, physical)
    layout = _place(units, ask)
    alien = _aliens(osd, pools, layout)
    osds = tuple(OsdCpus(i, tuple(cpus), alien) for i, cpus in enumerate(layout))
    return CpuPlan(
        policy=osd.cpu_policy.value,
        hyper_threads=osd.hyper_threads.value,
        osds=osds,
        client=tuple(sorted(pools.client)),
        alien_threads=osd.alien_thread_count,
    )


# ---------------------------------------------------------------- CPU sets


def _given(text: str | None, field: str, by_id: Mapping[int, Cpu]) -> frozenset[int] | None:
    if text is None:
        return None
    try:
        cpus = parse_cpuset(text)
    except ValueError as exc:
        raise InvalidSpec(field, str(exc)) from None
    name = field.removeprefix("spec.")
    missing = sorted(c for c in cpus if c not in by_id)
    if missing:
        have = format_cpuset(by_id)
        raise InvalidSpec(
            field,
            f"CPUs {format_cpuset(missing)} are not on this machine (it has {have}); "
            f"remove them from {name}",
        )
    offline = sorted(c for c in cpus if not by_id[c].online)
    if offline:
        raise InvalidSpec(
            field,
            f"CPUs {format_cpuset(offline)} are offline; bring them online "
            f"(echo 1 > /sys/devices/system/cpu/cpuN/online) or remove them from {name}",
        )
    return cpus


def _resolve_pools(
    topology: Topology,
    by_id: Mapping[int, Cpu],
    osd: OsdSpec,
    client: ClientSpec,
    runs_fio: bool,
) -> _Pools:
    osd_set = _given(osd.cpu_set, "spec.osd.cpuSet", by_id)
    client_set = _given(client.cpu_set, "spec.client.cpuSet", by_id)
    alien = _given(osd.alien_cpu_set, "spec.osd.alienCpuSet", by_id)
    if osd_set is None and client_set is None:
        raise InvalidSpec(
            "spec.client.cpuSet",
            "set client.cpuSet (or osd.cpuSet) to reserve CPUs for fio, e.g. '0-3'; "
            "otherwise fio and the OSDs would fight over the same CPUs",
        )
    if osd_set is not None and client_set is not None and osd_set & client_set:
        raise InvalidSpec(
            "spec.client.cpuSet",
            f"osd.cpuSet and client.cpuSet share CPUs {format_cpuset(osd_set & client_set)}; "
            "remove them from one of the two",
        )
    if alien is not None and client_set is not None and alien & client_set:
        raise InvalidSpec(
            "spec.osd.alienCpuSet",
            f"osd.alienCpuSet and client.cpuSet share CPUs {format_cpuset(alien & client_set)};"
            " alien threads must not run where fio runs, so remove them from one of the two",
        )
    online = topology.ids()
    if client_set is None:
        rest = online - _or_empty(osd_set) - _or_empty(alien)
        client_set = _nonempty(rest, "client") if runs_fio else rest
    if osd_set is None:
        osd_set = _nonempty(online - client_set, "osd")
    reactors = osd_set - alien if alien is not None else osd_set
    if not reactors:
        raise InvalidSpec(
            "spec.osd.alienCpuSet",
            "osd.alienCpuSet covers every CPU the OSDs may use, none is left for reactors; "
            "shrink osd.alienCpuSet or widen osd.cpuSet",
        )
    return _Pools(osd_set, reactors, client_set, alien, _source(osd, alien))


def _or_empty(cpus: frozenset[int] | None) -> frozenset[int]:
    return cpus if cpus is not None else frozenset()


def _nonempty(cpus: frozenset[int], who: str) -> frozenset[int]:
    if cpus:
        return cpus
    if who == "client":
        raise InvalidSpec(
            "spec.client.cpuSet",
            "osd.cpuSet (with osd.alienCpuSet) takes every online CPU, none is left for "
            "fio; set client.cpuSet or shrink osd.cpuSet",
        )
    raise InvalidSpec(
        "spec.osd.cpuSet",
        "client.cpuSet takes every online CPU, none is left for the OSDs; "
        "shrink client.cpuSet or set osd.cpuSet",
    )


def _source(osd: OsdSpec, alien: frozenset[int] | None) -> str:
    if osd.cpu_set is not None:
        return "osd.cpuSet minus osd.alienCpuSet" if alien is not None else "osd.cpuSet"
    if alien is not None:
        return "the machine outside client.cpuSet and osd.alienCpuSet"
    return "the machine outside client.cpuSet"


# ---------------------------------------------------------------- units


def _units(by_id: Mapping[int, Cpu], pool: frozenset[int], physical: bool) -> Units:
    cores: dict[tuple[int, int], list[int]] = {}
    for cpu_id in sorted(pool):  # ascending, so each core's list starts at its lowest id
        cores.setdefault(by_id[cpu_id].physical_core, []).append(cpu_id)
    units: Units = {}
    for key in sorted(cores, key=lambda k: (by_id[cores[k][0]].node, k, cores[k][0])):
        ids = cores[key]
        units.setdefault(by_id[ids[0]].node, []).extend(ids[:1] if physical else ids)
    return units


def _ask(osd: OsdSpec, units: Units, source: str, physical: bool) -> _Ask:
    kind = "(physical cores only)" if physical else "(logical CPUs)"
    ht_fix = ("set osd.hyperThreads: dual to use both hyper-threads",) if physical else ()
    if osd.flavor == Flavor.CRIMSON:
        field = "spec.osd.reactors" if osd.reactors is not None else "spec.osd.count"
        fixes = ("lower osd.count or osd.reactors", "widen osd.cpuSet", *ht_fix)
        r = osd.reactors_per_osd
        return _Ask(osd.count, r, osd.cpu_policy, field, "reactor", kind, source, fixes)
    field = "spec.osd.cpusPerOsd" if osd.cpus_per_osd is not None else "spec.osd.count"
    fixes = ("lower osd.count or osd.cpusPerOsd", "widen osd.cpuSet", *ht_fix)
    ask = _Ask(osd.count, 0, osd.cpu_policy, field, "CPU", kind, source, fixes)
    share = osd.cpus_per_osd or _default_share(units, ask)
    return _Ask(osd.count, share, osd.cpu_policy, field, "CPU", kind, source, fixes)


def _default_share(units: Units, ask: _Ask) -> int:
    """Classic's equal share: floor(units / OSDs), lowered until the policy fits (osd and
    socket policies can fit less when OSDs do not divide evenly over the nodes)."""
    total = sum(len(u) for u in units.values())
    sizes = {node: len(u) for node, u in units.items()}
    for share in range(total // ask.n, 0, -1):
        if _shortfall(sizes, ask.policy, ask.n, share) is None:
            return share
    raise InvalidSpec(
        "spec.osd.count",
        f"{_plural(ask.n, 'OSD')} need at least one CPU each but {ask.source} offers {total} "
        f"{ask.kind}; {_either(ask.fixes)}",
    )


# ---------------------------------------------------------------- placement


def _domain_takes(policy: CpuPolicy, nodes: list[int], i: int, r: int) -> dict[int, int]:
    """How many units OSD i takes from each node under the osd and socket policies."""
    if policy == CpuPolicy.OSD:
        return {nodes[i % len(nodes)]: r}
    base, extra = divmod(r, len(nodes))
    # Rotate which nodes get the extra unit so the nodes' totals stay balanced.
    lucky = {(i * extra + j) % len(nodes) for j in range(extra)}
    return {node: base + (k in lucky) for k, node in enumerate(nodes)}


def _shortfall(
    sizes: Mapping[int, int], policy: CpuPolicy, n: int, r: int
) -> tuple[int | None, int, int] | None:
    """(node, needed, available) of the first node that runs out, or None if all fit.
    node is None for the default policy, which only needs enough units in total."""
    if policy == CpuPolicy.DEFAULT:
        total = sum(sizes.values())
        return (None, n * r, total) if n * r > total else None
    nodes = sorted(sizes)
    need = dict.fromkeys(nodes, 0)
    for i in range(n):
        for node, count in _domain_takes(policy, nodes, i, r).items():
            need[node] += count
    short = [node for node in nodes if need[node] > sizes[node]]
    return (short[0], need[short[0]], sizes[short[0]]) if short else None


def _place(units: Units, ask: _Ask) -> list[list[int]]:
    sizes = {node: len(u) for node, u in units.items()}
    short = _shortfall(sizes, ask.policy, ask.n, ask.r)
    if short is not None:
        raise InvalidSpec(ask.field, _shortage_message(ask, *short, len(units)))
    if ask.policy == CpuPolicy.DEFAULT:
        flat = [cpu for node in sorted(units) for cpu in units[node]]
        return [flat[i * ask.r : (i + 1) * ask.r] for i in range(ask.n)]
    nodes = sorted(units)
    taken = dict.fromkeys(nodes, 0)
    layout = []
    for i in range(ask.n):
        cpus: list[int] = []
        for node, count in _domain_takes(ask.policy, nodes, i, ask.r).items():
            cpus += units[node][taken[node] : taken[node] + count]
            taken[node] += count
        layout.append(cpus)
    return layout


def _shortage_message(ask: _Ask, node: int | None, need: int, have: int, nodes: int) -> str:
    osds, each = _plural(ask.n, "OSD"), _plural(ask.r, ask.what)
    if node is None:
        return (
            f"{osds} × {each} need {need} CPUs {ask.kind} but {ask.source} offers {have}; "
            f"{_either(ask.fixes)}"
        )
    if ask.policy == CpuPolicy.OSD:
        how = (
            f"cpuPolicy osd keeps each OSD on one NUMA node, alternating over {nodes} nodes; "
            f"node {node} hosts {need // ask.r} of the {osds} × {each}, so it"
        )
    else:
        how = (
            f"cpuPolicy socket spreads each OSD's {each} over {_plural(nodes, 'NUMA node')}; "
            f"for {osds} node {node}"
        )
    return (
        f"{how} needs {need} CPUs {ask.kind}, but {ask.source} offers {have} there; "
        f"{_either((*ask.fixes, 'use cpuPolicy default'))}"
    )


def _either(fixes: tuple[str, ...]) -> str:
    return fixes[0] if len(fixes) == 1 else ", ".join(fixes[:-1]) + ", or " + fixes[-1]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# ---------------------------------------------------------------- alien threads


def _aliens(osd: OsdSpec, pools: _Pools, layout: list[list[int]]) -> tuple[int, ...]:
    """Crimson BlueStore's alien (blocking) threads: one CPU set shared by all OSDs."""
    if osd.alien_thread_count == 0:
        return ()
    if pools.alien is not None:  # disjoint from reactors by construction, checked vs fio
        return tuple(sorted(pools.alien))
    used = {cpu for cpus in layout for cpu in cpus}
    free = sorted(pools.osd - used)  # physical mode: the reactors' siblings end up here
    if not free:
        raise InvalidSpec(
            "spec.osd.alienCpuSet",
            f"the reactors take every CPU of {pools.source}, none is left for the "
            f"{osd.alien_thread_count} BlueStore alien threads; set osd.alienCpuSet to CPUs "
            "outside client.cpuSet, widen osd.cpuSet or lower osd.reactors",
        )
    return tuple(free)
