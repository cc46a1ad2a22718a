"""Does the run fit? The images in the OSDs' stores, in-memory stores in RAM, file-backed
stores on the disk, every block size in an image. Pure: the executor measures the machine
(Measured) and asks before it starts anything, so a spec that cannot fit is refused at
`plan`, not minutes into a prefill (32 x 2 GiB images into one 8 GiB memstore OSD).
"""

from __future__ import annotations

from dataclasses import dataclass

from crimsonbench.errors import InvalidSpec
from crimsonbench.spec.models import (
    BenchmarkRunSpec,
    LocalTarget,
    ObjectStore,
    block_size_bytes,
    size_bytes,
)

# Ceph warns at 85 % (mon_osd_nearfull_ratio) and stops writes at 95 % (full); PGs are
# never spread exactly evenly, so the images must fit under the warning.
NEARFULL = 0.85
# RSS of an in-memory store per byte written (ENVIRONMENT.md: memstore 2.6 GiB after a
# 2 GiB prefill; 5 GiB once random writes rewrote it), and of the daemon itself.
MEM_PER_BYTE_PREFILLED = 1.3
MEM_PER_BYTE_REWRITTEN = 2.5
MEM_PER_OSD = 512 * 2**20
IN_MEMORY = (ObjectStore.MEMSTORE, ObjectStore.CYANSTORE)
# seastore writes its whole device at mkfs; bluestore's file grows with what is written,
# plus its own metadata (RocksDB, BlueFS) of about 1 GiB per OSD
BLUESTORE_OVERHEAD = 2**30


@dataclass(frozen=True)
class Measured:
    """What the executor measured where the run will go; None: not measured (a plan for
    another machine)."""

    mem_available_bytes: int | None = None  # /proc/meminfo MemAvailable
    disk_free_bytes: int | None = None  # free where the cluster's directory will be
    disk_path: str = ""


def check_capacity(spec: BenchmarkRunSpec, measured: Measured | None = None) -> None:
    """InvalidSpec naming every field that does not fit (the first, then `problems`)."""
    problems = _block_sizes(spec)
    local = spec.target.local
    if local is not None:
        problems += _stores(spec, local)
        if measured is not None and not problems:
            problems += _memory(spec, local, measured) + _disk(spec, local, measured)
    if problems:
        raise InvalidSpec(*problems[0], more=tuple(problems[1:]))


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def _data_bytes(spec: BenchmarkRunSpec) -> int:
    return spec.client.images * size_bytes(spec.client.image_size)


def _block_sizes(spec: BenchmarkRunSpec) -> list[tuple[str, str]]:
    c = spec.client
    image = size_bytes(c.image_size)
    out = []
    for i, w in enumerate(spec.workloads):
        if block_size_bytes(w.block_size) > image:
            out.append((f"spec.workloads[{i}].bs", f"{w.block_size} is larger than an image "
                        f"(client.imageSize {c.image_size}): fio could not do one I/O; use a "
                        "bs up to the image size, or larger images"))  # fmt: skip
    if c.prefill and block_size_bytes(c.prefill_block_size) > image:
        too_big = f"{c.prefill_block_size} is larger than an image (client.imageSize "
        out.append(("spec.client.prefillBlockSize",
                    too_big + f"{c.image_size}); use at most the image size"))  # fmt: skip
    return out


def _stores(spec: BenchmarkRunSpec, local: LocalTarget) -> list[tuple[str, str]]:
    data, count = _data_bytes(spec), spec.osd.count
    store = size_bytes(local.bluestore_size)
    room = int(count * store * NEARFULL)
    if data <= room:
        return []
    c = spec.client
    return [("spec.client.images", (
        f"{c.images} images x {c.image_size} = {_gib(data)} do not fit in {count} OSD(s) x "
        f"{local.bluestore_size} (target.local.bluestoreSize): Ceph warns past "
        f"{NEARFULL:.0%} full ({_gib(room)}) and stops writes at 95 %; use fewer or smaller "
        "images (client.images, client.imageSize) or more or larger stores (osd.count, "
        "target.local.bluestoreSize)"))]  # fmt: skip


def _memory(spec: BenchmarkRunSpec, local: LocalTarget, m: Measured) -> list[tuple[str, str]]:
    if spec.osd.object_store not in IN_MEMORY or m.mem_available_bytes is None:
        return []
    rewrites = any(w.rw_mode not in ("read", "randread") for w in spec.workloads)
    per_byte = MEM_PER_BYTE_REWRITTEN if rewrites else MEM_PER_BYTE_PREFILLED
    need = int(_data_bytes(spec) * per_byte) + spec.osd.count * MEM_PER_OSD
    if need <= m.mem_available_bytes:
        return []
    store = spec.osd.object_store.value
    why = "written images and rewrites" if rewrites else "written images"
    return [("spec.osd.objectStore", (
        f"{store} keeps every byte in RAM: {spec.client.images} x {spec.client.image_size} "
        f"images need about {_gib(need)} ({per_byte:g} x the {why}, plus "
        f"{_gib(MEM_PER_OSD)} per OSD), and this machine has {_gib(m.mem_available_bytes)} "
        "available; use fewer or smaller images, or an on-disk store (bluestore)"))]  # fmt: skip


def _disk(spec: BenchmarkRunSpec, local: LocalTarget, m: Measured) -> list[tuple[str, str]]:
    store = spec.osd.object_store
    if store in IN_MEMORY or spec.osd.devices or m.disk_free_bytes is None:
        return []
    count = spec.osd.count
    if store == ObjectStore.SEASTORE:
        need = count * size_bytes(local.bluestore_size)
        what = f"{count} seastore device(s) x {local.bluestore_size}, written in full at mkfs"
    else:
        need = _data_bytes(spec) + count * BLUESTORE_OVERHEAD
        what = f"the images ({_gib(_data_bytes(spec))}) plus ~1 GiB of metadata per OSD"
    if need <= m.disk_free_bytes:
        return []
    return [("spec.target.local.workDir", (
        f"{m.disk_path or 'the cluster directory'} has {_gib(m.disk_free_bytes)} free, and "
        f"the stores need {_gib(need)} ({what}); free space there, or set workDir to a "
        "disk with room"))]  # fmt: skip
