"""results.validity: each reason on its own, at its limit and past it; steadiness and
overlap computed from real fio logs (tests/fixtures/results/gate-1image, a real local run);
stored verdicts read as untrusted input; the cluster log's faults from a real cluster.log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crimsonbench.plan.fio_jobs import IOPS_LOG_MSEC
from crimsonbench.results.checked_json import ResultFormatError, one_line
from crimsonbench.results.health_log import health_faults
from crimsonbench.results.iops_log import per_second_series
from crimsonbench.results.types import StepResult
from crimsonbench.results.validity import (
    DRIFT,
    FAULT,
    INTERFERENCE,
    JOBS_APART,
    REASON_CODES,
    STEAL,
    SUSPECT,
    UNSTEADY,
    VALID,
    CpuSetLoad,
    Evidence,
    Steadiness,
    judge,
    judged,
    merge_verdicts,
    overlap_share,
    steadiness,
    stored_verdict,
    verdict_cell,
)
from crimsonbench.spec.sweep import ValiditySpec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STEP = FIXTURES / "results" / "gate-1image" / "steps" / "001-randread4k-qd004-r1"
LOG_NAME = "fio_test_0-p0_iops.1.log"
LIMITS = ValiditySpec()


def real_log() -> str:
    return (STEP / LOG_NAME).read_text()


def shifted(text: str, ms: int) -> str:
    """The real log with every timestamp moved by ms: the same job started later."""
    out = []
    for line in text.splitlines():
        t, rest = line.split(",", 1)
        out.append(f"{int(t) + ms},{rest}")
    return "\n".join(out) + "\n"


def codes(e: Evidence, limits: ValiditySpec = LIMITS) -> list[str]:
    return [r.code for r in judge(e, limits).reasons]


# ------------------------------------------------------------------ steadiness


def test_a_real_quiet_step_is_steady() -> None:
    s = steadiness(per_second_series([real_log()]))
    assert s is not None and s.samples >= 4
    assert s.cv < 0.1 and abs(s.drift_pct) < 25, s
    assert codes(Evidence(steadiness=s)) == []


def test_a_flat_series_has_no_variation_and_a_ramp_drifts_by_its_rise() -> None:
    assert steadiness([100.0] * 5) == Steadiness(5, 100.0, 0.0, 0.0)
    ramp = steadiness([50.0, 75.0, 100.0, 125.0, 150.0])  # +100 over 4 s, mean 100
    assert ramp is not None and ramp.drift_pct == pytest.approx(100.0)
    fall = steadiness([150.0, 125.0, 100.0, 75.0, 50.0])
    assert fall is not None and fall.drift_pct == pytest.approx(-100.0)
    assert codes(Evidence(steadiness=fall)) == [UNSTEADY, DRIFT]


def test_a_trend_counts_only_when_it_stands_out_of_the_noise() -> None:
    """The demo's own steps (a cold run, 2026-11-29, machine quiet, no interference): a
    seqread64k qd16 that fell from ~15k to ~8.6k IOPS for its last 3 s, and a seqwrite64k
    qd1 warming up, both real trends; a seqwrite64k qd16 as noisy with no trend."""
    cliff = [13945.0, 14014.0, 15024.0, 15803.0, 15419.0, 15265.0, 14460.0, 10310.0, 8576.0,
             8702.0]  # fmt: skip
    warm = [2265.0, 2997.0, 3588.0, 4069.0, 3907.0, 3810.0, 4581.0, 4012.0, 4087.0]
    noisy = [5855.0, 6789.0, 8228.0, 7302.0, 8108.0, 6695.0, 6450.0, 6771.0, 5576.0, 6384.0]
    got = {name: steadiness(s) for name, s in (("cliff", cliff), ("warm", warm), ("noisy", noisy))}
    ts = {name: g.drift_t for name, g in got.items() if g}
    assert ts["cliff"] <= -3.0 and ts["warm"] >= 3.0 and abs(ts["noisy"]) < 1.0, ts
    assert [codes(Evidence(steadiness=g)) for g in got.values()] == [[DRIFT], [DRIFT], []]
    # the same fall in only 4 seconds: within their noise
    assert codes(Evidence(steadiness=steadiness([1090.0, 1427.0, 1528.0, 551.0]))) == [UNSTEADY]


def test_too_short_a_series_is_not_judged_and_no_io_is_suspect() -> None:
    assert steadiness([1.0, 2.0]) is None
    dead = steadiness([0.0, 0.0, 0.0])
    assert dead is not None
    (reason,) = judge(Evidence(steadiness=dead), LIMITS).reasons
    assert reason.code == UNSTEADY and "no I/O" in reason.detail


def test_half_the_seconds_at_a_third_of_the_rate_is_unsteady() -> None:
    # what a hog pinned to the OSD's CPU for half a step did to a real run (README)
    s = steadiness([18000.0] * 5 + [6000.0] * 5)
    assert s is not None and s.cv == pytest.approx(0.5)
    assert UNSTEADY in codes(Evidence(steadiness=s))


@given(st.lists(st.floats(1.0, 1e6), min_size=3, max_size=60))
def test_steadiness_is_finite_and_scale_free(series: list[float]) -> None:
    a, b = steadiness(series), steadiness([v * 7.0 for v in series])
    assert a is not None and b is not None
    assert a.cv >= 0 and a.cv == pytest.approx(b.cv, rel=1e-6, abs=1e-9)
    assert a.drift_pct == pytest.approx(b.drift_pct, rel=1e-6, abs=1e-6)
    json.dumps(judge(Evidence(steadiness=a), LIMITS).to_json_dict(), allow_nan=False)


# ------------------------------------------------------------------ overlap


def test_jobs_that_ran_together_overlap_fully() -> None:
    text = real_log()
    logs = {LOG_NAME: text, "fio_test_1-p0_iops.2.log": shifted(text, 3)}
    share = overlap_share(logs, IOPS_LOG_MSEC)
    assert share is not None and share > 0.99


def test_a_job_started_late_shortens_the_common_time() -> None:
    text = real_log()
    times = [int(line.split(",")[0]) for line in text.splitlines()]
    span = times[-1] - (times[0] - IOPS_LOG_MSEC)
    logs = {LOG_NAME: text, "fio_test_1-p0_iops.2.log": shifted(text, 1000)}
    share = overlap_share(logs, IOPS_LOG_MSEC)
    assert share == pytest.approx((span - 1000) / (span + 1000))
    reasons = judge(Evidence(overlap=share), LIMITS).reasons
    assert [r.code for r in reasons] == [JOBS_APART]
    assert reasons[0].limit == LIMITS.min_overlap


def test_a_last_window_left_unlogged_is_no_gap_for_a_time_based_job() -> None:
    """Seen on a real 4 s step: one job's log lacked its last window (fio logs a window at
    its end only if it closes before the job does), which read as the jobs 75 % together.
    A time-based job ends runtime after its start, whatever its log shows."""
    text = real_log()
    lines = text.splitlines()
    runtime_ms = len(lines) * IOPS_LOG_MSEC
    short = "\n".join(lines[:-1]) + "\n"
    logs = {LOG_NAME: text, "fio_test_1-p0_iops.2.log": short}
    assert overlap_share(logs, IOPS_LOG_MSEC) == pytest.approx(0.75, abs=0.01)  # the log's end
    assert overlap_share(logs, IOPS_LOG_MSEC, runtime_ms) == pytest.approx(1.0, abs=0.001)
    late = {LOG_NAME: text, "fio_test_1-p0_iops.2.log": shifted(short, 1000)}
    share = overlap_share(late, IOPS_LOG_MSEC, runtime_ms)
    assert share == pytest.approx((runtime_ms - 1000) / (runtime_ms + 1000), abs=0.001)


def test_a_job_that_never_logged_a_second_did_not_run_with_the_rest() -> None:
    logs = {LOG_NAME: real_log(), "fio_test_1-p0_iops.2.log": ""}
    assert overlap_share(logs, IOPS_LOG_MSEC) == 0.0
    assert overlap_share({"fio-client-0.json": "{}"}, IOPS_LOG_MSEC) is None


# ------------------------------------------------------------------ interference


def load(others_s: float, steal_s: float = 0.0, cpus: tuple[int, ...] = (0,)) -> CpuSetLoad:
    return CpuSetLoad("osd.0", cpus, 10.0, others_s, steal_s, ("stress[42] 5.0 s",))


@pytest.mark.parametrize(
    ("others_s", "steal_s", "expected"),
    [
        (0.0, 0.0, []),
        (1.0, 1.0, []),  # exactly at both limits (10 % of 10 s): still valid
        (1.01, 0.0, [INTERFERENCE]),
        (0.0, 1.01, [STEAL]),
        (5.0, 2.0, [INTERFERENCE, STEAL]),
    ],
)
def test_interference_and_steal_against_their_limits(
    others_s: float, steal_s: float, expected: list[str]
) -> None:
    assert codes(Evidence(interference=(load(others_s, steal_s),))) == expected


def test_a_set_of_two_cpus_is_judged_on_its_capacity_and_names_the_others() -> None:
    c = load(3.0, cpus=(2, 3))  # 3 s of 20 s of capacity: 15 %
    assert c.others_pct == pytest.approx(15.0)
    (reason,) = judge(Evidence(interference=(c,)), LIMITS).reasons
    assert "osd.0 (CPU 2,3): 15.0 %" in reason.detail and "stress[42]" in reason.detail


def test_limits_come_from_the_spec() -> None:
    strict = ValiditySpec(max_interference_percent=1.0, min_overlap=1.0)
    e = Evidence(interference=(load(0.2),), overlap=0.999)
    assert codes(e) == [] and codes(e, strict) == [INTERFERENCE, JOBS_APART]


# ------------------------------------------------------------------ verdicts, stored


def real_result() -> StepResult:
    return StepResult.from_json_dict(json.loads((STEP / "result.json").read_text()))


def test_a_real_step_judged_keeps_its_figures_and_gains_a_verdict() -> None:
    before = real_result()
    after = judged(before, {LOG_NAME: real_log()}, LIMITS, faults=("health check OSD_DOWN",))
    assert after.fio == before.fio
    v = stored_verdict(after.extra)
    assert v is not None and v.verdict == SUSPECT and v.codes() == (FAULT,)
    # what a results file holds reads back the same (strict JSON, checked on read)
    again = StepResult.from_json_dict(json.loads(json.dumps(after.to_json_dict(), allow_nan=False)))
    assert stored_verdict(again.extra) == v
    assert verdict_cell(after.extra) == "SUSPECT"
    assert verdict_cell(before.extra) == "n/a"


def test_repeats_averaged_are_suspect_when_any_is() -> None:
    ok = judged(real_result(), {LOG_NAME: real_log()}, LIMITS)
    bad = judged(real_result(), {LOG_NAME: real_log()}, LIMITS, faults=("cluster error: x",))
    merged = merge_verdicts([ok, bad])
    assert merged is not None and merged["verdict"] == SUSPECT
    assert (merged["suspect_repeats"], merged["judged_repeats"]) == (1, 2)
    assert verdict_cell(merged and {"validity": merged}) == "SUSPECT 1/2"
    assert merge_verdicts([real_result()]) is None
    assert (merge_verdicts([ok, ok]) or {})["verdict"] == VALID


@pytest.mark.parametrize(
    ("validity", "named"),
    [
        ("suspect", "extra.validity is a string"),
        ({"verdict": "fine"}, "extra.validity.verdict: 'fine'"),
        ({}, "extra.validity.verdict"),
        ({"verdict": "suspect", "reasons": [{"code": "made_up"}]}, "reasons[0].code"),
        ({"verdict": "suspect", "reasons": [{"code": "fault", "detail": "a\nb"}]}, "detail"),
        ({"verdict": "suspect", "reasons": [{"code": "fault", "value": "9"}]}, "value"),
        ({"verdict": "suspect", "reasons": ["fault"]}, "reasons[0]"),
    ],
)
def test_a_stored_verdict_crimsonbench_would_not_write_is_refused(
    validity: object, named: str
) -> None:
    doc = real_result().to_json_dict()
    doc["extra"]["validity"] = validity
    with pytest.raises(ResultFormatError, match=named.replace("[", r"\[").replace("]", r"\]")):
        StepResult.from_json_dict(doc)


def test_reason_codes_are_a_closed_set_of_label_safe_names() -> None:
    assert len(set(REASON_CODES)) == len(REASON_CODES) == 6
    assert all(c.replace("_", "").isalpha() and c.islower() for c in REASON_CODES)


# ------------------------------------------------------------------ the cluster log


def test_a_quiet_real_cluster_log_has_no_fault() -> None:
    # a real run's cluster.log (make demo): only the checks the method raises itself
    lines = (FIXTURES / "ceph" / "cluster-quiet.log").read_text().splitlines()
    assert any("OSDMAP_FLAGS" in ln for ln in lines)
    assert health_faults(lines) == ()


def test_a_check_raised_is_a_fault_once_per_code_and_a_storm_is_cut() -> None:
    lines = (FIXTURES / "ceph" / "cluster-quiet.log").read_text().splitlines()
    raised = [ln.replace("noscrub flag(s) set (OSDMAP_FLAGS)", f"{i} osds down (OSD_DOWN)")
              for i, ln in enumerate(lines)]  # fmt: skip
    faults = health_faults(raised)
    assert len(faults) == 1 and faults[0].startswith("health check OSD_DOWN: ")
    many = [f"x cluster [WRN] Health check failed: it (CODE_{i})" for i in range(9)]
    assert len(health_faults(many)) == 6 and health_faults(many)[-1].startswith("and 4 more")


def test_hostile_text_from_the_log_or_a_process_name_reads_back() -> None:
    """A cluster log line with a tab and another user's process named with a newline end up
    in a verdict's detail: written on one line, the result file still reads back."""
    lines = ["x cluster [WRN] Health check failed: evil\tcheck [..] (OSD_DOWN)",
             "y cluster [ERR] " + "z" * 10_000_000]  # fmt: skip
    faults = health_faults(lines)
    assert faults[0] == "health check OSD_DOWN: evil?check [..]" and len(faults[1]) < 300
    hog = CpuSetLoad("osd.0", (0,), 10.0, 5.0, 0.0, (one_line("ev\nil[1] 5.0 s"),))
    after = judged(real_result(), {}, LIMITS, interference=(hog,), faults=faults)
    back = StepResult.from_json_dict(json.loads(json.dumps(after.to_json_dict())))
    v = stored_verdict(back.extra)
    assert v is not None and "ev?il[1] 5.0 s" in v.reasons[0].detail


def test_a_hand_edited_suspect_record_line_is_said_as_text_never_trusted() -> None:
    from crimsonbench.results.attempts import SUSPECT_ATTEMPT, dropped_attempt

    for body in ('{"iops": NaN, "bw_mib_s": 1, "reasons": []}',
                 '{"iops": 1, "bw_mib_s": 1, "reasons": ["x"]}', "[1]", "{"):  # fmt: skip
        got = dropped_attempt(SUSPECT_ATTEMPT + body)
        assert got["verdict"] == "dropped" and got["reasons"][0]["code"] == "fault", got
    good = dropped_attempt(
        SUSPECT_ATTEMPT + '{"iops": 5, "bw_mib_s": 1, "reasons": [{"code": "steal"}]}'
    )
    assert good["verdict"] == "suspect" and good["iops"] == 5.0
