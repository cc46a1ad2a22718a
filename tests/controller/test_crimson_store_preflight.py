"""Preflight checks the store a crimson OSD really runs. Crimson's `osd metadata` has no
osd_objectstore (fixtures from real 20.2.4 OSDs), so the facts Job asks each crimson
daemon (`ceph tell osd.N config get crimson_osd_objectstore`, or osd_objectstore where
its Ceph has no such option: main) and a run asking for another store is refused before
anything is touched, instead of running and being labelled with the wrong store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crimsonbench.controller.decisions.decide import ClusterFacts, crimson_stores, preflight
from crimsonbench.errors import ExecutionError, InvalidSpec, ParseError
from crimsonbench.manifests.maintenance import OSD_STORES, OSD_STORES_SCRIPT
from crimsonbench.results.step_log import parse_sections
from crimsonbench.spec.models import validate_spec

FIX = Path(__file__).resolve().parents[1] / "fixtures"
CRIMSON_META = (FIX / "crimson" / "osd-metadata-crimson-bluestore.json").read_text()
KNOWN = json.dumps((FIX / "crimson" / "config-ls-crimson.txt").read_text().split())
# a real OSD's answers (tests/fixtures/ceph/capture_store_answers.py): the store option it
# knows, and the error for one its Ceph does not know (rc 2, nothing on stdout)
ANSWER = (FIX / "ceph" / "tell-config-get-osd_objectstore-16.2.15.stdout").read_text()
UNKNOWN_RC = int((FIX / "ceph" / "tell-config-get-crimson_osd_objectstore-16.2.15.rc").read_text())


# the mon database and fsid of a real cluster (tests/fixtures/ceph/capture.py)
_FACTS = parse_sections((FIX / "ceph" / "facts-16.2.15-classic.txt").read_text())
MON_DB = {k: _FACTS[k] for k in ("config-dump", "fsid")}


def stores_line(osd_id: int, option: str, answer: str) -> str:
    """What the facts script prints for one OSD (its printf), around a daemon's answer."""
    return f'{{"id": {osd_id}, "option": "{option}", "answer": {answer}}}\n'


def facts(stores: str) -> ClusterFacts:
    return ClusterFacts.from_sections(
        {
            "config-ls": KNOWN,
            "osd-metadata": f"[{CRIMSON_META}]",
            "pool-ls": "[]",
            OSD_STORES: stores,
            **MON_DB,
        }  # fmt: skip
    )


def spec(store: str) -> Any:
    return validate_spec(
        {
            "target": {"rook": {"clusterName": "c"}},
            "osd": {"flavor": "crimson", "objectStore": store, "count": 1},
            "client": {"node": "vm", "pool": "bench"},
        }
    )


def test_the_daemon_s_answer_is_the_crimson_osd_s_store() -> None:
    assert UNKNOWN_RC != 0  # the script's fallback: an unknown option fails `ceph tell`
    answer = ANSWER.replace("osd_objectstore", "crimson_osd_objectstore").replace(
        "memstore", "bluestore"
    )
    f = facts(stores_line(0, "crimson_osd_objectstore", answer))
    meta = f.osds[0]
    assert meta.crimson and meta.object_store == "bluestore"
    assert meta.store_option == "crimson_osd_objectstore"
    assert preflight(spec("bluestore"), f, {0: "vm"}) == "legacy"


def test_seastore_asked_of_alien_bluestore_osds_is_refused_naming_the_field() -> None:
    """The finding of issue 27: before, the check was skipped for crimson and the run went
    ahead on bluestore OSDs labelled seastore."""
    answer = ANSWER.replace("osd_objectstore", "crimson_osd_objectstore").replace(
        "memstore", "bluestore"
    )
    f = facts(stores_line(0, "crimson_osd_objectstore", answer))
    with pytest.raises(InvalidSpec, match="osd.0 runs bluestore, the spec asks for seastore") as e:
        preflight(spec("seastore"), f, {0: "vm"})
    assert e.value.field == "spec.osd.objectStore"


def test_on_ceph_main_the_store_comes_from_osd_objectstore() -> None:
    f = facts(stores_line(0, "osd_objectstore", ANSWER.replace("memstore", "seastore")))
    assert (f.osds[0].store_option, f.osds[0].object_store) == ("osd_objectstore", "seastore")
    with pytest.raises(InvalidSpec, match="runs seastore, the spec asks for cyanstore"):
        preflight(spec("cyanstore"), f, {0: "vm"})


def test_a_crimson_osd_that_did_not_answer_stops_the_run_before_anything_is_touched() -> None:
    with pytest.raises(ExecutionError, match="osd.0 on vm did not say which object store"):
        preflight(spec("bluestore"), facts(""), {0: "vm"})


def test_an_unreadable_section_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="osd-stores section is not JSON"):
        crimson_stores('{"id": 0, "option": ')


def test_the_facts_script_asks_crimson_daemons_only_and_the_crimson_name_first() -> None:
    lines = OSD_STORES_SCRIPT.splitlines()
    assert any('"osd_type": ?"crimson"' in line for line in lines)
    assert "for opt in crimson_osd_objectstore osd_objectstore; do" in OSD_STORES_SCRIPT
    assert 'tell "osd.$id" config get "$opt" --format json' in OSD_STORES_SCRIPT
