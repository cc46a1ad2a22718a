"""option_family and ceph_setup: exact mon-database config for both option families."""

from __future__ import annotations

from pathlib import Path

import pytest

from crimsonbench.errors import InvalidSpec
from crimsonbench.plan.ceph_options import ceph_setup, family_from_known_options, option_family
from crimsonbench.plan.cpu import plan_cpus
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.plan.types import CephSetup
from crimsonbench.spec.models import ClientSpec, ObjectStore, OptionNaming, OsdSpec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lscpu"
ADJ = parse_lscpu_json((FIXTURES / "adjacent-2s-8c-ht.json").read_text())
REF = parse_lscpu_json((FIXTURES / "xeon-8276m-2s.json").read_text())

CRIMSON_GLOBAL = {
    "enable_experimental_unrecoverable_data_corrupting_features": "crimson",
    "osd_pool_default_crimson": "true",
}
ALLOW = (("osd", "set-allow-crimson", "--yes-i-really-mean-it"),)


def setup(family: str, **fields: object) -> CephSetup:
    osd = OsdSpec(**fields)  # type: ignore[arg-type]
    cpu = plan_cpus(ADJ, osd, ClientSpec(cpu_set="8-31"))
    return ceph_setup(cpu, osd, family)


# ---------------------------------------------------------------- option_family


@pytest.mark.parametrize(
    ("naming", "version", "family"),
    [
        (OptionNaming.LEGACY, None, "legacy"),
        (OptionNaming.CURRENT, None, "current"),
        (OptionNaming.LEGACY, "20.2.0", "legacy"),  # an explicit choice wins
        (OptionNaming.AUTO, "19.2.1", "legacy"),
        # tentacle still uses crimson_seastar_* (its crimson.yaml.in and a real 20.2.4 mon)
        (OptionNaming.AUTO, "20.2.4", "legacy"),
        (OptionNaming.AUTO, "21.0", "current"),
        (OptionNaming.AUTO, "ceph version 19.2.1 (58a7fab8be0a) squid (stable)", "legacy"),
        (OptionNaming.AUTO, "ceph version 20.2.4 (69f84cc2) tentacle (stable)", "legacy"),
    ],
)
def test_option_family(naming: OptionNaming, version: str | None, family: str) -> None:
    assert option_family(naming, version) == family


def test_auto_without_a_version_asks_for_one() -> None:
    with pytest.raises(InvalidSpec, match="osd.cephVersion.*osd.optionNaming") as err:
        option_family(OptionNaming.AUTO, None)
    assert err.value.field == "spec.osd.cephVersion"


def test_reef_and_older_cannot_pin_reactors() -> None:
    with pytest.raises(InvalidSpec, match="Ceph 18 has no crimson CPU-set option") as err:
        option_family(OptionNaming.AUTO, "18.2.7")
    assert err.value.field == "spec.osd.cephVersion"


@pytest.mark.parametrize(
    ("known", "family"),
    [
        ({"crimson_cpu_set", "crimson_cpu_num", "crimson_bluestore_cpu_set"}, "current"),
        ({"crimson_seastar_cpu_cores", "crimson_seastar_num_threads"}, "legacy"),
        ({"crimson_seastar_cpu_cores", "crimson_seastar_smp"}, "legacy"),  # squid
    ],
)
def test_family_from_the_options_the_mon_knows(known: set[str], family: str) -> None:
    assert family_from_known_options(known) == family


def test_a_mon_without_a_cpu_set_option_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidSpec, match="neither crimson_cpu_set nor") as err:
        family_from_known_options({"crimson_seastar_smp", "crimson_osd_obc_lru_size"})
    assert err.value.field == "spec.osd.flavor"


def test_auto_with_garbage_version() -> None:
    with pytest.raises(InvalidSpec, match="'squid' is not a Ceph version") as err:
        option_family(OptionNaming.AUTO, "squid")
    assert err.value.field == "spec.osd.cephVersion"


# ---------------------------------------------------------------- ceph_setup

BLUESTORE = dict(
    count=2, reactors=2, cpu_set="0-7", hyper_threads="physical", ceph_config={"debug_osd": "0/5"}
)


def test_legacy_bluestore_exact_config() -> None:
    s = setup("legacy", **BLUESTORE)
    assert s.config == {
        "global": CRIMSON_GLOBAL,
        "osd.0": {
            "crimson_seastar_cpu_cores": "0,2",
            "crimson_alien_op_num_threads": "16",
            "crimson_alien_thread_cpu_cores": "1,3,5,7",
        },
        "osd.1": {
            "crimson_seastar_cpu_cores": "4,6",
            "crimson_alien_op_num_threads": "16",
            "crimson_alien_thread_cpu_cores": "1,3,5,7",
        },
        "osd": {"debug_osd": "0/5"},
    }
    assert s.commands == ALLOW


def test_current_bluestore_exact_config() -> None:
    s = setup("current", **BLUESTORE)
    assert s.config == {
        "global": CRIMSON_GLOBAL,
        "osd.0": {
            "crimson_cpu_set": "0,2",
            "crimson_bluestore_num_threads": "16",
            "crimson_bluestore_cpu_set": "1,3,5,7",
        },
        "osd.1": {
            "crimson_cpu_set": "4,6",
            "crimson_bluestore_num_threads": "16",
            "crimson_bluestore_cpu_set": "1,3,5,7",
        },
        "osd": {"debug_osd": "0/5"},
    }
    assert s.commands == ALLOW


@pytest.mark.parametrize("store", ["seastore", "cyanstore"])
def test_native_stores_have_no_alien_options(store: str) -> None:
    s = setup("current", count=1, reactors=3, object_store=store)
    assert s.config == {
        "global": CRIMSON_GLOBAL,
        "osd.0": {"crimson_cpu_set": "0-2"},
    }


def test_the_reactor_count_is_never_written_even_above_its_maximum_of_32() -> None:
    osd = OsdSpec(count=1, reactors=56, cpu_set="0-27,56-83", object_store=ObjectStore.SEASTORE)
    cpu = plan_cpus(REF, osd, ClientSpec())
    for family, key in (("legacy", "crimson_seastar_cpu_cores"), ("current", "crimson_cpu_set")):
        assert ceph_setup(cpu, osd, family).config["osd.0"] == {key: "0-27,56-83"}


def test_classic_gets_only_the_extra_options() -> None:
    s = setup("legacy", flavor="classic", count=2, ceph_config={"osd_op_num_shards": "8"})
    assert s.config == {"osd": {"osd_op_num_shards": "8"}}
    assert s.commands == ()
    assert setup("current", flavor="classic", count=2) == CephSetup()
    assert setup("classic", flavor="classic", count=2) == CephSetup()  # family is ignored


def test_unknown_family_is_a_programming_error() -> None:
    osd = OsdSpec()
    cpu = plan_cpus(ADJ, osd, ClientSpec(cpu_set="8-31"))
    with pytest.raises(ValueError, match="unknown option family 'new'"):
        ceph_setup(cpu, osd, "new")
