"""What a step (or the prefill) does next on the fio driver: pure decisions from what was
observed (StepView) returning the actions to take, as restore_steps does for the restore.
step_loop.py observes, asks, and carries them out; nothing here reads the API or the
clock, so a step's whole life is tested from views alone (tests/controller/
test_step_decide.py): never started, running, about to end, done, an OSD restarted during
it, an operator restarted mid-step, a fio client lost past its deadline.

The actions, each carried out in order: Poll (then decide again on the answer), Start,
Sample, Store, Prefilled, Retry; an ExecutionError (the step failed: the run restores the
cluster and fails) or a NotReady (nothing more this tick) is raised as it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from crimsonbench.controller.decisions.observed import OsdPod, PodState
from crimsonbench.controller.decisions.rollout import (
    osd_disturbance,
    osd_incarnations,
    osds_at_rest,
)
from crimsonbench.errors import CrimsonBenchError, ExecutionError, NotReady
from crimsonbench.manifests.fio_driver import BARRIER_LOG, OSDS_FILE, REACTOR_LOG, StepReport
from crimsonbench.plan.types import RunPlan, Step
from crimsonbench.results import step_log
from crimsonbench.results.attempts import (
    is_suspect_attempt,
    suspect_attempt,
    with_dropped_attempts,
)
from crimsonbench.results.barrier_log import barrier_summary
from crimsonbench.results.fio_doc import find_json_document
from crimsonbench.results.fio_json import JobStats, parse_fio_json
from crimsonbench.results.node_cpu import load_in_window
from crimsonbench.results.resources import summarize_samples, with_reactor_log
from crimsonbench.results.step_result import check_job_counts, step_result
from crimsonbench.results.types import StepResult
from crimsonbench.results.validity import CpuSetLoad, judged, stored_verdict, time_based_runtime
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
    """Ask the driver for the step's state, waiting in the pod up to wait_s for its end."""

    wait_s: float = 0.0


@dataclass(frozen=True)
class Start:
    """Start the attempt, the OSDs' incarnations recorded with it ({}: none watched)."""

    osds: Mapping[str, str]


@dataclass(frozen=True)
class Sample:
    """One OSD/fio usage sample of the running step (metrics API)."""


@dataclass(frozen=True)
class Store:
    """Keep the step's result, then end the attempt as stored."""

    result: StepResult


@dataclass(frozen=True)
class Prefilled:
    """The prefill is done (its job count checked)."""


@dataclass(frozen=True)
class Retry:
    """Drop the attempt and note why: the step runs again."""

    why: str


# ExecutionError (the step failed) and NotReady (nothing more this tick) are actions too.
Action = Poll | Start | Sample | Store | Prefilled | Retry | ExecutionError | NotReady


# ---------------------------------------------------------------- what was observed


@dataclass(frozen=True)
class OsdView:
    """Rook's OSD pods now, and the OSDs a step watches (every OSD: the pool spans them)."""

    ids: Sequence[int]
    pods: Sequence[OsdPod]


@dataclass(frozen=True)
class StepView:
    plan: RunPlan
    step: Step | None  # None: the prefill
    what: str  # how messages name it: "step 3/12 randread4k-qd016-r1", "prefill"
    report: StepReport | None  # the driver's answer; None: not asked yet
    waited: bool = False  # asked with a wait this tick already
    osds: OsdView | None = None  # Rook, when the report is missing or done; else None
    retries: Sequence[str] = ()  # why earlier attempts of this step were dropped
    servers: Mapping[str, str] | None = None  # client -> "ip:port" of its fio server
    samples: Sequence[StepSample] = ()  # the running step's usage samples so far
    metrics_source: str = "none"
    tick_s: float = 2.0
    # a step done: client -> its fio server's CPU log (None: unreadable); None: not read
    node_cpu: Mapping[str, str | None] | None = None

    @property
    def deadline_s(self) -> int:
        return self.plan.timing.deadline_s if self.step else self.plan.prefill.deadline_s


def next_step_actions(v: StepView) -> list[Action]:
    """The actions for this step now, in order; the last is Poll (ask again with what it
    answers), a Start (whose answer the caller decides on), Store, Prefilled, Retry,
    ExecutionError or NotReady."""
    r = v.report
    if r is None:
        return [Poll()]
    if r.state == "missing":
        if v.osds is None:
            return [Start({})]
        busy = osds_at_rest(v.osds.ids, v.osds.pods)
        if busy is not None:
            return [NotReady(f"{v.what} waits for the OSDs: {busy}")]
        return [Start(osd_incarnations(v.osds.ids, v.osds.pods))]
    if r.state == "running":
        if r.age_s > v.deadline_s + LOST_AFTER_S:
            lost = f"no result {r.age_s:.0f} s after it started (deadline {v.deadline_s} s)"
            return [ExecutionError(f"{v.what}: {lost}; its fio client is gone")]
        sample: list[Action] = [Sample()] if v.step is not None and not v.waited else []
        wait = 0.0 if v.step is None or v.waited else wait_for_end(r, v.plan.timing.fio_s, v.tick_s)
        if wait:
            return [*sample, Poll(wait)]
        return [*sample, NotReady(f"{v.what} running ({r.age_s:.0f} s)")]
    return _finished(v, r)


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
        failure = _unparsable(r.output)
    disturbed = _disturbance(v, sections)
    if disturbed:
        why = disturbed + (f"; the step failed: {v.what}: {failure}" if failure else "")
        faults = [w for w in v.retries if not is_suspect_attempt(w)]
        if len(faults) >= MAX_STEP_RETRIES:
            return [ExecutionError(f"{v.what} failed {len(faults) + 1} times; last: {why}")]
        return [Retry(why[:1000])]
    if failure:
        return [ExecutionError(f"{v.what}: {failure}")]
    try:
        jobs = _fio_jobs(sections, v.servers or {})
        if v.step is None:
            check_job_counts(PREFILL, v.plan.prefill.jobs, jobs, 1)
            return [Prefilled()]
        result = _result(v, v.step, r, sections, jobs)
    except CrimsonBenchError as exc:
        return [exc if isinstance(exc, ExecutionError) else ExecutionError(str(exc))]
    # sweep.rerunSuspect: a suspect attempt is dropped, what it measured kept in the
    # record, until a valid one or the reruns allowed (the last attempt is stored)
    suspect = stored_verdict(result.extra)
    reruns = sum(is_suspect_attempt(w) for w in v.retries)
    if suspect is not None and suspect.suspect and reruns < v.plan.sweep.rerun_suspect:
        return [Retry(suspect_attempt(result))]
    return [Store(result)]


