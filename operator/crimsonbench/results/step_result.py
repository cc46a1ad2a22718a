"""A step's result from what its fio clients reported, the same way for every executor:
the job count checked against the plan, every client's row and all of them combined, the
start skew and the per-second IOPS from fio's own logs, steady state if asked for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from crimsonbench.errors import ExecutionError
from crimsonbench.plan.fio_jobs import IOPS_LOG_MSEC
from crimsonbench.plan.types import FioJob, Step
from crimsonbench.results.fio_json import JobStats, combine_clients, steady_state_summary
from crimsonbench.results.iops_log import (
    IOPS_PER_SECOND,
    iops_log_job,
    job_start_ms,
    rounded_series,
    start_skew_ms,
)
from crimsonbench.results.types import ResourceSummary, StepResult


def check_job_counts(
    what: str,
    planned: Sequence[FioJob],
    jobs_by_client: Mapping[str, Sequence[JobStats]],
    numjobs: int,
) -> None:
    """Every client must report every job of its job file (numjobs each): a fio that lost
    a job cannot pass as a smaller result. what: "step <id>" or "prefill"."""
    short = []
    for client in sorted({j.client for j in planned} | set(jobs_by_client)):
        expected = sum(j.client == client for j in planned) * numjobs
        got = len(jobs_by_client.get(client, ()))
        if got != expected:
            short.append(f"{client}: {got} of expected={expected}")
    if short:
        raise ExecutionError(
            f"{what}: fio reported the wrong number of jobs ({', '.join(short)}; "
            "job sections x numjobs)"
        )


def step_result(
    step: Step,
    planned: Sequence[FioJob],
    jobs_by_client: Mapping[str, Sequence[JobStats]],
    iops_logs: Mapping[str, str],
    resources: ResourceSummary,
    extra: Mapping[str, Any],
) -> StepResult:
    """iops_logs: file name (<job>_iops.<n>.log[.<server>]) -> text, every job's."""
    total, per_client = combine_clients(jobs_by_client)
    if total.errors:
        raise ExecutionError(f"step {step.id}: fio reported {total.errors} failed jobs")
    steady = steady_state_summary([j for js in jobs_by_client.values() for j in js])
    return StepResult(
        step_id=step.id,
        workload=step.workload,
        iodepth=step.iodepth,
        repeat=step.repeat,
        fio=total,
        resources=resources,
        extra={
            **extra,
            IOPS_PER_SECOND: rounded_series(list(iops_logs.values())),
            **({"steady_state": steady} if steady else {}),
        },
        clients=per_client,
        start_skew_ms=_start_skew(planned, iops_logs),
    )


def _start_skew(planned: Sequence[FioJob], iops_logs: Mapping[str, str]) -> float | None:
    client_of = {j.name: j.client for j in planned}
    starts: dict[str, list[int | None]] = {}
    for name, text in iops_logs.items():
        client = client_of.get(iops_log_job(name) or "")
        if client is not None:
            starts.setdefault(client, []).append(job_start_ms(text, IOPS_LOG_MSEC))
    return start_skew_ms(starts)
