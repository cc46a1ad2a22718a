"""Step results over ConfigMaps under the object size limit, and the .status summary."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from manifest_inputs import FIXTURES
from step_results import many, result

from crimsonbench.manifests.results import (
    read_results_configmaps,
    results_configmaps,
)
from crimsonbench.results.fio_json import combine, parse_fio_json
from crimsonbench.results.types import StepResult

MIB = 1024 * 1024


def _same(a: StepResult, b: StepResult) -> bool:
    return json.dumps(a.to_dict(), sort_keys=True) == json.dumps(b.to_dict(), sort_keys=True)


# ---------------------------------------------------------------- ConfigMaps


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