def _unparsable(output: str) -> str:
    try:
        step_log.parse_sections(output)
    except CrimsonBenchError as exc:
        return str(exc)
    return "no output"


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
    loads, notes = client_loads(v, r)
    result = judged(result, logs, plan.sweep.validity, runtime_s=time_based_runtime(plan),
                    interference=loads, unjudged=(OSD_NODES_NOT_SAMPLED, *notes))  # fmt: skip
    return with_dropped_attempts(result, v.retries)


OSD_NODES_NOT_SAMPLED = (
    "interference and steal on the OSD nodes: not measured by the operator (no sampler "
    "runs beside Rook's OSDs; local mode measures them); the client nodes' are"
)


def client_loads(v: StepView, r: StepReport) -> tuple[tuple[CpuSetLoad, ...] | None, list[str]]:
    """What else ran on each client node's planned CPUs while the step was measured (its
    last `runtime` seconds before the driver saw fio end, when time-based), from the fio
    servers' CPU logs; and why, where it cannot be said. The node's clock is taken as the
    driver's (a cluster's nodes keep time together)."""
    if v.node_cpu is None:
        return None, ["interference on the client nodes: their CPU logs were not read"]
    runtime = time_based_runtime(v.plan)
    start = r.ended - runtime if runtime else r.started
    loads, notes = [], []
    for c in v.plan.clients:
        text = v.node_cpu.get(c.name)
        if text is None:
            notes.append(f"client {c.name}: its fio server's CPU log could not be read")
            continue
        got = load_in_window(f"client {c.name}", c.cpus, text, start, r.ended)
        if isinstance(got, str):
            notes.append(got)
        else:
            loads.append(got)
    return (tuple(loads) if loads else None), notes


def failure_text(sections: Mapping[str, str], output: str) -> str:
    """What a failed step said: fio's own messages when it printed some (a fio client's
    JSON says nothing about why), else the output's tail."""
    said = sections.get(step_log.FIO_MESSAGES, "").strip()
    doc = find_json_document(sections.get(step_log.FIO_OUTPUT, "")) or {}
    errors = [
        f"{j.get('jobname')} on {j.get('hostname')}: error {j.get('error')}"
        for j in doc.get("client_stats", doc.get("jobs", []))
        if j.get("error")
    ]
    if said or errors:
        return "fio said: " + "; ".join(errors) + (f"\n{said[-1500:]}" if said else "")
    return f"output tail:\n{output[-1500:] or '(empty)'}"


def _fio_jobs(sections: Mapping[str, str], servers: Mapping[str, str]) -> dict[str, list[JobStats]]:
    """fio's jobs per client, by the server (host:port) that ran each."""
    by_addr = {addr: client for client, addr in servers.items()}
    out: dict[str, list[JobStats]] = {}
    for job in parse_fio_json(step_log.fio_output(sections)):
        client = by_addr.get(job.host)
        if client is None:
            raise ExecutionError(f"fio reported a job from unknown server {job.host}")
        out.setdefault(client, []).append(job)
    return out


# ---------------------------------------------------------------- the fio servers


def server_addresses(
    plan: RunPlan, pods: Mapping[str, PodState], port: int
) -> dict[str, str] | NotReady | ExecutionError:
    """client -> "ip:port" once every client's fio server is Ready on its node; else what
    is being waited for (NotReady). A server that ended (failed, evicted) or runs on
    another node fails the run (ExecutionError)."""
    waiting = []
    out: dict[str, str] = {}
    for client in plan.clients:
        pod = pods.get(client.name, PodState("Missing"))
        if pod.phase in ("Failed", "Succeeded"):
            return ExecutionError(
                f"the fio server of {client.name} ended ({pod.phase}: {pod.reason or '?'})"
            )
        if pod.node is not None and pod.node != client.node:
            return ExecutionError(f"fio server of {client.name} runs on {pod.node}")
        if not pod.ready or pod.ip is None:
            waiting.append(f"{client.name} ({pod.phase})")
            continue
        out[client.name] = f"{pod.ip}:{port}"
    if waiting:
        return NotReady("waiting for fio servers: " + ", ".join(waiting))
    return out
