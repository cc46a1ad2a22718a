"""Turn a CpuPlan into Ceph configuration: the crimson options per OSD and crimson's
cluster-wide prerequisites. Option names changed in tentacle (20), hence two families.

legacy  (squid, 19.x; src/common/options/crimson.yaml.in of that era):
    crimson_seastar_cpu_cores, crimson_seastar_num_threads,
    crimson_alien_thread_cpu_cores, crimson_alien_op_num_threads
current (tentacle, 20.x and newer):
    crimson_cpu_set, crimson_cpu_num, crimson_bluestore_cpu_set, crimson_bluestore_num_threads
"""

from __future__ import annotations

import re
from typing import Literal

from crimsonbench.errors import InvalidSpec
from crimsonbench.plan.types import CephSetup, CpuPlan, OsdCpus
from crimsonbench.spec.models import Flavor, ObjectStore, OptionNaming, OsdSpec

OptionFamily = Literal["legacy", "current"]

TENTACLE_MAJOR = 20  # first release with the crimson_cpu_* / crimson_bluestore_* names

# crimson_seastar_num_threads and crimson_cpu_num are declared with max 32 and `ceph config
# set` validates the range. They only matter without pinning ("overridden if the cpu set is
# set"; Seastar's smp count is deduced from the set), so above 32 they are left unset.
MAX_NUM_THREADS = 32

# crimson_seastar_smp (reef, 18.x) is NOT set: squid removed it, and `ceph config set`
# refuses option names the mon does not know ("unrecognized config option"), so setting it
# would break every squid run. Reef has no crimson CPU-set option at all, so reactors could
# not be pinned there anyway; reef is out of scope rather than half supported.

_NAMES: dict[str, dict[str, str]] = {
    "legacy": {
        "cpu_set": "crimson_seastar_cpu_cores",
        "cpu_num": "crimson_seastar_num_threads",
        "alien_set": "crimson_alien_thread_cpu_cores",
        "alien_num": "crimson_alien_op_num_threads",
    },
    "current": {
        "cpu_set": "crimson_cpu_set",
        "cpu_num": "crimson_cpu_num",
        "alien_set": "crimson_bluestore_cpu_set",
        "alien_num": "crimson_bluestore_num_threads",
    },
}

# Without these the mons refuse crimson OSDs or their pools (doc/crimson/crimson.rst).
CRIMSON_GLOBAL = {
    "enable_experimental_unrecoverable_data_corrupting_features": "crimson",
    "osd_pool_default_crimson": "true",
}
ALLOW_CRIMSON = ("osd", "set-allow-crimson", "--yes-i-really-mean-it")


def option_family(naming: OptionNaming, ceph_version: str | None) -> OptionFamily:
    """legacy or current crimson option names; auto decides by the Ceph major version."""
    if naming == OptionNaming.LEGACY:
        return "legacy"
    if naming == OptionNaming.CURRENT:
        return "current"
    if ceph_version is None:
        raise InvalidSpec(
            "spec.osd.cephVersion",
            "the Ceph version could not be detected, so crimson's option names are unknown; "
            "set osd.cephVersion (e.g. 19.2.1) or osd.optionNaming "
            "(legacy for squid and older, current for tentacle and newer)",
        )
    # Also accepts `ceph --version` text: "ceph version 19.2.1 (...) squid (stable)".
    match = re.search(r"(?<![\d.])v?(\d+)\.\d+", ceph_version)
    if match is None:
        raise InvalidSpec(
            "spec.osd.cephVersion",
            f"{ceph_version!r} is not a Ceph version; write it like 19.2.1, "
            "or set osd.optionNaming to legacy or current",
        )
    return "current" if int(match.group(1)) >= TENTACLE_MAJOR else "legacy"


def ceph_setup(cpu: CpuPlan, osd: OsdSpec, family: OptionFamily | str) -> CephSetup:
    """The mon-database config and commands the cluster needs before the OSDs boot.
    family only matters for crimson; classic OSDs ignore it (callers may pass "classic")."""
    config: dict[str, dict[str, str]] = {}
    commands: tuple[tuple[str, ...], ...] = ()
    if osd.flavor == Flavor.CRIMSON:
        if family not in _NAMES:
            raise ValueError(f"unknown option family {family!r}; expected legacy or current")
        config["global"] = dict(CRIMSON_GLOBAL)
        commands = (ALLOW_CRIMSON,)
        bluestore = osd.object_store == ObjectStore.BLUESTORE
        for o in cpu.osds:
            config[f"osd.{o.osd_id}"] = _crimson_osd(o, _NAMES[family], bluestore, cpu)
    # Classic: the executor applies the affinity (taskset/cgroup); no crimson keys.
    if osd.ceph_config:
        config["osd"] = dict(osd.ceph_config)
    return CephSetup(config=config, commands=commands)


def _crimson_osd(
    o: OsdCpus, names: dict[str, str], bluestore: bool, cpu: CpuPlan
) -> dict[str, str]:
    section = {names["cpu_set"]: o.cpuset}
    if len(o.reactors) <= MAX_NUM_THREADS:
        section[names["cpu_num"]] = str(len(o.reactors))
    if bluestore and o.alien:
        section[names["alien_num"]] = str(cpu.alien_threads)
        section[names["alien_set"]] = o.alien_cpuset
    return section
