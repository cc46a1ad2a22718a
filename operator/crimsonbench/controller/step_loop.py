"""The prefill and the sweep on the fio driver: ask step_decide what a step does next,
carry it out, until the tick must wait (NotReady) or the sweep is over. A step that ends
within this tick is stored and the next one starts in the same tick.

The actions carried out here only read (the driver's answer, Rook's OSD pods, the fio
servers' CPU logs and usage) and send what the decision rendered: what to read, when, and
what a start sends are decided in decisions/step_decide.py. The fio driver keys a step
by what it measures (Step.id)."""

from __future__ import annotations

import secrets
from dataclasses import replace
from typing import NoReturn

from crimsonbench.controller import driver as fio_driver_exec
from crimsonbench.controller.carry_out import Again, Finished, carry_out
from crimsonbench.controller.decisions.observed import PodState
from crimsonbench.controller.decisions.step_decide import (
    PREFILL,
    Action,
    OsdView,
    Poll,
    Prefilled,
    ReadCpuLogs,
    ReadOsds,
    Retry,
    Sample,
    Start,
    StepView,
    Store,
    next_step_actions,
)
from crimsonbench.controller.fio_setup import jobs_namespace
from crimsonbench.controller.run_context import RunContext
from crimsonbench.controller.sampling import client_cpu_logs, sample_step
from crimsonbench.controller.stored_results import load_results, store_results
from crimsonbench.errors import ExecutionError, NotReady
from crimsonbench.manifests.fio_driver import StepReport
from crimsonbench.plan.types import RunPlan
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
    _carry_out(ctx, view, driver)
    status.prefilled = True


def run_steps(ctx: RunContext, plan: RunPlan, servers: dict[str, str], driver: PodState) -> None:
    """The sweep: NotReady while steps remain; returns once the sweep is over."""
    ns = jobs_namespace(ctx)
    barrier, token = (driver.ip, ctx.settings.barrier_port), secrets.token_hex(8)
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
            watch_osds=ctx.target.rook_namespace is not None, placed=tuple(ctx.record.placement),
            cpu_logs=True, child=ctx.child, barrier=barrier, token=token,  # one start a tick
        )  # fmt: skip
        done = _carry_out(ctx, view, driver)
        if not isinstance(done, Store):  # step_decide ends a step's view stored, always
            raise ExecutionError(f"{view.what}: ended as a prefill (a bug: say so)")
        stored = done.result
        results[step.id] = stored
        store_results(ctx, plan, results)  # stored before its directory goes: never run twice
        fio_driver_exec.end(ctx, ns, driver.name, done.end)
        status.step_samples = []  # the next step starts its own samples
        if stored.extra.get("reactor_utilization_error"):
            ctx.logger.warning("%s: reactor utilization: %s", view.what,
                               stored.extra["reactor_utilization_error"])  # fmt: skip
        note = state.record(step, stored)
        if note:
            ctx.logger.info("%s", note)
        report = _MISSING  # the next step is new: start it at once
    status.current_step = ""


def _carry_out(ctx: RunContext, view: StepView, driver: PodState) -> Store | Prefilled:
    """Carry out the decisions for one step until it is stored (or the prefill done);
    NotReady when the tick must wait, ExecutionError when the step failed. Rook's namespace
    is where the Jobs run (fio_setup.jobs_namespace): the fio servers and the driver."""
    ns, pod, key = jobs_namespace(ctx), driver.name, view.key

    def act(action: Action, view: StepView) -> StepView | Again[StepView] | Finished[Done]:
        match action:
            case Poll(wait_s=wait, argv=argv):
                report = fio_driver_exec.poll(ctx, ns, pod, argv, wait_s=wait)
                # a new answer: what was read beside the last one is stale
                return Again(replace(view, report=report, osds=None,
                                     waited=view.waited or wait > 0))  # fmt: skip
            case ReadOsds():
                pods = ctx.kube.list_osd_pods(ns)
                return Again(replace(view, osds=OsdView.of(pods, view.placed)))
            case ReadCpuLogs(jobs=jobs, lines=lines):
                return Again(replace(view, node_cpu=client_cpu_logs(ctx, ns, jobs, lines)))
            case Start(request=request):
                if fio_driver_exec.start(ctx, ns, pod, request):
                    raise NotReady(f"{view.what} started")
                return Again(replace(view, report=None))  # started by an earlier operator
            case Sample(servers=servers, osds=osds):
                sample_step(ctx, ns, servers, osds)
                status = ctx.record.status
                return replace(view, samples=tuple(status.step_samples),
                               metrics_source=status.metrics_source or "none")  # fmt: skip
            case Prefilled(end=end):
                fio_driver_exec.end(ctx, ns, pod, end)
                return Finished(action)
            case Store():
                return Finished(action)
            case Retry():
                _retry(ctx, ns, pod, key, action)  # raises NotReady: the step runs again
            case ExecutionError() | NotReady():
                raise action
        raise ExecutionError(f"{view.what}: an action the step loop does not know: {action!r}")

    what = f"{view.what}: the fio driver's answers contradict each other; again"
    return carry_out(next_step_actions, act, view, most=_MOST_DECISIONS, contradiction=what)


def _retry(ctx: RunContext, ns: str, pod: str, key: str, retry: Retry) -> NoReturn:
    """Drop the attempt (its result is not stored) and note why; the step runs again once
    every OSD is back (NotReady)."""
    retries = ctx.record.book.step_retries
    ctx.record.book.step_retries = {**retries, key: [*retries.get(key, []), retry.why]}
    fio_driver_exec.end(ctx, ns, pod, retry.end)
    ctx.record.status.step_samples = []
    ctx.record.condition("StepRetried", True, retry.cause, retry.message)
    ctx.logger.warning("%s", retry.message)
    raise NotReady(retry.message)
