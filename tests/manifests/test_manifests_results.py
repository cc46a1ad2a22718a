"""Step results over ConfigMaps under the object size limit: one per step (cut in parts
when a step is over one), and the layout of older operators (a list of steps per
ConfigMap), still read."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import pytest
from manifest_inputs import FIXTURES
from step_results import many, result

from crimsonbench.manifests.results import (
    MAX_STEP_PARTS,
    StepTooLarge,
    not_owned,
    owned_by,
    part_names,
    read_results_configmaps,
    read_step,
    read_stored,
    results_configmaps,
    results_selector,
    step_configmap_name,
    step_configmaps,
)
from crimsonbench.results.fio_json import combine, parse_fio_json
from crimsonbench.results.types import StepResult

MIB = 1024 * 1024


def _same(a: StepResult, b: StepResult) -> bool:
    return json.dumps(a.to_dict(), sort_keys=True) == json.dumps(b.to_dict(), sort_keys=True)


# ---------------------------------------------------------------- one ConfigMap per step


def _wide(index: int, clients: int) -> StepResult:
    """A step of `clients` fio clients, each a row of real fio figures."""
    docs = sorted((FIXTURES / "fio" / "rbd").glob("*.json"))
    row = combine([j for d in docs for j in parse_fio_json(d.read_text())])
    rows = {f"node-{c:04d}": replace(row, iops=row.iops + c) for c in range(clients)}
    return replace(result(index, "randread4k", 1 + index, 1000.0), clients=rows)


def test_a_step_is_one_configmap_named_by_what_it_measured() -> None:
    step = result(3, "randread4k", 16, 1000.0)
    (cm,) = step_configmaps("run-a", step, namespace="bench")
    assert cm["metadata"]["name"] == step_configmap_name("run-a", step.key)
    assert cm["metadata"]["name"] == "run-a-step-randread4k-qd016-r1"
    meta = cm["metadata"]
    assert meta["labels"]["bench.crimson.ceph.io/role"] == "step-result"
    assert meta["labels"]["bench.crimson.ceph.io/step"] == step.key
    assert meta["annotations"]["bench.crimson.ceph.io/parts"] == "1"
    assert part_names(cm) == []
    assert _same(read_step(cm, {}), step)
    assert "NaN" not in cm["data"]["result.json"]  # strict JSON: NaN travels as null


def test_a_step_over_one_configmap_is_cut_in_parts_written_before_its_head() -> None:
    step = _wide(1, 2500)  # ~1.1 MB of JSON
    cms = step_configmaps("run-a", step, namespace="bench")
    assert len(cms) == 2
    *parts, head = cms
    assert head["metadata"]["labels"]["bench.crimson.ceph.io/role"] == "step-result"
    assert [p["metadata"]["name"] for p in parts] == part_names(head)
    assert part_names(head) == [head["metadata"]["name"] + "-p1"]
    for cm in cms:  # the API server's rule: keys + values at most 1 MiB a ConfigMap
        assert sum(len(k) + len(v.encode()) for k, v in cm["data"].items()) < MIB
    back = read_step(head, {p["metadata"]["name"]: p for p in parts})
    assert _same(back, step)
    with pytest.raises(ValueError, match="is missing"):
        read_step(head, {})
    other = step_configmaps("run-a", _wide(1, 2600), namespace="bench")[0]  # another write
    with pytest.raises(ValueError, match="do not make the result"):
        read_step(head, {other["metadata"]["name"]: other})


def test_a_step_over_every_part_it_may_take_is_refused_naming_it() -> None:
    with pytest.raises(StepTooLarge, match=f"over the {MAX_STEP_PARTS} ConfigMaps"):
        step_configmaps("r", _wide(1, 40), limit_bytes=1000)


def test_long_names_and_keys_make_valid_names() -> None:
    name = step_configmap_name("r" * 50, "W" * 200)
    assert len(name) <= 249 and name == name.lower()
    assert step_configmap_name("r", "W" * 200) != step_configmap_name("r", "w" * 200)


def test_both_layouts_are_read_together_and_a_half_written_set_for_what_it_holds() -> None:
    """An older operator's parts (one never written) beside this layout's steps (one of
    them also in the older set, one whose head lost its part): every whole step, once, and
    what could not be read named."""
    older = many(40)
    legacy = results_configmaps("r", older, limit_bytes=3000)
    assert len(legacy) >= 4
    lost = {d["step_id"] for d in json.loads(legacy[2]["data"]["results.json"])}
    newer = replace(older[0], fio=replace(older[0].fio, iops=5.0))  # this layout's wins
    wide = step_configmaps("r", _wide(90, 2500))
    cms = [*legacy[:2], *legacy[3:], *step_configmaps("r", newer), wide[-1]]
    stored = read_stored(reversed(cms))
    assert {r.step_id for r in stored.results} == {r.step_id for r in older} - lost
    assert next(r for r in stored.results if r.key == newer.key).fio.iops == 5.0
    assert len(stored.unreadable) == 2, stored.unreadable
    assert "r-results-2 (part 2 of" in stored.unreadable[1] and "is missing" in stored.unreadable[0]
    assert read_stored(reversed(cms), whole=False).unreadable == stored.unreadable[:1]
    assert read_stored([]).results == [] and read_stored([]).unreadable == []


def test_the_selector_finds_both_layouts() -> None:
    assert results_selector("r") == (
        "bench.crimson.ceph.io/run=r,bench.crimson.ceph.io/role in "
        "(results,step-result,step-result-part)"
    )


# ---------------------------------------------------------------- the older layout


def test_five_thousand_steps_fit_under_the_limit() -> None:
    results = many(5000)
    cms = results_configmaps("run-a", results, namespace="bench")
    assert len(cms) > 1
    assert [cm["metadata"]["name"] for cm in cms] == [f"run-a-results-{i}" for i in range(len(cms))]
    for cm in cms:
        assert len(cm["data"]["results.json"].encode()) <= 900_000
        # the API server's ConfigMap rule: keys + values at most 1 MiB (validateConfigMap)
        assert sum(len(k) + len(v.encode()) for k, v in cm["data"].items()) < MIB
        # the request carries the JSON escaped once more: under the 3 MiB body limit, and
        # etcd stores protobuf (no escaping) under its 1.5 MiB request limit
        assert len(json.dumps(cm).encode()) < 3 * MIB
        assert cm["metadata"]["labels"]["bench.crimson.ceph.io/run"] == "run-a"
        assert cm["metadata"]["annotations"]["bench.crimson.ceph.io/parts"] == str(len(cms))
    back = read_results_configmaps(reversed(cms))
    assert len(back) == 5000
    assert all(
        _same(a, b) for a, b in zip(back, sorted(results, key=lambda r: r.step_id), strict=True)
    )
    assert math.isnan(back[0].fio.clat_p999_ms)  # NaN travels as null and comes back


@pytest.mark.parametrize("limit", [2_000, 10_000, 100_000])
def test_every_part_respects_a_small_limit(limit: int) -> None:
    cms = results_configmaps("r", many(200), limit)
    assert all(len(cm["data"]["results.json"].encode()) <= limit for cm in cms)
    assert sum(len(json.loads(cm["data"]["results.json"])) for cm in cms) == 200
    # greedy: every part but the last is too full to take the next step
    sizes = [len(cm["data"]["results.json"].encode()) for cm in cms]
    row = len(json.dumps(json.loads(cms[0]["data"]["results.json"])[0], separators=(",", ":")))
    assert all(size + row + 1 > limit * 0.98 for size in sizes[:-1])


def test_strict_json() -> None:
    cms = results_configmaps("r", [result(0, "randread4k", 1, 1.0, clat_p99_ms=math.inf)])
    text = cms[0]["data"]["results.json"]
    assert "NaN" not in text and "Infinity" not in text
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))


def test_no_results_one_empty_configmap() -> None:
    (cm,) = results_configmaps("r", [])
    assert cm["data"]["results.json"] == "[]"
    assert read_results_configmaps([cm]) == []


def test_one_step_over_the_limit_is_an_error() -> None:
    with pytest.raises(ValueError, match="over limit_bytes"):
        results_configmaps("r", many(1), limit_bytes=100)


def test_missing_part_is_an_error() -> None:
    cms = results_configmaps("r", many(300), 20_000)
    with pytest.raises(ValueError, match=r"part\(s\) \[1\]"):
        read_results_configmaps([cms[0], *cms[2:]])


# ---------------------------------------------------------------- at scale


def test_fifty_clients_by_thirty_two_images_stay_within_the_api_limits() -> None:
    """A step of 50 client nodes x 32 images is aggregated at the source: the step keeps
    the combined row and one row per client (not per job), so 400 such steps fit in a
    handful of ConfigMaps, each under the limit, and come back exactly."""
    # a client's row from real fio output (32 jobs of the captured rbd runs)
    docs = sorted((FIXTURES / "fio" / "rbd").glob("*.json"))
    jobs = [j for d in docs for j in parse_fio_json(d.read_text())]
    client_row = combine((jobs * 32)[:32])
    steps = []
    for i in range(400):
        clients = {
            f"node-{c:02d}": replace(client_row, iops=client_row.iops + c) for c in range(50)
        }
        base = result(i, "randread4k", 1 + i % 64, 1000.0)
        steps.append(replace(base, clients=clients, start_skew_ms=12.5))
    cms = results_configmaps("big", steps, namespace="bench")
    assert 5 <= len(cms) <= 60
    for cm in cms:
        assert len(cm["data"]["results.json"].encode()) <= 900_000
        assert sum(len(k) + len(v.encode()) for k, v in cm["data"].items()) < MIB
    back = read_results_configmaps(cms)
    assert all(_same(a, b) for a, b in zip(back, steps, strict=True))
    assert back[7].clients["node-49"].iops == client_row.iops + 49


@pytest.mark.parametrize(
    ("refs", "owned"),
    [
        ([{"kind": "BenchmarkRun", "name": "r", "uid": "u-1"}], True),
        ([{"uid": "u-0"}, {"uid": "u-1"}], True),  # among others
        ([{"kind": "BenchmarkRun", "name": "r", "uid": "u-0"}], False),  # an earlier run's
        (None, False),  # nobody's: not made by the operator
        ([], False),
        ("u-1", False),  # hostile shapes (anyone who may write ConfigMaps there)
        ({"uid": "u-1"}, False),
        ([["uid", "u-1"]], False),
    ],
)
def test_only_configmaps_the_run_owns_are_its_own(refs: Any, owned: bool) -> None:
    cm = {"metadata": {"name": "r-step-x", "ownerReferences": refs}}
    assert owned_by(cm, "u-1") is owned
    assert not_owned([cm], "u-1") == ([] if owned else ["r-step-x"])
