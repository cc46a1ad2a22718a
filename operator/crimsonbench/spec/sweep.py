"""The sweep: iodepths, timing, repeats, and the rules that shorten it."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from crimsonbench.spec.base import STEP_JOBS_NOTE, RuledModel, SpecModel
from crimsonbench.spec.rules import Rule

DEFAULT_IODEPTHS = (1, 2, 4, 8, 16, 24, 32, 40, 52, 64)
RECORDED_PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)  # what every step records
MAX_LATENCY_MS = 3_600_000.0  # an hour: any latency limit above it is a typo


class EarlyExit(SpecModel):
    # Off by default: the published comparisons show the whole curve, and their rows often
    # pass stddev/mean 0.5 long before iodepth 64.
    enabled: bool = Field(
        default=False, description="Stop a workload's sweep when it saturates (off = full curve)."
    )
    clat_cv_limit: float = Field(
        default=0.5, gt=0, le=100, description="Stop when clat stddev/mean reaches this."
    )
    mean_latency_ms_limit: float | None = Field(
        default=None,
        gt=0,
        le=MAX_LATENCY_MS,
        description="Stop when mean clat (ms) exceeds this (at most an hour).",
    )


class LatencyTarget(SpecModel):
    percentile: float = Field(
        default=99.0,
        json_schema_extra={"enum": list(RECORDED_PERCENTILES)},
        description="fio clat percentile (the ones every step records).",
    )
    latency_ms: float = Field(
        gt=0,
        le=MAX_LATENCY_MS,
        description="The latency that percentile must stay under (ms, at most an hour).",
    )
    stop_when_exceeded: bool = Field(default=True, description="End the sweep once it is missed.")

    @field_validator("percentile")
    @classmethod
    def _recorded(cls, v: float) -> float:
        if v not in RECORDED_PERCENTILES:
            raise ValueError(f"{v:g} is not recorded; use one of 50, 90, 99, 99.9 or 99.99")
        return v


class KneeSearch(SpecModel):
    """Run only the iodepths needed to find the knee: the most throughput whose latency
    stays under latencyMs (bisecting the iodepth list, stopping past saturation)."""

    latency_ms: float = Field(
        gt=0, le=MAX_LATENCY_MS, description="The latency limit of the knee (ms, at most an hour)."
    )
    metric: Literal["mean", "p50", "p90", "p99", "p99.9", "p99.99"] = Field(
        default="p99", description="Which completion latency the limit is on."
    )
    min_gain_pct: float = Field(
        default=5.0,
        ge=0,
        le=100,
        description="Saturated when a deeper queue adds no more than this % throughput "
        "while latency rises (0: only the limit bounds the search).",
    )


class SteadyStateSpec(SpecModel):
    """fio's steady-state detection: a step ends once `criterion` stays within `limit`
    over durationSeconds (after rampSeconds); runtimeSeconds becomes an upper bound."""

    criterion: Literal["iops", "iops_slope", "bw", "bw_slope", "lat", "lat_slope"] = Field(
        default="iops_slope", description="fio's steadystate criterion."
    )
    limit: float = Field(default=0.5, gt=0, le=1e9, description="fio's steadystate limit.")
    percent: bool = Field(default=True, description="limit is a % of the window's mean.")
    duration_seconds: int = Field(default=30, ge=2, le=86400, description="fio's ss_dur.")
    ramp_seconds: int = Field(default=10, ge=0, le=86400, description="fio's ss_ramp.")


class ValiditySpec(SpecModel):
    """When a step's figure is suspect (results.validity): each limit is checked on every
    step, and a step past any of them is marked suspect with the figures behind it."""

    max_interference_percent: float = Field(
        default=10.0,
        ge=0,
        le=100,
        description="CPU time taken on a planned CPU set by processes not of the run, in % "
        "of that set's capacity over the step (local mode: every OSD's and client's set).",
    )
    max_steal_percent: float = Field(
        default=10.0,
        ge=0,
        le=100,
        description="Hypervisor steal on a planned CPU set, in % of its capacity.",
    )
    max_iops_cv: float = Field(
        default=0.25,
        ge=0,
        le=100,
        description="Coefficient of variation of the step's per-second IOPS (fio's logs).",
    )
    max_drift_percent: float = Field(
        default=25.0,
        ge=0,
        le=10000,
        description="How far the per-second IOPS trend (least squares) moves over the step, "
        "in % of the mean: a warm-up still running or a write cliff.",
    )
    min_overlap: float = Field(
        default=0.9,
        ge=0,
        le=1,
        description="Share of the step during which every fio job ran (fio's IOPS logs).",
    )


SWEEP_RULES = (
    Rule(
        cel="!has(self.kneeSearch) || !has(self.earlyExit) || !has(self.earlyExit.enabled) "
        "|| !self.earlyExit.enabled",
        message="kneeSearch picks the iodepths itself; turn earlyExit off (or drop kneeSearch)",
        field="kneeSearch",
        check=lambda s: s.knee_search is None or not s.early_exit.enabled,
    ),
    Rule(
        cel="!has(self.steadyState) || self.steadyState.rampSeconds + "
        "self.steadyState.durationSeconds <= self.runtimeSeconds",
        message="steadyState.rampSeconds + durationSeconds must fit in runtimeSeconds, or "
        "steady state could never be reached",
        field="steadyState",
        check=lambda s: (
            s.steady_state is None
            or s.steady_state.ramp_seconds + s.steady_state.duration_seconds <= s.runtime_seconds
        ),
    ),
)


class SweepSpec(RuledModel):
    RULES = SWEEP_RULES

    iodepths: list[Annotated[int, Field(ge=1, le=4096)]] = Field(
        default_factory=lambda: list(DEFAULT_IODEPTHS),
        min_length=1,
        max_length=64,
        json_schema_extra={"x-kubernetes-list-type": "set", "default": list(DEFAULT_IODEPTHS)},
        description="The iodepth per step, in order (the response curve)" + STEP_JOBS_NOTE,
    )
    runtime_seconds: int = Field(default=300, ge=1, le=86400)
    ramp_seconds: int = Field(default=10, ge=0, le=3600)
    repeats: int = Field(
        default=1,
        ge=1,
        le=20,
        description="Run each step this many times" + STEP_JOBS_NOTE,
    )
    sample_interval_seconds: float = Field(default=1.0, ge=0.1, le=60)
    early_exit: EarlyExit = Field(default_factory=EarlyExit, json_schema_extra={"default": {}})
    latency_target: LatencyTarget | None = Field(
        default=None, description="Find the most IOPS meeting a percentile latency."
    )
    knee_search: KneeSearch | None = Field(
        default=None, description="Run only the iodepths that find the knee (fewer steps)."
    )
    steady_state: SteadyStateSpec | None = Field(
        default=None, description="End each step once fio sees steady state."
    )
    validity: ValiditySpec = Field(
        default_factory=ValiditySpec,
        json_schema_extra={"default": {}},
        description="The limits past which a step's figure is marked suspect.",
    )
    rerun_suspect: int = Field(
        default=0,
        ge=0,
        le=5,
        description="Run a suspect step again up to this many times and keep the first "
        "valid attempt (every attempt is recorded).",
    )

    @field_validator("iodepths")
    @classmethod
    def _unique(cls, v: list[int]) -> list[int]:
        dupes = sorted({x for x in v if v.count(x) > 1})
        if dupes:
            raise ValueError(f"iodepths repeats {dupes}; list each iodepth once")
        return v
