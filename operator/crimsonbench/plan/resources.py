"""The size of each OSD pod (Rook): whole CPUs for its reactors and its share of the alien
CPUs, memory for its object store. Requests == limits, so the pods are Guaranteed and a
kubelet with the static CPU manager may give them exclusive cores."""

from __future__ import annotations

import math
from collections.abc import Sequence

from crimsonbench.plan.types import HostPlan, OsdResources
from crimsonbench.spec.models import BenchmarkRunSpec, Flavor, ObjectStore, size_bytes

GIB = 2**30
# Memory per OSD pod: a base for the OSD itself plus, for crimson, one GiB per reactor
# (seastar gives every shard its own memory; seastore caches per shard). In-memory stores
# (cyanstore, memstore) also hold their share of all image data, with 25 % overhead.
CLASSIC_BASE_GIB = 8  # Rook sets osd_memory_target to 80 % of this (osd default: 4 GiB)
CRIMSON_BASE_GIB = 4
CRIMSON_GIB_PER_REACTOR = 1
IN_MEMORY_OVERHEAD = 1.25


def osd_resources(spec: BenchmarkRunSpec, hosts: Sequence[HostPlan]) -> OsdResources:
    return OsdResources(cpu=osd_cpu_count(hosts), memory=default_osd_memory(spec))


def osd_cpu_count(hosts: Sequence[HostPlan]) -> int:
    """Whole CPUs per OSD pod: its reactors (classic: its affinity set) plus its share of
    the alien CPUs. Crimson BlueStore's alien CPU set is one set shared by every OSD on a
    host, so each OSD pod asks for ceil(alien CPUs / OSDs on that host); asking for the
    whole set per OSD would over-commit the host by the number of OSDs. Rook sizes every
    OSD pod alike (resources.osd), so the largest need wins."""
    need = [
        len(o.reactors) + math.ceil(len(o.alien) / len(h.cpu.osds))
        for h in hosts
        for o in h.cpu.osds
    ]
    return max(need, default=1)


def default_osd_memory(spec: BenchmarkRunSpec) -> str:
    """A sane memory request/limit per OSD pod for the object store (see the constants)."""
    osd = spec.osd
    if osd.flavor == Flavor.CLASSIC:
        gib = float(CLASSIC_BASE_GIB)
    else:
        gib = float(CRIMSON_BASE_GIB + CRIMSON_GIB_PER_REACTOR * osd.reactors_per_osd)
    if osd.object_store in (ObjectStore.CYANSTORE, ObjectStore.MEMSTORE):
        data = spec.client.images * size_bytes(spec.client.image_size) / osd.count
        gib += IN_MEMORY_OVERHEAD * data / GIB
    return f"{math.ceil(gib)}Gi"
