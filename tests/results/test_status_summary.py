"""The summary a run's status carries: small, with peaks, stop reasons and clients."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

from step_results import many, result

from crimsonbench.results.status_summary import status_summary
from crimsonbench.spec.models import validate_spec
from crimsonbench.spec.status import BenchmarkRunStatus, StepSummary, WorkloadPeak


def spec(**sweep: Any) -> Any:
    return validate_spec(
        {
            "target": {"rook": {"clusterName": "c"}},
            "client": {"node": "n1"},
            "workloads": [
                {"preset": p} for p in ("randread4k", "randwrite4k", "seqread64k", "seqwrite64k")
            ],
            "sweep": sweep,
        }
    )


def test_status_keys_are_the_status_models() -> None:
    summary = status_summary(many(40), spec())
    assert set(summary) == {"steps", "peaks", "peakIops", "suspectSteps"}
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
    assert [s["stoppedEarly"] for s in on["steps"]] == ["", "clat stddev/mean 12.50 ≥ 0.5", ""]
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


def test_clients_skew_and_the_slowest_client_are_in_the_summary() -> None:
    row = result(0, "randread4k", 1, 3000.0)
    slow = replace(row.fio, iops=500.0)
    fast = replace(row.fio, iops=2500.0)
    step = replace(row, clients={"node-a": fast, "node-b": slow}, start_skew_ms=7.25)
    (summary,) = status_summary([step], spec())["steps"]
    assert summary["clients"] == 2
    assert summary["startSkewMs"] == 7.2 or summary["startSkewMs"] == 7.3
    assert summary["slowestClient"] == "node-b"
    (single,) = status_summary([row], spec())["steps"]
    assert (
        single["clients"] == 1 and single["slowestClient"] == "" and single["startSkewMs"] is None
    )
