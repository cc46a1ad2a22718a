"""Step results over ConfigMaps under the object size limit, and the .status summary."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import pytest
from manifest_inputs import bluestore_8x5

from crimsonbench.manifests.results import (
    read_results_configmaps,
    results_configmaps,
    status_summary,
)
from crimsonbench.results.types import FioSummary, ResourceSummary, StepResult
from crimsonbench.spec.models import validate_spec
from crimsonbench.spec.status import BenchmarkRunStatus, StepSummary, WorkloadPeak

MIB = 1024 * 1024


def result(
    index: int, workload: str, iodepth: int, iops: float, repeat: int = 1, **fio: Any
) -> StepResult:
    values: dict[str, Any] = dict(
        iops=iops, bw_mib_s=iops * 4 / 1024, total_ios=int(iops * 300), clat_mean_ms=0.2 * iodepth,
        clat_stdev_ms=0.05 * iodepth, clat_p50_ms=0.2, clat_p99_ms=0.9, clat_p999_ms=math.nan,
        usr_cpu=10.0, sys_cpu=20.0, runtime_s=300.0, jobs=8,
    )  # fmt: skip
    values.update(fio)
    return StepResult(
        step_id=f"{index:04d}-{workload}-qd{iodepth:03d}-r{repeat}",
        workload=workload,
        iodepth=iodepth,
        repeat=repeat,
        fio=FioSummary(**values),
        resources=ResourceSummary(osd_cpu=1234.5, osd_mem_mib=4096.0, fio_cpu=321.0, samples=300),
        extra={"affinity": {"osd.0": {str(t): "0-4" for t in range(20)}}},
    )


def many(n: int) -> list[StepResult]:
    workloads = ["randread4k", "randwrite4k", "seqread64k", "seqwrite64k"]
    return [result(i, workloads[i % 4], 1 + i % 64, 1000.0 + i) for i in range(n)]


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


# ---------------------------------------------------------------- .status


def spec(**sweep: Any) -> Any:
    doc = bluestore_8x5("osd")
    doc["sweep"] = sweep
    return validate_spec(doc)


def test_status_keys_are_the_status_models() -> None:
    summary = status_summary(many(40), spec())
    assert set(summary) == {"steps", "peaks", "peakIops"}
    step_keys = {f.alias or n for n, f in StepSummary.model_fields.items()}
    peak_keys = {f.alias or n for n, f in WorkloadPeak.model_fields.items()}
    assert set(summary["steps"][0]) == step_keys
    assert {"bwMibS", "clatP99Ms", "stoppedEarly", "osdCpu"} <= step_keys
    assert set(summary["peaks"][0]) == peak_keys
    # and the API's model accepts it back
    status = BenchmarkRunStatus.model_validate(summary)
    assert len(status.steps) == 40
    json.dumps(summary, allow_nan=False)


def test_peaks_per_workload_iops_or_bandwidth() -> None:
    rows = [
        result(0, "randread4k", 1, 1000.0),
        result(1, "randread4k", 8, 5000.0),
        result(2, "randread4k", 16, 4000.0),
        # sequential: judged by MiB/s, not IOPS
        result(3, "seqread64k", 1, 900.0, bw_mib_s=2000.0),
        result(4, "seqread64k", 16, 1000.0, bw_mib_s=1500.0),
        # a failed step never is the peak
        result(5, "randwrite4k", 1, 800.0),
        result(6, "randwrite4k", 4, 9000.0, errors=2),
    ]
    summary = status_summary(rows, spec())
    peaks = {p["workload"]: p for p in summary["peaks"]}
    assert [p["workload"] for p in summary["peaks"]] == ["randread4k", "randwrite4k", "seqread64k"]
    assert peaks["randread4k"]["iodepth"] == 8
    assert peaks["seqread64k"]["iodepth"] == 1 and peaks["seqread64k"]["bwMibS"] == 2000.0
    assert peaks["randwrite4k"]["iodepth"] == 1
    assert summary["peakIops"] == 5000


def test_repeats_are_averaged_for_peaks() -> None:
    rows = [
        result(0, "randread4k", 1, 1000.0, repeat=1),
        result(1, "randread4k", 2, 3000.0, repeat=1),
        result(2, "randread4k", 1, 5000.0, repeat=2),  # outlier: mean at qd1 is 3000
        result(3, "randread4k", 2, 3100.0, repeat=2),
    ]
    summary = status_summary(rows, spec(repeats=2))
    assert summary["peaks"][0]["iodepth"] == 2
    assert summary["peaks"][0]["iops"] == 3050.0
    assert [s["repeat"] for s in summary["steps"]] == [1, 1, 2, 2]


def test_stopped_early_reason_on_the_step_that_ended_the_sweep() -> None:
    rows = [
        result(0, "randread4k", 1, 1000.0),
        result(1, "randread4k", 2, 1500.0, clat_stdev_ms=5.0),  # cv 12.5
        result(2, "randwrite4k", 1, 800.0),
    ]
    on = status_summary(rows, spec(earlyExit={"enabled": True}))
    assert [s["stoppedEarly"] for s in on["steps"]] == ["", on["steps"][1]["stoppedEarly"], ""]
    assert "stddev/mean" in on["steps"][1]["stoppedEarly"]
    off = status_summary(rows, spec())
    assert all(s["stoppedEarly"] == "" for s in off["steps"])
    target = status_summary(rows, spec(latencyTarget={"percentile": 99, "latencyMs": 0.5}))
    assert "p99 clat" in target["steps"][0]["stoppedEarly"]


def test_status_keeps_the_newest_steps_and_no_nan() -> None:
    rows = many(1000)
    rows[-1] = replace(rows[-1], fio=replace(rows[-1].fio, clat_p99_ms=math.nan))
    summary = status_summary(rows, spec(), max_steps=100)
    assert len(summary["steps"]) == 100
    assert summary["steps"][-1]["id"] == rows[-1].step_id
    assert summary["steps"][-1]["clatP99Ms"] == 0.0
    assert len(json.dumps(summary)) < 100_000
    assert len(summary["peaks"]) == 4
