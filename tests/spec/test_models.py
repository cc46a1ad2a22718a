"""The spec rejects bad input at the edge, naming the camelCase field and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from crimsonbench.errors import InvalidSpec
from crimsonbench.spec.models import DEFAULT_IODEPTHS, PRESETS, size_bytes, validate_spec


def spec(**parts: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"target": {"local": {}}}
    base.update(parts)
    return base


def test_defaults_are_the_reference_method() -> None:
    s = validate_spec(spec())
    assert tuple(s.sweep.iodepths) == DEFAULT_IODEPTHS == (1, 2, 4, 8, 16, 24, 32, 40, 52, 64)
    assert [w.key for w in s.workloads] == list(PRESETS)
    assert (s.client.images, s.client.image_size, s.client.pool) == (32, "2Gi", "rbd")
    assert not s.sweep.early_exit.enabled and s.sweep.early_exit.clat_cv_limit == 0.5


def test_alien_threads_default_is_four_per_reactor_per_osd() -> None:
    s = validate_spec(
        spec(osd={"flavor": "crimson", "objectStore": "bluestore", "count": 8, "reactors": 5})
    )
    assert s.osd.alien_thread_count == 4 * 8 * 5
    s = validate_spec(spec(osd={"flavor": "crimson", "objectStore": "seastore", "reactors": 5}))
    assert s.osd.alien_thread_count == 0


def test_presets_map_to_fio_modes() -> None:
    s = validate_spec(spec())
    modes = {w.key: (w.rw_mode, w.block_size, w.reports_bandwidth) for w in s.workloads}
    assert modes == {
        "randread4k": ("randread", "4k", False),
        "randwrite4k": ("randwrite", "4k", False),
        "seqread64k": ("read", "64k", True),
        "seqwrite64k": ("write", "64k", True),
    }


BAD = [
    ({"target": {}}, "spec.target", "exactly one of local, rook or external"),
    ({"target": {"local": {}, "rook": {"clusterName": "c"}}}, "spec.target", "exactly one"),
    (
        spec(osd={"flavor": "classic", "objectStore": "cyanstore"}),
        "spec.osd.objectStore",
        "need flavor crimson",
    ),
    (
        spec(osd={"flavor": "classic", "objectStore": "seastore"}),
        "spec.osd.objectStore",
        "need flavor crimson",
    ),
    (
        spec(osd={"flavor": "crimson", "objectStore": "memstore"}),
        "spec.osd.objectStore",
        "memstore needs flavor classic",
    ),
    (
        spec(osd={"flavor": "classic", "objectStore": "memstore", "reactors": 2}),
        "spec.osd.reactors",
        "for classic OSDs set cpusPerOsd",
    ),
    (spec(osd={"flavor": "crimson", "cpusPerOsd": 2}), "spec.osd.cpusPerOsd", "set reactors"),
    (
        spec(osd={"flavor": "crimson", "objectStore": "seastore", "alienThreads": 8}),
        "spec.osd.alienThreads",
        "objectStore bluestore only",
    ),
    (spec(osd={"cpuSet": "0-3"}, client={"cpuSet": "2-5"}), "spec.client.cpuSet", "share CPUs 2-3"),
    (spec(osd={"cpuSet": "0-a"}), "spec.osd.cpuSet", "not a CPU list"),
    (spec(osd={"cpuSet": "7-2"}), "spec.osd.cpuSet", "write 2-7"),
    (spec(client={"cpuSet": "0-99999"}), "spec.client.cpuSet", "kernel limit"),
    (spec(sweep={"iodepths": []}), "spec.sweep.iodepths", "at least 1"),
    (spec(sweep={"iodepths": [1, 2, 2]}), "spec.sweep.iodepths", "list each iodepth once"),
    (spec(sweep={"iodepths": [0]}), "spec.sweep.iodepths[0]", "greater than or equal to 1"),
    (spec(workloads=[{"preset": "randread5k"}]), "spec.workloads[0].preset", "randread4k"),
    (
        spec(workloads=[{"preset": "randread4k", "rw": "read"}]),
        "spec.workloads[0].preset",
        "not both",
    ),
    (
        spec(workloads=[{"rw": "randrw", "bs": "16k"}]),
        "spec.workloads[0].name",
        "needs name, rw and bs",
    ),
    (
        spec(
            workloads=[
                {"name": "x", "rw": "randrw", "bs": "16k", "options": {"ioengine": "libaio"}}
            ]
        ),
        "spec.workloads[0].options",
        "options may only set",
    ),
    (
        spec(workloads=[{"preset": "randread4k"}, {"preset": "randread4k"}]),
        "spec.workloads",
        "unique",
    ),
    (
        spec(workloads=[{"name": "x", "rw": "read", "bs": "4q"}]),
        "spec.workloads[0].bs",
        "not a block size",
    ),
    (spec(client={"imageSize": "2GB"}), "spec.client.imageSize", "Mi, Gi or Ti"),
    (spec(osd={"objectstore": "memstore"}), "spec.osd.objectstore", "camelCase"),
    (
        spec(sweep={"earlyExit": {"clatCvLimit": 0}}),
        "spec.sweep.earlyExit.clatCvLimit",
        "greater than 0",
    ),
    (
        spec(sweep={"latencyTarget": {"percentile": 99}}),
        "spec.sweep.latencyTarget.latencyMs",
        "required",
    ),
    (
        {"target": {"external": {"user": "admin", "monHost": "v2:10.0.0.1:3300"}}},
        "spec.target.external.keyringSecret",
        "keyringFile",
    ),
    (spec(osd={"count": 0}), "spec.osd.count", "greater than or equal to 1"),
    (
        spec(sweep={"latencyTarget": {"percentile": 95, "latencyMs": 2}}),
        "spec.sweep.latencyTarget.percentile",
        "99.9",
    ),
]


@pytest.mark.parametrize(("data", "field", "words"), BAD, ids=[b[1] + ":" + b[2] for b in BAD])
def test_bad_specs_name_the_field_and_the_fix(data: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        validate_spec(data)
    assert info.value.field == field
    assert words in info.value.message


def test_camel_and_snake_case_both_load() -> None:
    a = validate_spec(spec(osd={"cpuPolicy": "socket", "hyperThreads": "physical"}))
    b = validate_spec(spec(osd={"cpu_policy": "socket", "hyper_threads": "physical"}))
    assert a == b
    assert a.osd.cpu_policy == "socket"


@pytest.mark.parametrize(
    ("text", "value"), [("64Mi", 64 * 2**20), ("2Gi", 2 * 2**30), ("1Ti", 2**40)]
)
def test_size_bytes_of_a_size_field(text: str, value: int) -> None:
    s = validate_spec(spec(client={"imageSize": text}))
    assert size_bytes(s.client.image_size) == value
