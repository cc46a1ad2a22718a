"""The prefill and the sweep on the fio driver: observe a step, ask step_decide what to do,
carry it out, until the tick must wait (NotReady) or the sweep is over. A step that ends
within this tick is stored and the next one starts in the same tick.

What is observed for a view: the driver's answer for the step (poll), and on Rook, when
that answer is missing or done, the OSD pods. The fio driver keys a step by what it
measures (Step.id)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import replace
from typing import NoReturn

from crimsonbench.controller import driver as fio_driver_exec
from crimsonbench.controller.carry_out import Again, Finished, carry_out
from crimsonbench.controller.decisions.observed import PodState
from crimsonbench.controller.decisions.step_decide import (
    MAX_STEP_RETRIES,
    PREFILL,
    Action,
    OsdView,
    Poll,
    Prefilled,
    Retry,
    Sample,
    Start,
    StepView,
    Store,
    next_step_actions,
)
from crimsonbench.controller.fio_setup import fio_access, jobs_namespace
from crimsonbench.controller.run_context import RunContext
from crimsonbench.controller.sampling import client_cpu_logs, sample_step
from crimsonbench.controller.stored_results import load_results, store_results
from crimsonbench.errors import ExecutionError, NotReady
from crimsonbench.manifests import fio, fio_driver
from crimsonbench.manifests.fio_driver import StartRequest, StepReport
from crimsonbench.plan.types import BarrierAddress, RunPlan
from crimsonbench.results.attempts import dropped_attempt, is_suspect_attempt
from crimsonbench.results.sweep_state import SweepState

_MISSING = StepReport("missing", now=0.0)  # a key the driver cannot hold (just stored)
# Decisions in one step's tick: a few polls and a start; more means the driver's answers
# contradict each other (a start says the step exists, a poll that it does not).
_MOST_DECISIONS = 20
Done = Store | Prefilled  # how a step's (or the prefill's) decisions end


def run_prefill(ctx: RunContext, plan: RunPlan, servers: dict[str, str], driver: PodState) -> None:
    status = ctx.record.status
    if status.prefilled or not plan.prefill.jobs:
        status.prefilled = True
        return
    view = StepView(plan, None, PREFILL, None, servers=servers, tick_s=ctx.settings.tick_seconds)
    _carry_out(ctx, view, PREFILL, driver)
    status.prefilled = True


def run_steps(ctx: RunContext, plan: RunPlan, servers: dict[str, str], driver: PodState) -> None:
    """The sweep: NotReady while steps remain; returns once the sweep is over."""
    results = load_results(ctx)  # resume: what is stored is done, whatever status says
    state = SweepState(plan.sweep, results.values(), plan.bandwidth_workloads)
    status, book = ctx.record.status, ctx.record.book
    report: StepReport | None = None
    while (step := state.next_step(plan.steps)) is not None:
        status.current_step = step.id
        view = StepView(
            plan, step, f"step {step.index + 1}/{len(plan.steps)} {step.id}", report,
            retries=tuple(book.step_retries.get(step.id, ())), servers=servers,
            samples=tuple(status.step_samples),
            metrics_source=status.metrics_source or "none", tick_s=ctx.settings.tick_seconds,
        )  # fmt: skip
        done = _carry_out(ctx, view, step.id, driver)
        if not isinstance(done, Store):  # step_decide ends a step's view stored, always
            raise ExecutionError(f"{view.what}: ended as a prefill (a bug: say so)")
        stored = done.result
        results[step.id] = stored
        store_results(ctx, plan, results)  # stored before its directory goes: never run twice
        fio_driver_exec.end(ctx, jobs_namespace(ctx), driver.name, step.id,
                            stored=True)  # fmt: skip
        status.step_samples = []  # the next step starts its own samples
        if stored.extra.get("reactor_utilization_error"):
            ctx.logger.warning("%s: reactor utilization: %s", view.what,
                               stored.extra["reactor_utilization_error"])  # fmt: skip
        note = state.record(step, stored)
        if note:
            ctx.logger.info("%s", note)
        report = _MISSING  # the next step is new: start it at once
    status.current_step = ""


def _observed(ctx: RunContext, view: StepView, report: StepReport) -> StepView:
    """The view with the driver's answer, and Rook's OSD pods when a decision reads them;
    a step done: the client nodes' CPU logs over it, for its verdict."""
    if view.step is not None and report.state == "done" and view.node_cpu is None:
        seconds = view.deadline_s + 30  # a line a second: the whole step and then some
        logs = client_cpu_logs(ctx, fio_access(ctx).namespace, view.plan, seconds)
        view = replace(view, node_cpu=logs)
    rook_ns = ctx.target.rook_namespace
    if view.step is None or rook_ns is None or report.state == "running":
        return replace(view, report=report, osds=None)
    pods = ctx.kube.list_osd_pods(rook_ns)
    ids = sorted({p.osd_id for p in pods} | set(ctx.record.placement))
    return replace(view, report=report, osds=OsdView(ids, pods))


