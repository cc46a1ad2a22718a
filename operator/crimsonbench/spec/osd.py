"""The OSDs: flavor, object store, reactors and their CPU placement."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field

from crimsonbench.spec.base import DEVICE_PATTERN, CpuSetStr, RuledModel, hinted
from crimsonbench.spec.rules import Rule, map_keys_rule

# ceph.conf option names as Ceph defines them (lower case, digits, '_'). Ceph would also
# read spaces or dashes for '_', but a key is printed as `ceph config set osd KEY VALUE`
# and written as a ceph.conf line: one spelling, nothing a shell or ini parser splits.
CEPH_OPTION_PATTERN = r"^[a-z0-9][a-z0-9_]*$"
# ceph.conf values: numbers, sizes, names, lists (a,b), key=value lists (rocksdb options),
# paths, CPU sets; never a line break, '[', ']', '#', ';', quotes, '$' or a backslash.
CEPH_VALUE_PATTERN = hinted(
    r"^[A-Za-z0-9 _.:,=/+%@*~-]*$",
    "is not a ceph.conf value we accept: letters, digits, spaces and _ . : , = / + % @ * ~ - "
    "only (no line breaks, brackets, '#', ';', quotes or '$')",
)


class Flavor(StrEnum):
    CRIMSON = "crimson"
    CLASSIC = "classic"


class ObjectStore(StrEnum):
    CYANSTORE = "cyanstore"
    SEASTORE = "seastore"
    BLUESTORE = "bluestore"
    MEMSTORE = "memstore"


class CpuPolicy(StrEnum):
    DEFAULT = "default"  # contiguous CPUs per OSD
    OSD = "osd"  # every reactor of an OSD on one NUMA node; OSDs alternate nodes
    SOCKET = "socket"  # each OSD's reactors spread evenly over NUMA nodes


class HyperThreads(StrEnum):
    PHYSICAL = "physical"  # one reactor per physical core; its sibling stays idle
    DUAL = "dual"  # both hyper-thread siblings host a reactor ("dual reactor")


class OptionNaming(StrEnum):
    AUTO = "auto"  # from the Ceph version
    LEGACY = "legacy"  # crimson_seastar_cpu_cores / crimson_alien_* (squid, tentacle)
    CURRENT = "current"  # crimson_cpu_set / crimson_bluestore_* (Ceph 21 and newer)


_CRIMSON_STORES = ("cyanstore", "seastore", "bluestore")
_CLASSIC_STORES = ("bluestore", "memstore")

OSD_RULES = (
    Rule(
        cel="self.flavor != 'classic' || self.objectStore in ['bluestore', 'memstore']",
        message="classic OSDs support objectStore bluestore or memstore; "
        "cyanstore and seastore need flavor crimson",
        field="objectStore",
        check=lambda o: o.flavor != Flavor.CLASSIC or o.object_store.value in _CLASSIC_STORES,
    ),
    Rule(
        cel="self.flavor != 'crimson' "
        "|| self.objectStore in ['cyanstore', 'seastore', 'bluestore']",
        message="crimson OSDs support objectStore cyanstore, seastore or bluestore; "
        "memstore needs flavor classic",
        field="objectStore",
        check=lambda o: o.flavor != Flavor.CRIMSON or o.object_store.value in _CRIMSON_STORES,
    ),
    Rule(
        cel="self.flavor != 'classic' || !has(self.reactors)",
        message="reactors applies to crimson OSDs only; for classic OSDs set cpusPerOsd",
        field="reactors",
        check=lambda o: o.flavor != Flavor.CLASSIC or o.reactors is None,
    ),
    Rule(
        cel="self.flavor != 'crimson' || !has(self.cpusPerOsd)",
        message="cpusPerOsd applies to classic OSDs only; for crimson OSDs set reactors",
        field="cpusPerOsd",
        check=lambda o: o.flavor != Flavor.CRIMSON or o.cpus_per_osd is None,
    ),
    Rule(
        cel="(self.flavor == 'crimson' && self.objectStore == 'bluestore') "
        "|| (!has(self.alienThreads) && !has(self.alienCpuSet))",
        message="alienThreads and alienCpuSet apply to crimson with objectStore bluestore only",
        field="alienThreads",
        check=lambda o: (
            (o.flavor == Flavor.CRIMSON and o.object_store == ObjectStore.BLUESTORE)
            or (o.alien_threads is None and o.alien_cpu_set is None)
        ),
    ),
)

OSD_KEY_RULES = (
    map_keys_rule(
        "cephConfig",
        "ceph_config",
        128,
        CEPH_OPTION_PATTERN,
        "cephConfig keys must be Ceph option names: lower case letters, digits and "
        "'_' (e.g. osd_op_num_shards), at most 128 characters",
    ),
)


class OsdSpec(RuledModel):
    RULES = OSD_RULES + OSD_KEY_RULES

    flavor: Flavor = Field(
        default=Flavor.CRIMSON, strict=False, description="crimson or classic ceph-osd."
    )
    object_store: ObjectStore = Field(
        default=ObjectStore.BLUESTORE,
        strict=False,
        description="crimson: cyanstore|seastore|bluestore; classic: bluestore|memstore.",
    )
    count: int = Field(default=1, ge=1, le=128, description="Number of OSDs.")
    reactors: int | None = Field(
        default=None, ge=1, le=1024, description="Seastar reactors per crimson OSD (default 1)."
    )
    cpus_per_osd: int | None = Field(
        default=None, ge=1, le=1024, description="CPUs per classic OSD (default: an equal share)."
    )
    cpu_policy: CpuPolicy = Field(
        default=CpuPolicy.DEFAULT, strict=False, description="Reactor placement."
    )
    cpu_set: CpuSetStr | None = Field(
        default=None, description="CPUs the OSDs may use; default: all CPUs not given to fio."
    )
    hyper_threads: HyperThreads = Field(
        default=HyperThreads.DUAL,
        strict=False,
        description="physical: one reactor per core; dual: both siblings host a reactor.",
    )
    alien_threads: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="BlueStore alien threads (default 4*OSDs*reactors).",
    )
    alien_cpu_set: CpuSetStr | None = Field(
        default=None, description="CPUs for alien threads; default: allowed CPUs left by reactors."
    )
    option_naming: OptionNaming = Field(
        default=OptionNaming.AUTO,
        strict=False,
        description="Crimson option names; auto picks by Ceph version.",
    )
    ceph_version: str | None = Field(
        default=None,
        pattern=r"^[0-9]{1,4}\.[0-9]{1,4}(\.[0-9]{1,6})?$",
        description="Ceph version if it cannot be detected, e.g. 19.2.1.",
    )
    devices: list[Annotated[str, Field(max_length=256, pattern=DEVICE_PATTERN)]] = Field(
        default_factory=list,
        max_length=128,
        description="Block devices, one per OSD (seastore): absolute paths, e.g. /dev/nvme0n1.",
    )
    ceph_config: dict[str, Annotated[str, Field(max_length=1024, pattern=CEPH_VALUE_PATTERN)]] = (
        Field(
            default_factory=dict,
            max_length=128,
            description="Extra options for the [osd] section: option names as Ceph spells "
            "them (osd_op_num_shards), values without line breaks, brackets, '#', ';', "
            "quotes or '$'.",
        )
    )

    @property
    def reactors_per_osd(self) -> int:
        """Reactors for crimson (default 1); 0 for classic, which has none."""
        if self.flavor == Flavor.CLASSIC:
            return 0
        return self.reactors or 1

    @property
    def alien_thread_count(self) -> int:
        """The reference method's sizing: 4 x OSDs x reactors (crimson bluestore only)."""
        if self.flavor != Flavor.CRIMSON or self.object_store != ObjectStore.BLUESTORE:
            return 0
        return self.alien_threads or 4 * self.count * self.reactors_per_osd
