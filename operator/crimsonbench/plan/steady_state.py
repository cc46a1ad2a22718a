"""fio's steady-state detection for a step (sweep.steadyState): fio ends a job once the
criterion stays under the limit over a rolling window (sampled once per second), after a
ramp; the step's runtime becomes an upper bound. *_slope: least-squares slope of the
window; iops/bw/lat: every sample within the limit of the window's mean; percent: the
limit in % of that mean. fio applies it per job, so the jobs of a step may stop at
different times (the step waits for all of them)."""

from __future__ import annotations

from crimsonbench.spec.models import SteadyStateSpec


def steady_state_options(ss: SteadyStateSpec, runtime_s: int) -> dict[str, str]:
    """Job-file options (to add to [global] with time_based=1 and runtime=runtime_s)."""
    if ss.ramp_seconds + ss.duration_seconds > runtime_s:
        raise ValueError(
            f"ss_ramp {ss.ramp_seconds} s + ss_dur {ss.duration_seconds} s exceed the runtime "
            f"{runtime_s} s: steady state could never be attained"
        )
    return {
        "steadystate": f"{ss.criterion}:{ss.limit:g}{'%' if ss.percent else ''}",
        "ss_dur": f"{ss.duration_seconds}s",
        "ss_ramp": f"{ss.ramp_seconds}s",
    }