def _carry_out(ctx: RunContext, view: StepView, key: str, driver: PodState) -> Store | Prefilled:
    """Carry out the decisions for one step until it is stored (or the prefill done);
    NotReady when the tick must wait, ExecutionError when the step failed."""
    ns, pod = jobs_namespace(ctx), driver.name
    if view.report is not None:
        view = _observed(ctx, view, view.report)

    def act(action: Action, view: StepView) -> StepView | Again[StepView] | Finished[Done]:
        match action:
            case Poll(wait_s=wait):
                report = fio_driver_exec.poll(ctx, ns, pod, key, wait_s=wait)
                return Again(replace(_observed(ctx, view, report), waited=view.waited or wait > 0))
            case Start(osds=osds):
                if fio_driver_exec.start(ctx, ns, pod, _start_request(ctx, view, key, osds,
                                                                      driver)):  # fmt: skip
                    raise NotReady(f"{view.what} started")
                return Again(replace(view, report=None))  # started by an earlier operator
            case Sample():
                sample_step(ctx, fio_access(ctx).namespace, view.plan)
                status = ctx.record.status
                return replace(view, samples=tuple(status.step_samples),
                               metrics_source=status.metrics_source or "none")  # fmt: skip
            case Prefilled():
                fio_driver_exec.end(ctx, ns, pod, key, stored=True)
                return Finished(action)
            case Store():
                return Finished(action)
            case Retry(why=why):
                _retry(ctx, view, key, pod, why)  # raises NotReady: the step runs again
            case ExecutionError() | NotReady():
                raise action
        raise ExecutionError(f"{view.what}: an action the step loop does not know: {action!r}")

    what = f"{view.what}: the fio driver's answers contradict each other; again"
    return carry_out(next_step_actions, act, view, most=_MOST_DECISIONS, contradiction=what)


def _retry(ctx: RunContext, view: StepView, key: str, pod: str, why: str) -> NoReturn:
    """Drop the attempt (its result is not stored) and note why; the step runs again once
    every OSD is back (NotReady)."""
    step_id = view.step.id if view.step is not None else PREFILL  # the prefill never retries
    retries = ctx.record.book.step_retries
    reasons = [*retries.get(step_id, []), why]
    ctx.record.book.step_retries = {**retries, step_id: reasons}
    fio_driver_exec.end(ctx, jobs_namespace(ctx), pod, key, stored=False)
    ctx.record.status.step_samples = []
    if is_suspect_attempt(why):
        allowed, cause = view.plan.sweep.rerun_suspect, "Suspect"
        said = f"suspect ({', '.join(sorted(_codes(why)))}; sweep.rerunSuspect)"
    else:
        allowed, cause, said = MAX_STEP_RETRIES, "OsdRestarted", why
    tries = sum(is_suspect_attempt(w) == (cause == "Suspect") for w in reasons)
    message = f"{view.what} runs again ({tries}/{allowed}): {said}"
    ctx.record.condition("StepRetried", True, cause, message)
    ctx.logger.warning("%s", message)
    raise NotReady(message)


def _codes(suspect_line: str) -> set[str]:
    """The reason codes of a suspect attempt's record line (results.validity)."""
    return {str(r.get("code", "")) for r in dropped_attempt(suspect_line)["reasons"]}


def _start_request(
    ctx: RunContext, view: StepView, key: str, osds: Mapping[str, str], driver: PodState
) -> StartRequest:
    """A step with several clients meets at a start barrier in the driver pod, with a
    token of this attempt's own (manifests/start_barrier.py); a step keeps the OSDs'
    incarnations with it, and on crimson samples the planned OSDs' reactors."""
    plan, step = view.plan, view.step
    meet = None
    if step is not None and plan.timing.barrier_jobs and driver.ip:
        meet = BarrierAddress(driver.ip, ctx.settings.barrier_port, secrets.token_hex(8))
    crimson = step is not None and plan.flavor == "crimson" and bool(plan.osds)
    return StartRequest(
        key, fio.client_job_files(plan, step, meet), view.servers or {}, view.deadline_s,
        osds=osds if step is not None else None,
        reactors=(plan.sample_interval_s, [o.osd_id for o in plan.osds]) if crimson else None,
        barrier=fio_driver.barrier_files(plan, meet) if meet is not None else None,
    )  # fmt: skip
