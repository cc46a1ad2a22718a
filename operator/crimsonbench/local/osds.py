"""How each OSD is started: binary, object store options and CPU arguments.

Classic ceph-osd is pinned from outside (taskset at exec, then every thread). Crimson pins
its own Seastar reactors (`--smp`/`--cpuset`), so we only pass the CPUs on the command line;
alien-thread CPUs and reactor options come from the plan's mon-db config.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence

from crimsonbench.errors import InvalidSpec
from crimsonbench.plan.types import OsdCpus
from crimsonbench.spec.cpuset import format_cpuset
from crimsonbench.spec.models import Flavor, LocalTarget, ObjectStore, OsdSpec, size_bytes

CRIMSON_NAMES = ("crimson-osd", "ceph-osd-crimson")


def find_osd_binary(osd: OsdSpec, target: LocalTarget) -> str:
    """Absolute path of the OSD binary; for crimson, fail before anything is created."""
    if osd.flavor == Flavor.CLASSIC:
        found = shutil.which("ceph-osd")
        if found is None:
            raise InvalidSpec("spec.osd.flavor", "ceph-osd is not on PATH; install ceph-osd")
        return found
    if target.crimson_binary:
        found = shutil.which(target.crimson_binary)
        if found is None:
            raise InvalidSpec(
                "spec.target.local.crimsonBinary",
                f"{target.crimson_binary!r} does not exist or is not executable; "
                "point it at a crimson-osd built from Ceph source",
            )
        return found
    for name in CRIMSON_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise InvalidSpec(
        "spec.osd.flavor",
        f"flavor crimson needs a crimson OSD binary, but neither {' nor '.join(CRIMSON_NAMES)} "
        "is on PATH. Debian's Ceph packages do not ship one: build crimson-osd from Ceph "
        "source (WITH_SEASTAR=ON) and set target.local.crimsonBinary, or use flavor classic",
    )


def store_options(
    osd: OsdSpec, target: LocalTarget, block_device: str | None = None
) -> dict[str, str]:
    """ceph.conf [osd.N] options: object store and its mkfs/startup-only settings."""
    size = str(size_bytes(target.bluestore_size))
    store = osd.object_store
    opts: dict[str, str] = {"osd_objectstore": store.value}
    if store in (ObjectStore.MEMSTORE, ObjectStore.CYANSTORE):
        # Reported capacity; writes beyond it hit the full ratios.
        opts["memstore_device_bytes"] = size
        # MemStore saves its data to osd_data only on a clean, slow shutdown.
        opts["osd_fast_shutdown"] = "false"
    elif store == ObjectStore.SEASTORE:
        opts["seastore_device_size"] = size
    elif store == ObjectStore.BLUESTORE:
        if block_device:
            opts["bluestore_block_path"] = block_device
        else:
            # Path left unset: bluestore creates <osd_data>/block itself (setting it to
            # that path fails with ELOOP).
            opts["bluestore_block_create"] = "true"
            opts["bluestore_block_size"] = size
        if target.force_ssd:
            opts["bluestore_debug_enforce_settings"] = "ssd"  # the VM disk claims rotational
    return opts


def uses_loop(osd: OsdSpec, target: LocalTarget) -> bool:
    return osd.object_store == ObjectStore.BLUESTORE and target.bluestore_backing == "loop"


def seastar_args(cpus: OsdCpus | None, reactors: int) -> list[str]:
    """Seastar options of a crimson OSD: one reactor per listed CPU, pinned by Seastar."""
    if cpus is None or not cpus.reactors:
        return ["--smp", str(max(1, reactors))]
    return ["--smp", str(len(cpus.reactors)), "--cpuset", cpus.cpuset]


def osd_argv(
    binary: str, conf: str, osd_id: int, crimson: bool, cpus: OsdCpus | None, reactors: int
) -> list[str]:
    """Command line of a running OSD. Classic: `-f` keeps it our foreground child.
    Crimson always runs in the foreground and takes Seastar options instead."""
    argv = [binary, "-c", conf, "-i", str(osd_id)]
    return [*argv, *seastar_args(cpus, reactors)] if crimson else [*argv, "-f"]


def mkfs_argv(
    binary: str,
    conf: str,
    osd_id: int,
    uuid: str,
    secret: str,
    crimson: bool,
    cpus: OsdCpus | None,
    reactors: int,
) -> list[str]:
    argv = [binary, "-c", conf, "-i", str(osd_id), "--mkfs", "--key", secret, "--osd-uuid", uuid]
    return [*argv, *seastar_args(cpus, reactors)] if crimson else argv


def check_cpus(osd_cpus: Sequence[OsdCpus], count: int) -> dict[int, OsdCpus]:
    """osd id -> CPUs, after checking each id exists and each CPU is usable here."""
    allowed = os.sched_getaffinity(0)
    for c in osd_cpus:
        if not 0 <= c.osd_id < count:
            raise InvalidSpec("spec.osd.count", f"CPUs given for osd.{c.osd_id}, only {count} OSDs")
        absent = c.all_cpus - allowed
        if absent:
            raise InvalidSpec(
                "spec.osd.cpuSet",
                f"CPUs {format_cpuset(absent)} of osd.{c.osd_id} are not available here "
                f"(this process may use {format_cpuset(allowed)})",
            )
    return {c.osd_id: c for c in osd_cpus}
