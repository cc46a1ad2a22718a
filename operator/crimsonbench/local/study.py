"""A study on this machine: its runs one after another, each on its own throwaway
cluster, then one comparison.

The study directory holds study.json (the study as given, its runs in order, when each
ran and how it ended), runs/<run>/ (each run's own results directory) and comparison/.
Resumable: a run whose results directory says Completed for the variant's spec is never
run again; an unfinished run resumes at its first unfinished step (local.runner); a
study killed at any point goes on from where it was when the same command runs again.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crimsonbench.errors import InvalidSpec
from crimsonbench.local.results_guard import held
from crimsonbench.local.runner import Events, LocalRun, Outcome
from crimsonbench.plan.study import StudyRun, Variant, expand_study, study_fingerprint, study_runs
from crimsonbench.plan.types import RunPlan
from crimsonbench.results.safe_files import write_atomic
from crimsonbench.results.store import ResultStore
from crimsonbench.spec.status import Phase
from crimsonbench.spec.study import BenchmarkStudySpec

STUDY_FILE = "study.json"
LOCK_FILE = ".study.lock"
MAX_STUDY_FILE = 4 * 2**20


@dataclass
class PlannedRun:
    run: StudyRun
    variant: Variant
    results_dir: Path
    plan: RunPlan
    done: bool  # finished earlier: not run again

    @property
    def fio_seconds(self) -> float:
        return len(self.plan.steps) * self.plan.timing.fio_s


@dataclass
class StudyOutcome:
    completed: list[str] = field(default_factory=list)  # runs done (now or before)
    failed: dict[str, str] = field(default_factory=dict)  # run -> why
    interrupted: bool = False


class LocalStudy:
    def __init__(
        self,
        name: str,
        spec: BenchmarkStudySpec,
        root: Path,
        events: Callable[[], AbstractContextManager[Events]],
        say: Callable[[str], None],
        fresh: bool = False,
        *,
        spec_file: Path | None = None,
        cpu_wait_s: float = 0.0,
    ) -> None:
        """events: a new front end per run (the CLI's progress display); say: one line
        for the user between runs."""
        if spec.base.target.local is None:
            raise InvalidSpec(
                "spec.base.target",
                "a local study needs target.local; on Kubernetes apply the BenchmarkStudy",
            )
        self.name, self.spec, self.root = name, spec, root
        self.events, self.say, self.fresh = events, say, fresh
        self.spec_file, self.cpu_wait_s = spec_file, cpu_wait_s
        self.variants = expand_study(spec)  # InvalidSpec: a variant that cannot run
        self.runs = study_runs(name, self.variants, spec.repeats)

    # ------------------------------------------------------------------ before anything runs

    def preflight(self) -> list[PlannedRun]:
        """Every refusal before the first run: the study directory (this study or none),
        then each run's own preflight (its results directory, its plan on this machine:
        CPU sets, versions, capacity). Reads only."""
        self._check_root()
        by_name = {v.name: v for v in self.variants}
        planned, problems = [], []
        for run in self.runs:
            variant = by_name[run.variant]
            local = self._local_run(run, variant, _Quiet())
            try:
                plan = local.preflight()
            except InvalidSpec as exc:
                problems += [(f"run {run.name} ({variant.describe()}): {f}", m)
                             for f, m in exc.problems]  # fmt: skip
                continue
            done = not self.fresh and _completed(local.store, variant)
            planned.append(PlannedRun(run, variant, local.store.root, plan, done))
        if problems:
            (first, message), *more = problems
            raise InvalidSpec(first, message, more=tuple(more))
        return planned

    def _check_root(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise InvalidSpec("--results", f"{self.root} is not a directory; pick another")
        record = self._read_record()
        if record is None:
            if self.root.exists() and any(self.root.iterdir()):
                raise InvalidSpec(
                    "--results",
                    f"{self.root} is not empty and holds no {STUDY_FILE}; a study writes "
                    "only into its own directory: pick another --results",
                )
            return
        if record.get("fingerprint") != study_fingerprint(self.spec) and not self.fresh:
            raise InvalidSpec(
                "--results",
                f"{self.root} holds study {record.get('name')!r} of another spec; run with "
                "--fresh to start it again (its runs are deleted) or pick another --results",
            )

    # ------------------------------------------------------------------ running

    def execute(self, planned: list[PlannedRun]) -> StudyOutcome:
        self.root.mkdir(parents=True, exist_ok=True)
        outcome = StudyOutcome()
        with held(self.root / LOCK_FILE, self.root, "a study"):
            record = self._new_record(planned)
            self._write_record(record)
            for i, p in enumerate(planned):
                entry = record["runs"][i]
                if p.done:
                    outcome.completed.append(p.run.name)
                    continue
                self.say(self._progress_line(planned, record, i))
                entry["started"] = _now()
                t0 = time.monotonic()
                result = self._run_one(p)
                entry.update(ended=_now(), wallSeconds=round(time.monotonic() - t0, 1))
                entry["phase"], entry["message"] = result.phase.value, result.message
                self._write_record(record)
                if result.phase == Phase.COMPLETED:
                    outcome.completed.append(p.run.name)
                elif "interrupted" in result.message:
                    outcome.interrupted = True
                    break
                else:  # one variant failing is a finding, not the end of the study
                    outcome.failed[p.run.name] = result.message
            record["ended"] = _now()
            self._write_record(record)
        return outcome

    def _run_one(self, p: PlannedRun) -> Outcome:
        with self.events() as events:
            local = self._local_run(p.run, p.variant, events)
            return local.execute()

    def _local_run(self, run: StudyRun, variant: Variant, events: Events) -> LocalRun:
        return LocalRun(run.name, variant.spec, self.root / "runs" / run.name, events,
                        fresh=self.fresh, spec_file=self.spec_file,
                        cpu_wait_s=self.cpu_wait_s)  # fmt: skip

    def _progress_line(self, planned: list[PlannedRun], record: dict[str, Any], i: int) -> str:
        p = planned[i]
        left_fio = sum(q.fio_seconds for q in planned[i:] if not q.done)
        ran = [(e, q) for e, q in zip(record["runs"], planned, strict=True)
               if isinstance(e.get("wallSeconds"), int | float)]  # fmt: skip
        ratio = (
            sum(e["wallSeconds"] for e, _ in ran) / sum(q.fio_seconds for _, q in ran)
            if ran and sum(q.fio_seconds for _, q in ran) > 0
            else None
        )
        eta = (
            f"~{left_fio * ratio / 60:.0f} min left (measured {ratio:.2f} x fio time)"
            if ratio
            else f"at least {left_fio / 60:.1f} min of fio left"
        )
        return (
            f"study {self.name}: run {i + 1}/{len(planned)} {p.run.name} "
            f"(variant {p.variant.name}, repeat {p.run.repeat}: {p.variant.describe()}); {eta}"
        )

    # ------------------------------------------------------------------ study.json

    def _new_record(self, planned: list[PlannedRun]) -> dict[str, Any]:
        old = self._read_record() or {}
        old_runs = {e.get("name"): e for e in old.get("runs", []) if isinstance(e, dict)}
        runs = []
        for p in planned:
            entry: dict[str, Any] = {"name": p.run.name, "variant": p.variant.name,
                                     "repeat": p.run.repeat}  # fmt: skip
            kept = old_runs.get(p.run.name) if not self.fresh else None
            if kept is not None:  # what an earlier invocation recorded of this run
                for key in ("started", "ended", "wallSeconds", "phase", "message"):
                    if key in kept:
                        entry[key] = kept[key]
            runs.append(entry)
        return {
            "kind": "BenchmarkStudy",
            "name": self.name,
            "fingerprint": study_fingerprint(self.spec),
            "spec": self.spec.model_dump(mode="json", by_alias=True),
            "variants": [{"name": v.name, "sets": v.describe()} for v in self.variants],
            "started": old.get("started") if not self.fresh and old else _now(),
            "resumed": (old.get("resumed", 0) + 1) if old and not self.fresh else 0,
            "runs": runs,
        }

    def _read_record(self) -> dict[str, Any] | None:
        path = self.root / STUDY_FILE
        if not path.is_file() or path.is_symlink():
            return None
        if path.stat().st_size > MAX_STUDY_FILE:
            raise InvalidSpec("--results", f"{path} is too large to be a study's record")
        try:
            record = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidSpec(
                "--results", f"{path} is not a study's record ({exc}); pick another --results"
            ) from None
        if not isinstance(record, dict) or record.get("kind") != "BenchmarkStudy":
            raise InvalidSpec("--results", f"{path} is not a study's record")
        return record

    def _write_record(self, record: dict[str, Any]) -> None:
        write_atomic(self.root / STUDY_FILE, json.dumps(record, indent=2) + "\n")

    def completed_dirs(self) -> dict[str, list[Path]]:
        """variant -> the results directories of its completed runs (study order)."""
        out: dict[str, list[Path]] = {v.name: [] for v in self.variants}
        by_name = {v.name: v for v in self.variants}
        for run in self.runs:
            store = ResultStore(self.root / "runs" / run.name)
            if _completed(store, by_name[run.variant]):
                out[run.variant].append(store.root)
        return out


def _completed(store: ResultStore, variant: Variant) -> bool:
    """The run finished every step, for this variant's spec."""
    if not (store.root / "status.json").is_file():
        return False
    try:
        status, spec = store.read_status(), store.read_spec()
    except (OSError, ValueError):
        return False
    same = spec == variant.spec.model_dump(mode="json", by_alias=True)
    return same and status.phase == Phase.COMPLETED


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class _Quiet:
    """Events nobody sees (preflight starts nothing)."""

    def phase(self, phase: Phase, message: str) -> None: ...
    def step_started(self, step: Any, done: int, total: int) -> None: ...
    def live(self, iops: float) -> None: ...
    def step_finished(self, step: Any, result: Any, note: str) -> None: ...
