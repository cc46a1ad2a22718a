"""Step results over ConfigMaps under the object size limit: one per step (cut in parts
when a step is over one), read back whole or named as not, and only the run's own."""

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
    read_step,
    read_stored,
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


def test_a_half_written_set_gives_every_whole_step_and_names_the_others() -> None:
    """Steps stored one ConfigMap each (in any order), one whose head lost its part, one
    whose parts were written but never its head: every whole step, once, and the one that
    could not be read named (its step runs again)."""
    steps = many(40)
    wide, headless = step_configmaps("r", _wide(90, 2500)), step_configmaps("r", _wide(91, 2500))
    cms = [cm for s in steps for cm in step_configmaps("r", s)] + [wide[-1], *headless[:-1]]
    stored = read_stored(reversed(cms))
    assert [r.step_id for r in stored.results] == sorted(r.step_id for r in steps)
    assert all(_same(a, b) for a, b in zip(stored.results, sorted(steps, key=lambda r: r.step_id),
                                           strict=True))  # fmt: skip
    assert len(stored.unreadable) == 1 and "is missing" in stored.unreadable[0]
    assert read_stored([]).results == [] and read_stored([]).unreadable == []


def test_strict_json() -> None:
    (cm,) = step_configmaps("r", result(0, "randread4k", 1, 1.0, clat_p99_ms=math.inf))
    text = cm["data"]["result.json"]
    assert "NaN" not in text and "Infinity" not in text
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))


def test_the_selector_finds_heads_and_parts() -> None:
    assert results_selector("r") == (
        "bench.crimson.ceph.io/run=r,bench.crimson.ceph.io/role in (step-result,step-result-part)"
    )


# ---------------------------------------------------------------- at scale


def test_fifty_clients_by_thirty_two_images_stay_within_the_api_limits() -> None:
    """A step of 50 client nodes x 32 images is aggregated at the source: the step keeps
    the combined row and one row per client (not per job), so each of 400 such steps fits
    one ConfigMap under the limit, and they come back exactly."""
    # a client's row from real fio output (32 jobs of the captured rbd runs)
    docs = sorted((FIXTURES / "fio" / "rbd").glob("*.json"))
    jobs = [j for d in docs for j in parse_fio_json(d.read_text())]
    client_row = combine((jobs * 32)[:32])
    steps = []
    for i in range(400):
        clients = {
            f"node-{c:02d}": replace(client_row, iops=client_row.iops + c) for c in range(50)
        }
        base = result(i, "randread4k", 1 + i % 64, 1000.0, repeat=1 + i // 64)  # distinct steps
        steps.append(replace(base, clients=clients, start_skew_ms=12.5))
    cms = [cm for step in steps for cm in step_configmaps("big", step, namespace="bench")]
    assert len(cms) == 400  # one each: 50 clients' rows fit one ConfigMap
    for cm in cms:
        assert sum(len(k) + len(v.encode()) for k, v in cm["data"].items()) < MIB
    back = read_stored(cms).results
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
