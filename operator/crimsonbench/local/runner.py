"""Local mode: plan, bring up a throwaway cluster, sweep, keep every finished step.

Resumable like CBT: results are keyed by what a step measures (its workload, iodepth and
repeat: plan.types.step_key) in the results directory, and a step whose result.json exists
is not run again, wherever it stands in the spec now (plan.meaning: a spec that measures
something else is refused). The cluster itself is always new.

What a run holds on the machine (its CPUs, its cluster) is claimed machine-wide
(local/claims.py); what a dead run left is removed before a new one starts
(local/leftovers.py); stop signals stop the run once and never cut its teardown short
(local/signals.py).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from crimsonbench.errors import CrimsonBenchError, ExecutionError, InvalidSpec
from crimsonbench.local.claims import CpuClaim
from crimsonbench.local.cluster import LocalCluster
from crimsonbench.local.disk_space import Reserve, full_disk
from crimsonbench.local.leftovers import reap_dead_runs
from crimsonbench.local.provenance import run_provenance
from crimsonbench.local.results_guard import ResultsGuard, exclusive
from crimsonbench.local.signals import Interrupted, StopOnce
from crimsonbench.local.step_exec import StepContext, run_step
from crimsonbench.local.topology_probe import local_room, local_topology
from crimsonbench.local.userland import Userland, userland_for
from crimsonbench.local.versions import installed_ceph_version, known_options
from crimsonbench.plan.build import build_plan
from crimsonbench.plan.capacity import check_capacity
from crimsonbench.plan.summary import plan_summary
from crimsonbench.plan.types import RunPlan, Step
from crimsonbench.results.attempts import with_earlier_attempts
from crimsonbench.results.prefill_check import written_shares
from crimsonbench.results.run_status import RunStatus
from crimsonbench.results.store import ResultStore
from crimsonbench.results.sweep_state import SweepState
from crimsonbench.results.types import RunInfo, StepResult
from crimsonbench.results.validity import stored_verdict
from crimsonbench.spec.models import BenchmarkRunSpec, Flavor
from crimsonbench.spec.status import Phase

log = logging.getLogger(__name__)

__all__ = ["Events", "Interrupted", "LocalRun", "Outcome"]

_KNEE = "skipped: the knee search did not need this iodepth"


class Events(Protocol):
    """What the runner tells its front end (the CLI's rich display, or nothing)."""

    def phase(self, phase: Phase, message: str) -> None: ...
    def step_started(self, step: Step, done: int, total: int) -> None: ...
    def live(self, iops: float) -> None: ...
    def step_finished(self, step: Step, result: StepResult | None, note: str) -> None: ...


@dataclass
class Outcome:
    phase: Phase
    message: str
    results_dir: Path
    results: list[StepResult] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


class LocalRun:
    def __init__(
        self,
        name: str,
        spec: BenchmarkRunSpec,
        results_dir: Path,
        events: Events,
        fresh: bool = False,
        *,
        spec_file: Path | None = None,
        cpu_wait_s: float = 0.0,
    ) -> None:
        """spec_file: where the spec came from (named to a run wanting the same CPUs);
        cpu_wait_s: how long to wait for CPUs another run pins (0: refuse at once)."""
        if spec.target.local is None:
            raise InvalidSpec(
                "spec.target",
                "the local runner needs target.local; "
                "rook and external targets run through the operator",
            )
        self.name, self.spec, self.events = name, spec, events
        self.fresh = fresh
        self.store = ResultStore(results_dir)
        self.dir = results_dir
        self.spec_file, self.cpu_wait_s = spec_file, cpu_wait_s
        self._guard = ResultsGuard(self.store, self._spec_json(), fresh)

    def plan(self) -> RunPlan:
        """The plan for this machine, once the run fits in it (plan.capacity)."""
        # crimson's option names from the programs that will run (the version table only
        # when they cannot say)
        crimson = self.spec.osd.flavor == Flavor.CRIMSON
        known = known_options(self.userland()) if crimson else None
        plan = build_plan(self.name, self.spec, local_topology(), ceph_version=self.version(),
                          known_options=known)  # fmt: skip
        local = self.spec.target.local
        check_capacity(self.spec, local_room(local) if local is not None else None)
        return plan

    def userland(self) -> Userland:
        """Where the run's programs come from: this machine, a Ceph root or a build dir."""
        local = self.spec.target.local
        if local is None:
            return Userland()
        crimson = self.spec.osd.flavor == Flavor.CRIMSON
        return userland_for(local.ceph_root, crimson, local.ceph_bin_dir)

    def version(self) -> str:
        """The Ceph version of the programs the run will use (this machine or cephRoot)."""
        return installed_ceph_version(self.userland())

    def info(self, version: str) -> RunInfo:
        return RunInfo.from_spec(
            self.name,
            self.spec,
            ceph_version=version,
            host=platform.node(),
            started=dt.datetime.now(dt.UTC).isoformat(),
        )

    def preflight(self) -> RunPlan:
        """Every refusal, before anything is written or deleted: the results directory
        (ours, or new, or empty; no links in it; not in use; the same spec unless
        --fresh), then the plan (CPU sets, versions, capacity: InvalidSpec)."""
        self.check_results_dir()
        return self.plan()  # InvalidSpec before anything is started

    def check_results_dir(self) -> None:
        """The results directory's refusals (InvalidSpec naming --results); reads only."""
        self._guard.check()

    def _spec_json(self) -> dict[str, Any]:
        return self.spec.model_dump(mode="json", by_alias=True)

    def holder(self) -> str:
        """How a run that wants the same CPUs is told who has them."""
        spec = f"spec {self.spec_file}" if self.spec_file else f"run {self.name}"
        return f"crimsonbench pid {os.getpid()} ({spec}, results {self.store.root})"

    def execute(self) -> Outcome:
        reap_dead_runs()  # their daemons hold CPUs and memory the checks below count
        plan = self.preflight()  # nothing written or deleted before this returns
        cpus = {c: "spec.client.cpuSet" for cl in plan.clients for c in cl.cpus}
        cpus.update(dict.fromkeys(plan.local_host.cpu.osd_cpus(), "spec.osd.cpuSet"))
        with CpuClaim(cpus, self.holder()) as claim:
            if not claim.acquire(self.cpu_wait_s, lambda m: self.events.phase(Phase.PENDING, m)):
                reap_dead_runs()  # the run we waited for may have died, not ended
            self.store.create()
            if self._guard.adopt:
                self.store.adopt()
            with exclusive(self.store):
                return self._execute(plan)

    def _execute(self, plan: RunPlan) -> Outcome:
        outcome = Outcome(Phase.PREPARING, "", self.dir)
        self._plan = plan
        reserve = Reserve(self.store.root)
        with StopOnce() as stop:
            try:
                reserve.take()
                self._begin(plan, outcome)
                self._run(plan, SweepState(plan.sweep, self.store.completed_steps(),
                                           plan.bandwidth_workloads), outcome)  # fmt: skip
                outcome.phase, outcome.message = Phase.COMPLETED, "all steps done"
            except (Interrupted, KeyboardInterrupt) as exc:
                outcome.phase = Phase.FAILED
                outcome.message = f"interrupted ({exc or 'Ctrl-C'}); finished steps are kept"
            except CrimsonBenchError as exc:
                outcome.phase, outcome.message = Phase.FAILED, str(exc)
            except OSError as exc:
                message = full_disk(exc, self.store.root)
                if message is None:
                    raise
                outcome.phase, outcome.message = Phase.FAILED, message
            stop.disarm()  # how the run ended is written whatever comes now
            reserve.release()  # room for the last status on a full disk
            outcome.results = self.store.load_results()
            self._write_status(plan, outcome)
            self.events.phase(outcome.phase, outcome.message)
        return outcome

    def _begin(self, plan: RunPlan, outcome: Outcome) -> None:
        if self.fresh:  # under the lock, so a run still going keeps its results
            self.store.clear()  # only with our marker (checked again there)
        self.store.write_spec(self._spec_json())
        self.store.write_plan(plan_summary(plan))
        # The report reads the spec from run.json: which workloads are bandwidth, the rules.
        self._info = self.info(self.version())
        self.store.write_run_info(self._info, {"spec": self._spec_json()})
        self._write_status(plan, outcome)

    def _run(self, plan: RunPlan, state: SweepState, outcome: Outcome) -> None:
        todo = [s for s in plan.steps if s.id not in state.done]
        if state.next_step(plan.steps) is None:
            self._enter(
                outcome,
                Phase.RUNNING,
                f"all {len(plan.steps)} steps are already done in "
                f"{self.dir}; pass --fresh to run them again",
            )
            return
        local = self.spec.target.local
        if local is None:  # __init__ refused it already; keeps the type checker honest
            raise InvalidSpec("spec.target.local", "the local runner needs target.local")
        self._enter(outcome, Phase.PREPARING, "starting a local Ceph cluster")
        with LocalCluster(
            local,
            self.spec.osd,
            plan.local_host.cpu.osds,
            plan.ceph,
            root=Path(local.work_dir) if local.work_dir else None,
            owner={"run": self.name, "results": str(self.store.root)},
        ) as cluster:
            cluster.userland.share(self.dir)  # job files and outputs, same path in a root
            unwritten = self._prepare(cluster, plan, outcome)
            prov = run_provenance(plan, cluster.layout.run, sorted(cluster.osd_pids()),
                                  cluster.userland, self._info.ceph_version)  # fmt: skip
            prov["images_not_fully_written"] = unwritten  # rbd du after the prefill
            self.store.write_run_info(self._info, {"spec": self._spec_json(), "provenance": prov})
            self._enter(outcome, Phase.RUNNING, f"{len(todo)} of {len(plan.steps)} steps to run")
            ctx = StepContext(
                plan=plan,
                env=cluster.client_conf().env,
                osd_pids=cluster.osd_pids,
                health_check=cluster.health_check,
                live=self.events.live,
                userland=cluster.userland,
                reactor_util=cluster.reactor_utilization if cluster.crimson else None,
                crimson_threads=cluster.crimson_threads if cluster.crimson else None,
                other_pids=lambda: [p for n, p in cluster.pids().items() if n[:4] != "osd."],
                cluster_log=cluster.cluster_log,
                unwritten=unwritten,
            )
            while (step := state.next_step(plan.steps)) is not None:
                self._one_step(step, ctx, state, outcome, len(plan.steps))
            for step in plan.steps:  # what the sweep's rules or the knee search left out
                if step.id not in state.done:
                    outcome.skipped.append(step.id)
                    self.events.step_finished(step, None, state.skip_reason(step) or _KNEE)
            self._enter(outcome, Phase.RESTORING, "tearing the cluster down")

    def _prepare(self, cluster: LocalCluster, plan: RunPlan, outcome: Outcome) -> dict[str, float]:
        """The pool and its images, prefilled; returns the images left not fully written
        (image -> share written, from rbd du): read steps over them are suspect."""
        pool = plan.pool
        cluster.create_pool(pool.name, pool.pg_num, plan.client_options)
        cluster.create_images(pool.images, pool.image_size_bytes)
        if plan.prefill.jobs:
            self._enter(outcome, Phase.PREPARING, f"prefilling {len(pool.images)} images")
            cluster.prefill(
                pool.images,
                pool.image_size_bytes,
                plan.prefill.deadline_s,
                plan.prefill.block_size_bytes,
            )
        used = cluster.rbd_du(pool.name)
        return written_shares(used, pool.images, pool.image_size_bytes)

    def _one_step(
        self, step: Step, ctx: StepContext, state: SweepState, outcome: Outcome, total: int
    ) -> None:
        self.events.step_started(step, sum(s.id in state.done for s in self._plan.steps), total)
        self._write_status(self._plan, outcome, current=step.id)
        earlier: list[StepResult] = []
        while True:
            try:
                result = run_step(step, self.store, ctx)
            except ExecutionError as exc:
                raise ExecutionError(f"step {step.id} failed: {exc}") from exc
            verdict = stored_verdict(result.extra)
            if (
                verdict is None
                or not verdict.suspect
                or len(earlier) >= self.spec.sweep.rerun_suspect
            ):
                break
            why = "; ".join(r.detail for r in verdict.reasons)
            self.events.phase(Phase.RUNNING, f"step {step.id} is suspect ({why}): running it again")
            earlier.append(result)
        result = with_earlier_attempts(result, earlier)
        self.store.write_step(result)
        note = state.record(step, result)
        self.events.step_finished(step, result, note)

    def _enter(self, outcome: Outcome, phase: Phase, message: str) -> None:
        """One place for phase changes, so status.json, metrics and the display agree."""
        outcome.phase, outcome.message = phase, message
        self._write_status(self._plan, outcome)
        self.events.phase(phase, message)

    def _write_status(self, plan: RunPlan, outcome: Outcome, current: str = "") -> None:
        """status.json mirrors the operator's status; the metrics endpoint reads it."""
        measured = {r.key for r in self.store.completed_steps().values()}
        done = sum(s.id in measured for s in plan.steps)  # of this plan's steps
        status = RunStatus(phase=outcome.phase, message=outcome.message, steps_done=done,
                           steps_total=len(plan.steps), progress=f"{done}/{len(plan.steps)}",
                           current_step=current, skipped=outcome.skipped)  # fmt: skip
        self.store.write_status(status.stamped())
