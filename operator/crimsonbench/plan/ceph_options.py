"""Turn a CpuPlan into Ceph configuration: the crimson options per OSD and crimson's
cluster-wide prerequisites.

Crimson's CPU option names changed twice; a mon refuses a name it does not know
("unrecognized config option"), so a wrong name breaks the run. What each release's
src/common/options/crimson.yaml.in declares (ceph/ceph history):

- reef 18.2: crimson_seastar_smp only, no CPU-set option (reactors pinned with the
  command line's --cpuset) -> not supported: reactors cannot be pinned through the config.
- squid 19.2: crimson_seastar_cpu_cores added (PR 55276, Jan 2024), count still
  crimson_seastar_smp; crimson_alien_thread_cpu_cores, crimson_alien_op_num_threads.
- tentacle 20.2: crimson_seastar_cpu_cores, crimson_seastar_num_threads (PR 65007, Aug
  2025, replaced crimson_seastar_smp), crimson_alien_* as before. Read from the 20.2.4
  source and accepted by a real 20.2.4 mon.
- main after tentacle (21.x): crimson_cpu_set, crimson_cpu_num, crimson_bluestore_cpu_set,
  crimson_bluestore_num_threads.

The object store option belongs to the family too: squid and tentacle crimson reads
crimson_osd_objectstore (default bluestore) and ignores osd_objectstore; main dropped
crimson_osd_objectstore from crimson.yaml.in, and osd_objectstore serves both OSDs.

"legacy" names cover squid and tentacle, "current" names Ceph 21 and later. Only the CPU
set is written, never the reactor count: a set overrides the count in every release (the
count only sizes unpinned reactors), and the count's name differs between squid and
tentacle, so leaving it out keeps one legacy family valid for both.

The version table below is the offline default (`crimsonbench plan`); executors ask the
target which names it knows (family_from_known_options) before they plan.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Literal

from crimsonbench.errors import InvalidSpec
from crimsonbench.plan.types import CephSetup, CpuPlan, OsdCpus
from crimsonbench.spec.models import Flavor, ObjectStore, OptionNaming, OsdSpec

OptionFamily = Literal["legacy", "current"]

FIRST_LEGACY_MAJOR = 19  # squid: first release with a crimson CPU-set option
FIRST_CURRENT_MAJOR = 21  # the first release after tentacle: crimson_cpu_* names

_NAMES: dict[str, dict[str, str]] = {
    "legacy": {
        "cpu_set": "crimson_seastar_cpu_cores",
        "alien_set": "crimson_alien_thread_cpu_cores",
        "alien_num": "crimson_alien_op_num_threads",
        "store": "crimson_osd_objectstore",
    },
    "current": {
        "cpu_set": "crimson_cpu_set",
        "alien_set": "crimson_bluestore_cpu_set",
        "alien_num": "crimson_bluestore_num_threads",
        "store": "osd_objectstore",
    },
}
CPU_SET_OPTIONS = tuple(names["cpu_set"] for names in _NAMES.values())
# The reactor-count options of each generation: never written (see above), but read when
# deciding whether a deployed OSD's layout differs from a plan.
COUNT_OPTIONS = ("crimson_cpu_num", "crimson_seastar_num_threads", "crimson_seastar_smp")
# The option a crimson OSD reads its object store from, newest family first.
STORE_OPTIONS = tuple(_NAMES[f]["store"] for f in ("current", "legacy"))
CLASSIC_STORE_OPTION = "osd_objectstore"

# Without these the mons refuse crimson OSDs or their pools (doc/crimson/crimson.rst).
CRIMSON_GLOBAL = {
    "enable_experimental_unrecoverable_data_corrupting_features": "crimson",
    "osd_pool_default_crimson": "true",
}
ALLOW_CRIMSON = ("osd", "set-allow-crimson", "--yes-i-really-mean-it")


def ceph_major(version: str) -> int | None:
    """19 of "19.2.1", "v19.2" or `ceph --version`'s "ceph version 19.2.1 (...) squid";
    None when the text names no version."""
    match = re.search(r"(?<![\d.])v?(\d{1,4})\.\d+", version)
    return None if match is None else int(match.group(1))


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
            "(legacy for squid and tentacle, current for Ceph 21 and newer)",
        )
    major = ceph_major(ceph_version)
    if major is None:
        raise InvalidSpec(
            "spec.osd.cephVersion",
            f"{ceph_version!r} is not a Ceph version; write it like 19.2.1, "
            "or set osd.optionNaming to legacy or current",
        )
    if major < FIRST_LEGACY_MAJOR:
        raise InvalidSpec(
            "spec.osd.cephVersion",
            f"Ceph {major} has no crimson CPU-set option (crimson_seastar_cpu_cores came with "
            "squid, 19.2), so reactors cannot be pinned; use Ceph 19.2 or newer",
        )
    return "current" if major >= FIRST_CURRENT_MAJOR else "legacy"


def family_from_known_options(known: Collection[str]) -> OptionFamily:
    """The family whose CPU-set option the target's mon knows (from `ceph config ls`).
    Asking beats the version table: point releases and vendor builds differ from it."""
    for family in ("current", "legacy"):
        if _NAMES[family]["cpu_set"] in known:
            return family  # type: ignore[return-value]
    raise InvalidSpec(
        "spec.osd.flavor",
        "the cluster's mons know no crimson CPU-set option (neither crimson_cpu_set nor "
        "crimson_seastar_cpu_cores), so crimson reactors cannot be pinned on it; crimson "
        "needs Ceph 19.2 (squid) or newer",
    )


def store_option(family: OptionFamily | str) -> str:
    """The option naming a crimson OSD's object store in `family` (osd_objectstore for
    classic OSDs, whatever family is passed for them)."""
    if family not in _NAMES:
        return CLASSIC_STORE_OPTION
    return _NAMES[family]["store"]


def store_option_from_known(known: Collection[str]) -> str:
    """The store option of a target that listed the names it knows (`ceph config ls`,
    `ceph-conf -D`): crimson_osd_objectstore where it exists (it is the store wherever it
    exists: squid, tentacle), else osd_objectstore (Ceph 21/main, where it serves both)."""
    legacy = _NAMES["legacy"]["store"]
    return legacy if legacy in known else _NAMES["current"]["store"]


def crimson_family_of(config: Mapping[str, Mapping[str, str]]) -> OptionFamily | None:
    """Which family a setup's osd.N sections were written in (None: no crimson CPU set)."""
    for family in ("current", "legacy"):
        name = _NAMES[family]["cpu_set"]
        if any(name in opts for section, opts in config.items() if section.startswith("osd.")):
            return family  # type: ignore[return-value]
    return None


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
    if bluestore and o.alien:
        section[names["alien_num"]] = str(cpu.alien_threads)
        section[names["alien_set"]] = o.alien_cpuset
    return section
