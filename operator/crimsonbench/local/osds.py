"""How each OSD is started: binary, object store options and CPU arguments.

Classic ceph-osd is pinned from outside (taskset at exec, then every thread). Crimson pins
its own Seastar reactors from the mon database (crimson_seastar_cpu_cores before Ceph 21,
crimson_cpu_set after; plan/ceph_options.py), read at mkfs and at start: its command line
takes no Seastar CPU options (20.2 aborts on --cpuset: "--cpuset can be set only using
crimson_seastar_cpu_cores").
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from crimsonbench.errors import InvalidSpec
from crimsonbench.local.userland import BUILD_HINT, BuildDir, Userland
from crimsonbench.plan.types import OsdCpus
from crimsonbench.spec.cpuset import format_cpuset
from crimsonbench.spec.models import Flavor, LocalTarget, ObjectStore, OsdSpec, size_bytes

CRIMSON_NAMES = ("crimson-osd", "ceph-osd-crimson")
# Where a crimson OSD finds the object classes rbd needs (a build looks in its own
# lib/rados-classes, relative to its working directory; without them `rbd create` fails
# with EOPNOTSUPP). Debian's classic classes load into crimson-osd.
CLASS_DIRS = ("/usr/lib/x86_64-linux-gnu/rados-classes", "/usr/lib/aarch64-linux-gnu/rados-classes",
              "/usr/lib64/rados-classes", "/usr/lib/rados-classes")  # fmt: skip


def find_osd_binary(osd: OsdSpec, target: LocalTarget, ul: Userland) -> str:
    """Path of the OSD binary as the userland sees it; for crimson, fail before anything
    is created."""
    if osd.flavor == Flavor.CLASSIC:
        found = ul.which("ceph-osd")
        if found is None:
            raise InvalidSpec("spec.osd.flavor", f"ceph-osd is not in {ul.describe()}")
        return found
    if target.crimson_binary:
        path = ul.path(target.crimson_binary)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise InvalidSpec(
                "spec.target.local.crimsonBinary",
                f"{target.crimson_binary!r} is not an executable file in {ul.describe()}; "
                "point it at a crimson-osd built from Ceph source",
            )
        return target.crimson_binary
    for name in CRIMSON_NAMES:
        found = ul.which(name)
        if found:
            return found
    raise InvalidSpec(
        "spec.osd.flavor",
        f"flavor crimson needs a crimson OSD binary, but neither {' nor '.join(CRIMSON_NAMES)} "
        f"is in {ul.describe()}. Debian's Ceph packages ship none: set target.local.cephRoot "
        f"to a Ceph root filesystem with crimson-osd ({BUILD_HINT}), or "
        "target.local.crimsonBinary, or use flavor classic",
    )


# Measured on 20.2.4: a 2 GiB seastore device stalled prefilling 2 x 256 MiB (under
# 3 MiB/s, the prefill deadline passed); 4 GiB wrote them at ~85 MiB/s.
SEASTORE_MIN_BYTES = 4 * 2**30


def check_store_size(osd: OsdSpec, target: LocalTarget) -> None:
    small = size_bytes(target.bluestore_size) < SEASTORE_MIN_BYTES
    if osd.object_store == ObjectStore.SEASTORE and not osd.devices and small:
        raise InvalidSpec(
            "spec.target.local.bluestoreSize",
            f"{target.bluestore_size} is too small for a seastore device on a file "
            "(seastore stalls below 4Gi); set bluestoreSize: 4Gi or more",
        )


def class_dir(ul: Userland) -> str | None:
    """The object-class directory crimson-osd should load from, if the userland has one."""
    if isinstance(ul, BuildDir) and ul.class_dir():
        return ul.class_dir()
    for d in CLASS_DIRS:
        if (ul.path(d) / "libcls_rbd.so").exists():
            return d
    return None


def store_options(
    osd: OsdSpec,
    target: LocalTarget,
    block_device: str | None = None,
    crimson_store_option: str = "crimson_osd_objectstore",
) -> dict[str, str]:
    """ceph.conf [osd.N] options: object store and its mkfs/startup-only settings.
    crimson_store_option: the option the target's crimson reads its store from
    (plan.ceph_options.store_option_from_known): crimson_osd_objectstore on squid and
    tentacle (which ignore osd_objectstore), osd_objectstore on Ceph 21/main (which has no
    crimson_osd_objectstore). Classic OSDs always read osd_objectstore."""
    size = str(size_bytes(target.bluestore_size))
    store = osd.object_store
    key = crimson_store_option if osd.flavor == Flavor.CRIMSON else "osd_objectstore"
    opts: dict[str, str] = {key: store.value}
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


def osd_argv(binary: str, conf: str, osd_id: int, crimson: bool) -> list[str]:
    """Command line of a running OSD. Classic: `-f` keeps it our foreground child.
    Crimson always runs in the foreground."""
    argv = [binary, "-c", conf, "-i", str(osd_id)]
    return argv if crimson else [*argv, "-f"]


def mkfs_argv(binary: str, conf: str, osd_id: int, uuid: str, secret: str) -> list[str]:
    return [binary, "-c", conf, "-i", str(osd_id), "--mkfs", "--key", secret, "--osd-uuid", uuid]


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
