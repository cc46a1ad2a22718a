"""The object store option belongs to crimson's option family: crimson_osd_objectstore on
squid and tentacle (which ignore osd_objectstore), osd_objectstore on Ceph 21/main (whose
crimson.yaml.in has no crimson_osd_objectstore and reads osd_objectstore for both OSDs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crimsonbench.local.osds import store_options
from crimsonbench.plan.ceph_options import (
    STORE_OPTIONS,
    ceph_setup,
    crimson_family_of,
    family_from_known_options,
    store_option,
    store_option_from_known,
)
from crimsonbench.plan.cpu import plan_cpus
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.spec.models import ClientSpec, Flavor, LocalTarget, ObjectStore, OsdSpec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# every crimson_ option a real 20.2.4 mon lists (`ceph config ls`, make_fixtures.sh)
TENTACLE = set((FIXTURES / "crimson" / "config-ls-crimson.txt").read_text().split())
# Ceph main's crimson.yaml.in (after tentacle): the CPU options renamed, no store option of
# its own (osd_objectstore, in global.yaml.in, is listed by every release)
MAIN = {"crimson_cpu_set", "crimson_cpu_num", "crimson_bluestore_cpu_set",
        "crimson_bluestore_num_threads", "crimson_osd_obc_lru_size", "osd_objectstore"}  # fmt: skip


def test_each_family_names_its_store_option() -> None:
    assert store_option("legacy") == "crimson_osd_objectstore"
    assert store_option("current") == "osd_objectstore"
    assert store_option("classic") == "osd_objectstore"
    assert set(STORE_OPTIONS) == {"crimson_osd_objectstore", "osd_objectstore"}


@pytest.mark.parametrize(
    ("known", "family", "store"),
    [
        (TENTACLE | {"osd_objectstore"}, "legacy", "crimson_osd_objectstore"),
        (MAIN, "current", "osd_objectstore"),
    ],
    ids=["tentacle-20.2.4-mon", "main"],
)
def test_the_target_s_names_give_the_family_and_its_store_option(
    known: set[str], family: str, store: str
) -> None:
    assert family_from_known_options(known) == family
    assert store_option_from_known(known) == store
    assert store_option(family) == store


def test_a_build_that_still_has_crimson_osd_objectstore_is_asked_by_that_name() -> None:
    """Between the CPU rename and the store option's removal a main build knows both
    crimson_cpu_set and crimson_osd_objectstore: where the latter exists it is the store."""
    known = MAIN | {"crimson_osd_objectstore"}
    assert store_option_from_known(known) == "crimson_osd_objectstore"


def _osd(store: ObjectStore, flavor: Flavor = Flavor.CRIMSON) -> OsdSpec:
    return OsdSpec(flavor=flavor, object_store=store)


STORES = [ObjectStore.CYANSTORE, ObjectStore.SEASTORE, ObjectStore.BLUESTORE]


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("option", ["crimson_osd_objectstore", "osd_objectstore"])
def test_local_mode_writes_the_store_under_the_target_s_name(
    store: ObjectStore, option: str
) -> None:
    opts = store_options(_osd(store), LocalTarget(bluestore_size="4Gi"), None, option)
    assert opts[option] == store.value
    other = ({"crimson_osd_objectstore", "osd_objectstore"} - {option}).pop()
    assert other not in opts  # never both: on tentacle osd_objectstore would say the wrong store


def test_classic_osds_always_read_osd_objectstore() -> None:
    opts = store_options(_osd(ObjectStore.MEMSTORE, Flavor.CLASSIC), LocalTarget(),
                         None, "crimson_osd_objectstore")  # fmt: skip
    assert opts["osd_objectstore"] == "memstore"
    assert "crimson_osd_objectstore" not in opts


@pytest.mark.parametrize("family", ["legacy", "current"])
def test_the_family_is_read_back_from_a_setup(family: str) -> None:
    topo = parse_lscpu_json((FIXTURES / "lscpu" / "adjacent-2s-8c-ht.json").read_text())
    osd = OsdSpec(flavor=Flavor.CRIMSON, object_store=ObjectStore.SEASTORE, count=2, reactors=2)
    setup = ceph_setup(plan_cpus(topo, osd, ClientSpec(cpu_set="8-31")), osd, family)
    assert crimson_family_of(setup.config) == family
    assert crimson_family_of({"osd": {"osd_op_num_shards": "2"}}) is None
