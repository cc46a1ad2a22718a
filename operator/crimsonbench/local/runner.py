"""Local mode: plan, bring up a throwaway cluster, sweep, keep every finished step.

Resumable like CBT: results are keyed by what a step measures (its workload, iodepth and
repeat: plan.types.step_key) in the results directory, and a step whose result.json exists
is not run again, wherever it stands in the spec now (plan.meaning: a spec that measures
something else is refused). The cluster itself is always new.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import logging
import os
import platform
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from crimsonbench.errors import CrimsonBenchError, ExecutionError, InvalidSpec
from crimsonbench.local.cluster import LocalCluster
from crimsonbench.local.step_exec import StepContext, run_step
from crimsonbench.local.topology_probe import local_topology
from crimsonbench.local.userland import Userland, userland_for
from crimsonbench.local.versions import installed_ceph_version, known_options
from crimsonbench.plan.build import build_plan
from crimsonbench.plan.meaning import meaning_changes
from crimsonbench.plan.summary import plan_summary
from crimsonbench.plan.types import RunPlan, Step
from crimsonbench.results.store import (
    LOCK_FILE,
    MARKER_FILE,
    CorruptResults,
    NotAResultsDirectory,
    ResultStore,
)
from crimsonbench.results.sweep_state import SweepState
from crimsonbench.results.types import RunInfo, StepResult
from crimsonbench.spec.models import BenchmarkRunSpec, Flavor
from crimsonbench.spec.status import Phase

log = logging.getLogger(__name__)


_KNEE = "skipped: the knee search did not need this iodepth"


def _listing(root: Path, most: int = 5) -> str:
    names = sorted(e.name for e in root.iterdir())
    shown = ", ".join(names[:most]) + (
        f" and {len(names) - most} more" if len(names) > most else ""
    )
    return shown or "nothing"


class Events(Protocol):
    """What the runner tells its front end (the CLI's rich display, or nothing)."""

    def phase(self, phase: Phase, message: str) -> None: ...
    def step_started(self, step: Step, done: int, total: int) -> None: ...
    def live(self, iops: float) -> None: ...
    def step_finished(self, step: Step, result: StepResult | None, note: str) -> None: ...


class Interrupted(CrimsonBenchError):
    """SIGTERM or Ctrl-C: stop now, keep what is finished, clean up."""


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    def handler(signum: int, frame: object) -> None:
        raise Interrupted(f"stopped by signal {signal.Signals(signum).name}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _exclusive(store: ResultStore) -> Iterator[None]:
    """One run per results directory: a second run would mix its steps into the first's."""
    results_dir = store.root
    with store.lock_path.open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            raise InvalidSpec(
                "--results",
                f"{results_dir} is in use by a run still going ({holder}); "
                "wait for it or pick another --results directory",
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}")
        fh.flush()
        yield


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
    ) -> None:
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
        self._adopt = False  # an old results directory of this spec, marked when run

    def plan(self) -> RunPlan:
        # crimson's option names from the programs that will run (the version table only
        # when they cannot say)
        crimson = self.spec.osd.flavor == Flavor.CRIMSON
        known = known_options(self.userland()) if crimson else None
        return build_plan(self.name, self.spec, local_topology(), ceph_version=self.version(),
                          known_options=known)  # fmt: skip

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
        --fresh), then the plan (CPU sets, versions: InvalidSpec). Returns the plan."""
        self.check_results_dir()
        plan = self.plan()  # InvalidSpec before anything is started
        return plan

    def check_results_dir(self) -> None:
        """The results directory's refusals (InvalidSpec naming --results); reads only."""
        root = self.store.root
        if root.is_symlink() and not root.exists():
            raise InvalidSpec(
                "--results",
                f"{root} is a link to {os.readlink(root)}, which does not exist; create that "
                "directory or pick another --results",
            )
        if root.exists() and not root.is_dir():
            raise InvalidSpec("--results", f"{root} is not a directory; pick another --results")
        links = self.store.links()
        if links:
            raise InvalidSpec(
                "--results",
                f"{links[0]} is a symbolic link (to {os.readlink(links[0])}); a run writes "
                "nothing through links in its results directory: replace it with a real "
                "directory, or pick another --results",
            )
        self._check_not_in_use()
        if root.is_dir() and any(root.iterdir()) and not self.store.has_marker:
            self._refuse_unmarked(root)
        if not self.fresh:
            self._check_same_spec()
            self._check_steps_usable()

    def _check_steps_usable(self) -> None:
        """A resumed run keeps every step it finds; one it cannot read would stop the
        report at the end (after the run's work), so it is refused now, naming each."""
        try:
            problems = self.store.scan_steps().problems
        except NotAResultsDirectory as exc:
            raise InvalidSpec("--results", str(exc)) from None
        if problems:
            raise InvalidSpec(
                "--results",
                str(CorruptResults(self.store.root, problems)) + " Or pass --fresh to start over.",
            )

    def _refuse_unmarked(self, root: Path) -> None:
        """A non-empty directory without our marker: --fresh deletes nothing there, and a
        run writes there only when it holds our results from before markers existed
        (spec.json of this very spec), which it then marks."""
        marker = f"{root / MARKER_FILE}"
        if self.fresh:
            raise InvalidSpec(
                "--results",
                f"--fresh empties only a results directory crimsonbench created (it has "
                f"{marker}); {root} has none and holds {_listing(root)}. Check what it is, "
                "then delete it yourself, or pick another --results directory",
            )
        foreign = self.store.foreign_entries()
        try:
            found = self.store.read_spec() if not foreign else None
        except NotAResultsDirectory:
            found = None
        if found is None or found != self._spec_json():
            raise InvalidSpec(
                "--results",
                f"{root} is not empty ({_listing(root)}) and is not a crimsonbench results "
                f"directory of this spec (no {marker}): pick a new or empty --results directory",
            )
        self._adopt = True

    def _check_not_in_use(self) -> None:
        """The lock of a run still going, checked before anything is written (the lock
        is taken for real once the directory is ours: _exclusive)."""
        path = self.store.root / LOCK_FILE
        if not path.is_file() or path.is_symlink():
            return
        with path.open("rb") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = fh.read(200).decode(errors="replace").strip() or "another process"
                raise InvalidSpec(
                    "--results",
                    f"{self.dir} is in use by a run still going ({holder}); "
                    "wait for it or pick another --results directory",
                ) from None
            fcntl.flock(fh, fcntl.LOCK_UN)

    def _spec_json(self) -> dict[str, Any]:
        return self.spec.model_dump(mode="json", by_alias=True)

    def _check_same_spec(self) -> None:
        """The steps found are kept when this spec measures what theirs did (resume by
        content, plan.meaning): more iodepths, repeats or workloads run only the new
        steps; a change of anything a step measures under is refused, naming it."""
        try:
            found = self.store.read_spec() if self.store.root.is_dir() else None
        except NotAResultsDirectory as exc:
            raise InvalidSpec("--results", str(exc)) from None
        if found is None or found == self._spec_json():
            return
        try:
            changes = meaning_changes(found, self._spec_json())
        except InvalidSpec as exc:
            changes = [str(exc)]
        if changes:
            raise InvalidSpec(
                "--results",
                f"{self.dir} holds steps measured under another spec ({'; '.join(changes)}), "
                "so they would not compare with this spec's; pass --fresh to start over "
                "(their results are deleted) or pick another --results directory. (More "
                "iodepths, repeats or workloads, or other earlyExit, latencyTarget or "
                "kneeSearch rules, keep every finished step.)",
            )

    def execute(self) -> Outcome:
        plan = self.preflight()  # nothing written or deleted before this returns
        self.store.create()
        if self._adopt:
            self.store.adopt()
        with _exclusive(self.store):
            return self._execute(plan)

    def _execute(self, plan: RunPlan) -> Outcome:
        if self.fresh:  # under the lock, so a run still going keeps its results
            self.store.clear()  # only with our marker (checked again there)
        self.store.write_spec(self._spec_json())
        self._plan = plan
        self.store.write_plan(plan_summary(plan))
        # The report reads the spec from run.json: which workloads are bandwidth, the rules.
        self.store.write_run_info(self.info(self.version()), {"spec": self._spec_json()})
        state = SweepState(plan.sweep, self.store.completed_steps(), plan.bandwidth_workloads)
        outcome = Outcome(Phase.PREPARING, "", self.dir)
        self._write_status(plan, outcome)
        try:
            with _sigterm_as_interrupt():
                self._run(plan, state, outcome)
            outcome.phase, outcome.message = Phase.COMPLETED, "all steps done"
        except (Interrupted, KeyboardInterrupt) as exc:
            outcome.phase = Phase.FAILED
            outcome.message = f"interrupted ({exc or 'Ctrl-C'}); finished steps are kept"
        except CrimsonBenchError as exc:
            outcome.phase, outcome.message = Phase.FAILED, str(exc)
        outcome.results = self.store.load_results()
        self._write_status(plan, outcome)
        self.events.phase(outcome.phase, outcome.message)
        return outcome

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
        ) as cluster:
            cluster.userland.share(self.dir)  # job files and outputs, same path in a root
            self._prepare(cluster, plan, outcome)
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
            )
            while (step := state.next_step(plan.steps)) is not None:
                self._one_step(step, ctx, state, outcome, len(plan.steps))
            for step in plan.steps:  # what the sweep's rules or the knee search left out
                if step.id not in state.done:
                    outcome.skipped.append(step.id)
                    self.events.step_finished(step, None, state.skip_reason(step) or _KNEE)
            self._enter(outcome, Phase.RESTORING, "tearing the cluster down")

    def _prepare(self, cluster: LocalCluster, plan: RunPlan, outcome: Outcome) -> None:
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

    def _one_step(
        self, step: Step, ctx: StepContext, state: SweepState, outcome: Outcome, total: int
    ) -> None:
        self.events.step_started(step, sum(s.id in state.done for s in self._plan.steps), total)
        self._write_status(self._plan, outcome, current=step.id)
        try:
            result = run_step(step, self.store, ctx)
        except ExecutionError as exc:
            raise ExecutionError(f"step {step.id} failed: {exc}") from exc
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
        status = {
            "phase": outcome.phase.value,
            "message": outcome.message,
            "stepsDone": done,
            "stepsTotal": len(plan.steps),
            "progress": f"{done}/{len(plan.steps)}",
            "currentStep": current,
            "skipped": outcome.skipped,
            "updatedAt": dt.datetime.now(dt.UTC).isoformat(),
        }
        self.store.write_status(status)
