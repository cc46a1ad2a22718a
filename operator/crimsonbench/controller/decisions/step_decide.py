"""What a step (or the prefill) does next on the fio driver: pure decisions from what was
observed (StepView) returning the actions to take, as restore_steps does for the restore.
step_loop.py observes, asks, and carries them out; nothing here reads the API or the
clock, so a step's whole life is tested from views alone (tests/controller/
test_step_decide.py): never started, running, about to end, done, an OSD restarted during
it, an operator restarted mid-step, a fio client lost past its deadline.

The actions, each carried out in order: Poll, ReadOsds, ReadCpuLogs (then decide again on
what they read), Start, Sample, Store, Prefilled, Retry; an ExecutionError (the step
failed: the run restores the cluster and fails) or a NotReady (nothing more this tick) is
raised as it is. What an action sends is rendered here (step_requests.py): what to read
and when is decided here too, so the loop only reads, sends and writes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from crimsonbench.controller.decisions.observed import OsdPod
from crimsonbench.controller.decisions.rollout import (
    osd_disturbance,
    osd_incarnations,
    osds_at_rest,
)
from crimsonbench.controller.decisions.step_output import (
    OSD_NODES_NOT_SAMPLED,
    client_loads,
    failure_text,
    fio_jobs,
    unparsable,
)
from crimsonbench.controller.decisions.step_requests import (
    cpu_log_jobs,
    cpu_log_lines,
    fio_server_selector,
    osd_selector,
    start_request,
)
from crimsonbench.errors import CrimsonBenchError, ExecutionError, NotReady
from crimsonbench.manifests.fio_driver import (
    BARRIER_LOG,
    OSDS_FILE,
    REACTOR_LOG,
    StartRequest,
    StepReport,
    end_command,
    poll_command,
)
from crimsonbench.plan.types import BarrierAddress, RunPlan, Step
from crimsonbench.results import step_log
from crimsonbench.results.attempts import (
    dropped_attempt,
    is_suspect_attempt,
    suspect_attempt,
    with_dropped_attempts,
)
from crimsonbench.results.barrier_log import barrier_summary
from crimsonbench.results.fio_json import JobStats
from crimsonbench.results.resources import summarize_samples, with_reactor_log
from crimsonbench.results.step_result import check_job_counts, step_result
from crimsonbench.results.types import StepResult
from crimsonbench.results.validity import judged, stored_verdict, time_based_runtime
from crimsonbench.spec.status import StepSample

MAX_STEP_RETRIES = 2
# A step the driver still calls running this long past its deadline lost its fio client
# (the driver's container restarted): it can only be failed.
LOST_AFTER_S = 60
WAIT_MARGIN_S = 10.0  # fio's end: jobs stop, servers send their results, the JSON is written
PREFILL = "prefill"  # the prefill's key on the driver (step keys never are)


# ---------------------------------------------------------------- actions


@dataclass(frozen=True)
class Poll:
    """Ask the driver for the step's state (argv), waiting in the pod up to wait_s for its
    end (whole seconds: the driver's `wait`)."""

    argv: tuple[str, ...]
    wait_s: int = 0


@dataclass(frozen=True)
class ReadOsds:
    """List Rook's OSD pods: before a start (at rest?) and once it ended (disturbed?)."""


@dataclass(frozen=True)
class ReadCpuLogs:
    """The newest `lines` of each client's CPU log (client -> its fio server's Job)."""

    jobs: Mapping[str, str]
    lines: int


@dataclass(frozen=True)
class Start:
    """Start the attempt, the OSDs' incarnations recorded with it ({}: none watched)."""

    osds: Mapping[str, str]
    request: StartRequest


@dataclass(frozen=True)
class Sample:
    """One OSD/fio usage sample of the running step (metrics API): the pods of these
    selectors (osds None: no OSD pods to sample)."""

    servers: str
    osds: str | None


@dataclass(frozen=True)
class Store:
    """Keep the step's result, then end the attempt as stored (`end`: the driver's)."""

    result: StepResult
    end: tuple[str, ...]


@dataclass(frozen=True)
class Prefilled:
    """The prefill is done (its job count checked): end it as stored."""

    end: tuple[str, ...]


@dataclass(frozen=True)
class Retry:
    """Drop the attempt (`end`) and note why: the step runs again. The StepRetried
    condition's reason and message, and the NotReady the tick ends with, say so."""

    why: str
    end: tuple[str, ...]
    cause: str  # OsdRestarted or Suspect
    message: str


# ExecutionError (the step failed) and NotReady (nothing more this tick) are actions too.
Action = (
    Poll | ReadOsds | ReadCpuLogs | Start | Sample | Store | Prefilled | Retry
    | ExecutionError | NotReady
)  # fmt: skip


# ---------------------------------------------------------------- what was observed


@dataclass(frozen=True)
class OsdView:
    """Rook's OSD pods now, and the OSDs a step watches (every OSD: the pool spans them)."""

    ids: Sequence[int]
    pods: Sequence[OsdPod]

    @classmethod
    def of(cls, pods: Sequence[OsdPod], placed: Sequence[int]) -> OsdView:
        """Every OSD with a pod and every one the run placed (a placed OSD without a pod
        is one the step must see come back)."""
        return cls(sorted({p.osd_id for p in pods} | set(placed)), pods)


@dataclass(frozen=True)
class StepView:
    plan: RunPlan
    step: Step | None  # None: the prefill
    what: str  # how messages name it: "step 3/12 randread4k-qd016-r1", "prefill"
    report: StepReport | None  # the driver's answer; None: not asked yet
    waited: bool = False  # asked with a wait this tick already
    osds: OsdView | None = None  # read since the last answer (ReadOsds); else None
    retries: Sequence[str] = ()  # why earlier attempts of this step were dropped
    servers: Mapping[str, str] | None = None  # client -> "ip:port" of its fio server
    samples: Sequence[StepSample] = ()  # the running step's usage samples so far
    metrics_source: str = "none"
    tick_s: float = 2.0
    # a step done: client -> its fio server's CPU log (None: unreadable); None: not read
    node_cpu: Mapping[str, str | None] | None = None
    # what can be read here, and what a start sends
    watch_osds: bool = False  # Rook: its OSD pods are listed (ReadOsds) and watched
    placed: Sequence[int] = ()  # the OSDs the run placed (each must have a pod)
    cpu_logs: bool = False  # the fio servers' CPU logs are read (ReadCpuLogs)
    child: str = ""  # the run's child name: its fio servers' Jobs and labels
    # where a step's clients meet (the driver pod's IP, None: no address yet; the port),
    # with a token of this attempt's own (manifests/start_barrier.py)
    barrier: tuple[str | None, int] = (None, 0)
    token: str = ""

    @property
    def deadline_s(self) -> int:
        return self.plan.timing.deadline_s if self.step else self.plan.prefill.deadline_s

    @property
    def key(self) -> str:
        """The step's key on the driver (what it measures) or the prefill's."""
        return self.step.id if self.step is not None else PREFILL


def next_step_actions(v: StepView) -> list[Action]:
    """The actions for this step now, in order; the last is Poll (ask again with what it
    answers), a Start (whose answer the caller decides on), Store, Prefilled, Retry,
    ExecutionError or NotReady."""
    r = v.report
    if r is None:
        return [poll(v.key)]
    if r.state != "running" and v.step is not None:
        if r.state == "done" and v.cpu_logs and v.node_cpu is None:
            return [ReadCpuLogs(cpu_log_jobs(v.plan, v.child), cpu_log_lines(v.deadline_s))]
        if v.watch_osds and v.osds is None:
            return [ReadOsds()]
    if r.state == "missing":
        return _start(v)
    if r.state == "running":
        if r.age_s > v.deadline_s + LOST_AFTER_S:
            lost = f"no result {r.age_s:.0f} s after it started (deadline {v.deadline_s} s)"
            return [ExecutionError(f"{v.what}: {lost}; its fio client is gone")]
        sample: list[Action] = [_sample(v)] if v.step is not None and not v.waited else []
        wait = 0.0 if v.step is None or v.waited else wait_for_end(r, v.plan.timing.fio_s, v.tick_s)
        if wait:
            return [*sample, poll(v.key, wait)]
        return [*sample, NotReady(f"{v.what} running ({r.age_s:.0f} s)")]
    return _finished(v, r)


def poll(key: str, wait_s: float = 0.0) -> Poll:
    """Ask for the step's state, waiting up to wait_s (rounded up to whole seconds)."""
    wait = max(0, int(wait_s + 0.999))
    return Poll(tuple(poll_command(key, wait_s=wait)), wait)


def _start(v: StepView) -> list[Action]:
    osds: Mapping[str, str] = {}
    if v.osds is not None and v.step is not None:
        busy = osds_at_rest(v.osds.ids, v.osds.pods)
        if busy is not None:
            return [NotReady(f"{v.what} waits for the OSDs: {busy}")]
        osds = osd_incarnations(v.osds.ids, v.osds.pods)
    meet = None
    if v.step is not None and v.plan.timing.barrier_jobs:
        ip, port = v.barrier
        if not (ip and v.token):
            return [NotReady(f"{v.what} waits for the fio driver pod's address (its clients "
                             "meet there to start together)")]  # fmt: skip
        meet = BarrierAddress(ip, port, v.token)
    request = start_request(v.plan, v.step, v.key, v.deadline_s, v.servers or {}, osds, meet)
    return [Start(osds, request)]


def _sample(v: StepView) -> Sample:
    return Sample(fio_server_selector(v.child), osd_selector(v.plan) if v.watch_osds else None)


def wait_for_end(report: StepReport, expected_s: float, tick_s: float) -> float:
    """How long this tick should wait in the fio driver for a running step: until its
    expected end (started + ramp + runtime) when that comes before the next tick, plus a
    margin for fio's end; else 0 (the next tick polls again). Waiting in the pod, the
    operator sees the end within 0.1 s instead of up to a tick later."""
    if report.state != "running" or not report.started:
        return 0.0
    remaining = report.started + expected_s - report.now
    if remaining > tick_s:
        return 0.0
    return max(0.0, remaining) + WAIT_MARGIN_S


def _finished(v: StepView, r: StepReport) -> list[Action]:
    sections = step_log.parse_sections_or_empty(r.output)
    failure = None
    if r.rc != 0:
        failure = f"fio exited {r.rc}; {failure_text(sections, r.output)}"
    elif not sections:
        failure = unparsable(r.output)
    disturbed = _disturbance(v, sections)
    if disturbed:
        why = disturbed + (f"; the step failed: {v.what}: {failure}" if failure else "")
        faults = [w for w in v.retries if not is_suspect_attempt(w)]
        if len(faults) >= MAX_STEP_RETRIES:
            return [ExecutionError(f"{v.what} failed {len(faults) + 1} times; last: {why}")]
        return [retry(v, why[:1000])]
    if failure:
        return [ExecutionError(f"{v.what}: {failure}")]
    try:
        jobs = fio_jobs(sections, v.servers or {})
        if v.step is None:
            check_job_counts(PREFILL, v.plan.prefill.jobs, jobs, 1)
            return [Prefilled(_end(v, stored=True))]
        result = _result(v, v.step, r, sections, jobs)
    except CrimsonBenchError as exc:
        return [exc if isinstance(exc, ExecutionError) else ExecutionError(str(exc))]
    # sweep.rerunSuspect: a suspect attempt is dropped, what it measured kept in the
    # record, until a valid one or the reruns allowed (the last attempt is stored)
    suspect = stored_verdict(result.extra)
    reruns = sum(is_suspect_attempt(w) for w in v.retries)
    if suspect is not None and suspect.suspect and reruns < v.plan.sweep.rerun_suspect:
        return [retry(v, suspect_attempt(result))]
    return [Store(result, _end(v, stored=True))]


def _end(v: StepView, *, stored: bool) -> tuple[str, ...]:
    return tuple(end_command(v.key, stored=stored))


def retry(v: StepView, why: str) -> Retry:
    """The attempt dropped for `why` (an OSD restarted, or a suspect attempt's record
    line), counted against what the step may take of its kind."""
    if is_suspect_attempt(why):
        allowed, cause = v.plan.sweep.rerun_suspect, "Suspect"
        codes = {str(r.get("code", "")) for r in dropped_attempt(why)["reasons"]}
        said = f"suspect ({', '.join(sorted(codes))}; sweep.rerunSuspect)"
    else:
        allowed, cause, said = MAX_STEP_RETRIES, "OsdRestarted", why
    tries = sum(is_suspect_attempt(w) == (cause == "Suspect") for w in (*v.retries, why))
    message = f"{v.what} runs again ({tries}/{allowed}): {said}"
    return Retry(why, _end(v, stored=False), cause, message)


def _disturbance(v: StepView, sections: Mapping[str, str]) -> str:
    """'' unless an OSD recorded at the step's start restarted or is down now."""
    recorded = sections.get(OSDS_FILE, "").strip()
    if v.step is None or v.osds is None or not recorded:
        return ""
    return osd_disturbance(json.loads(recorded), v.osds.pods)


def _result(
    v: StepView, step: Step, r: StepReport, sections: Mapping[str, str],
    jobs: Mapping[str, list[JobStats]],
) -> StepResult:  # fmt: skip
    plan = v.plan
    check_job_counts(f"step {step.id}", plan.fio.jobs, jobs, plan.fio_numjobs)
    resources = summarize_samples(v.samples)
    # wall time: the fio client's start -> end in the driver, as local mode's of a step
    extra: dict[str, object] = {"metrics_source": v.metrics_source,
                                "wall_seconds": round(r.wall_s, 3)}  # fmt: skip
    if REACTOR_LOG in sections:
        resources, problem = with_reactor_log(resources, sections[REACTOR_LOG])
        if problem:
            extra["reactor_utilization_error"] = problem
    barrier = barrier_summary(sections.get(BARRIER_LOG, ""))
    if barrier is not None:
        extra["start_barrier"] = barrier
    logs = step_log.iops_logs(sections)
    result = step_result(step, plan.fio.jobs, jobs, logs, resources, extra)
    # An OSD restarted during the step is a retry above (_disturbance), not a verdict.
    loads, notes = client_loads(plan, v.node_cpu, r)
    result = judged(result, logs, plan.sweep.validity, runtime_s=time_based_runtime(plan),
                    interference=loads, unjudged=(OSD_NODES_NOT_SAMPLED, *notes))  # fmt: skip
    return with_dropped_attempts(result, v.retries)
