"""The results directory: everything a report needs, as JSON files, so a run can resume
and reports can be recomputed from the files alone. The local runner, `crimsonbench
fetch` (a Kubernetes run), the metrics collector and the reports all go through
ResultStore; results.results_dir names every file and keeps paths under the root,
results.safe_files reads and writes them.

    <root>/spec.json                      the BenchmarkRun spec the results belong to
    <root>/plan.json                      what the planner decided (CPU sets, options, steps)
    <root>/run.json                       RunInfo and the executor's extra dict
    <root>/status.json                    phase, progress, current step (as the operator's)
    <root>/.lock                          held by the one run writing here
    <root>/.reserve                       space a local run gives back on a full disk
    <root>/.crimsonbench-results          our marker: crimsonbench created this directory
                                          (`run --fresh` empties no directory without it)
    <root>/steps/<step_id>/result.json    StepResult.to_dict(); present = step complete
                                          (<step_id>: what the step measures, e.g.
                                          randread4k-qd016-r1; older runs' ids have the
                                          step's position first: 003-randread4k-qd016-r1)
    <root>/steps/<step_id>/fio-<client>.json  fio's raw output, one per fio client
    <root>/steps/<step_id>/fio-<client>.eta   fio's status lines (live IOPS while it runs)
    <root>/steps/<step_id>/<job>.fio          the job files fio ran
    <root>/steps/<step_id>/<job>_iops.N.log   fio's per-second IOPS log of each job
    <root>/steps/<step_id>/samples.json   the resource samples taken during the step
    <root>/steps/<step_id>/affinity.json  CPU affinity seen on every thread, and violations

Every file is written to a temporary name and renamed into place, so a run killed
mid-write never leaves a half-written result.json that would count as complete.

A results directory is also input from elsewhere (copied, fetched, edited by hand): every
path the store reads or writes is a plain name joined under the root, no symbolic link
below the root is followed (a linked `steps/` or `report/` is refused, naming it), and
what it reads is checked field by field (results.checked_json). `read_results` refuses a
directory with any unusable step and lists them all; `completed_steps` (what a resumed
run skips, matched by StepResult.key) leaves them out with a warning, so the run does them
again.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from crimsonbench.results import checked_json as cj
from crimsonbench.results.results_dir import (
    AFFINITY_FILE,
    LOCK_FILE,
    MARKER_FILE,
    MARKER_TEXT,
    PLAN_FILE,
    REPORT_DIR,
    RESERVE_FILE,
    RESULT_FILE,
    RUN_FILE,
    SAMPLES_FILE,
    SPEC_FILE,
    STATUS_FILE,
    STEPS_DIR,
    VIOLATIONS_KEY,
    CorruptResults,
    ResultsDir,
)
from crimsonbench.results.run_status import RunStatus
from crimsonbench.results.safe_files import (
    MAX_JSON_BYTES,
    NotAResultsDirectory,
    UnsafePath,
    is_safe_name,
    read_json,
    reason,
    safe_name,
    write_atomic,
    write_json,
)
from crimsonbench.results.types import RunInfo, StepResult
from crimsonbench.spec.status import StepSample

# Names other modules take from here (the store is their one entry point).
__all__ = [
    "LOCK_FILE",
    "MARKER_FILE",
    "MARKER_TEXT",
    "MAX_JSON_BYTES",
    "REPORT_DIR",
    "RESERVE_FILE",
    "CorruptResults",
    "FioPaths",
    "NotAResultsDirectory",
    "ResultStore",
    "StepScan",
    "UnsafePath",
    "read_json",
    "safe_name",
    "write_atomic",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepScan:
    """What steps/ holds: the usable results, the unusable files (each with why) and the
    step directories without a result.json (a step that did not finish)."""

    results: dict[str, StepResult]
    problems: list[tuple[Path, str]]
    unfinished: list[str]


class ResultStore(ResultsDir):
    """Reads and writes the files of a results directory (ResultsDir: where they are)."""

    # ------------------------------------------------------------ spec, plan, status

    def write_spec(self, spec: Mapping[str, Any]) -> Path:
        self.create()
        return write_json(self.path(SPEC_FILE), dict(spec))

    def read_spec(self) -> dict[str, Any] | None:
        """The spec the results belong to, or None when none was written yet."""
        return self._read_optional(SPEC_FILE)

    def write_plan(self, summary: Mapping[str, Any]) -> Path:
        self.create()
        return write_json(self.path(PLAN_FILE), dict(summary))

    def read_plan(self) -> dict[str, Any] | None:
        return self._read_optional(PLAN_FILE)

    def write_status(self, status: RunStatus) -> Path:
        self.create()
        return write_json(self.path(STATUS_FILE), status.model_dump(mode="json", by_alias=True))

    def read_status(self) -> RunStatus:
        """status.json; Pending while none was written, or when it is not a run's status
        (logged: never half trusted)."""
        doc = self._read_optional(STATUS_FILE)
        status = RunStatus.read(doc) if doc is not None else RunStatus()
        if status is None:
            log.warning("%s is not a run status; read as Pending", self.path(STATUS_FILE))
        return status or RunStatus()

    def _read_optional(self, name: str) -> dict[str, Any] | None:
        """A top-level JSON object, or None when missing or unusable (logged)."""
        try:
            data = read_json(self.path(name))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("ignoring %s: %s", self.root / name, exc)
            return None
        return data if isinstance(data, dict) else None

    # ------------------------------------------------------------ the run

    def write_run_info(self, info: RunInfo, extra: Mapping[str, Any] | None = None) -> Path:
        """extra: anything the reports may use, e.g. {"spec": spec.model_dump(...)}."""
        self.create()
        return write_json(self.path(RUN_FILE), {"info": asdict(info), "extra": dict(extra or {})})

    def read_run_info(self) -> RunInfo:
        """run.json's info; FileNotFoundError when there is none, CorruptResults (naming
        the file and the field) when it cannot be used."""
        return self.read_run()[0]

    def read_run(self) -> tuple[RunInfo, dict[str, Any]]:
        path = self.path(RUN_FILE)
        try:
            data = cj.obj(read_json(path), "run.json")
            info = RunInfo.from_json_dict(cj.required(data, "info", ""))
            extra = data.get("extra")
            return info, {} if extra is None else dict(cj.obj(extra, "extra"))
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as exc:
            raise CorruptResults(self.root, [(path, reason(exc))]) from None

    # ------------------------------------------------------------ steps

    def step_dir(self, step_id: str) -> Path:
        """The step's directory, created if needed."""
        return self._dir(STEPS_DIR, safe_name(step_id, "step id"))

    def _step_path(self, step_id: str, *parts: str) -> Path:
        return self.path(STEPS_DIR, safe_name(step_id, "step id"), *parts)

    def write_step(self, result: StepResult) -> Path:
        """Mark the step complete; write its raw files first."""
        self.step_dir(result.step_id)
        return write_json(self._step_path(result.step_id, RESULT_FILE), result.to_json_dict())

    def scan_steps(self) -> StepScan:
        """Every entry of steps/: usable results, unusable files, unfinished steps.
        Raises UnsafePath when steps/ itself is a link."""
        results: dict[str, StepResult] = {}
        problems: list[tuple[Path, str]] = []
        unfinished: list[str] = []
        steps = self.path(STEPS_DIR)
        if not steps.exists():
            return StepScan(results, problems, unfinished)
        if not steps.is_dir():
            return StepScan(results, [(steps, "is a file, not the steps directory")], [])
        for entry in sorted(steps.iterdir()):
            if entry.is_symlink():
                problems.append(
                    (entry, f"is a symbolic link (to {os.readlink(entry)}); not followed")
                )
            elif not entry.is_dir():
                problems.append((entry, "is not a step directory"))
            elif not is_safe_name(entry.name):
                problems.append((entry, "is not a step id (letters, digits, . _ -)"))
            else:
                path = entry / RESULT_FILE
                if not path.exists() and not path.is_symlink():
                    unfinished.append(entry.name)
                    continue
                try:
                    result = _read_result(path)
                except (OSError, ValueError) as exc:
                    problems.append((path, reason(exc)))
                    continue
                results[result.step_id] = result
        return StepScan(results, problems, unfinished)

    def completed_steps(self) -> dict[str, StepResult]:
        """step_id -> result of every step whose result.json is whole and consistent; an
        unusable one is left out with a warning (a resumed run does that step again)."""
        try:
            scan = self.scan_steps()
        except UnsafePath as exc:
            log.warning("no steps read: %s", exc)
            return {}
        for path, why in scan.problems:
            log.warning("ignoring %s: %s", path, why)
        return scan.results

    def load_results(self) -> list[StepResult]:
        """completed_steps in step order (lenient: for a run and its metrics)."""
        return [r for _, r in sorted(self.completed_steps().items())]

    def read_results(self) -> list[StepResult]:
        """Every step result, in step order, for reports and comparisons: CorruptResults
        listing every unusable file when there is any, UnsafePath for a linked steps/."""
        scan = self.scan_steps()
        if scan.problems:
            raise CorruptResults(self.root, scan.problems)
        return [r for _, r in sorted(scan.results.items())]

    # ------------------------------------------------------------ raw files

    def _glob(self, step_id: str, pattern: str) -> list[Path]:
        """Regular files of a step matching pattern (links left out)."""
        d = self._step_path(step_id)
        return sorted(p for p in d.glob(pattern) if not p.is_symlink() and p.is_file())

    def fio_paths(self, step_id: str, client: str) -> FioPaths:
        """Where the fio of one client keeps its output and status lines in a step."""
        self.step_dir(step_id)
        name = safe_name(client, "fio client name")
        return FioPaths(
            output=self._step_path(step_id, f"fio-{name}.json"),
            stderr=self._step_path(step_id, f"fio-{name}.stderr"),
            eta=self._step_path(step_id, f"fio-{name}.eta"),
        )

    def write_job_file(self, step_id: str, job: str, text: str) -> Path:
        """The job file fio runs (kept: it says exactly what ran)."""
        self.step_dir(step_id)
        path = self._step_path(step_id, f"{safe_name(job, 'fio job name')}.fio")
        write_atomic(path, text)
        return path

    def iops_logs(self, step_id: str) -> list[Path]:
        """fio's per-job IOPS logs of a step (<job>_iops.<n>.log[.<host>])."""
        return self._glob(step_id, "*_iops.*.log*")

    def eta_tails(self, step_id: str, size: int = 4096) -> list[str]:
        """The last `size` bytes of every fio status-line file of a step (live IOPS)."""
        out: list[str] = []
        try:
            paths = self._glob(step_id, "fio-*.eta")
        except (UnsafePath, ValueError):
            return out
        for path in paths:
            try:
                with path.open("rb") as fh:
                    fh.seek(max(path.stat().st_size - size, 0))
                    out.append(fh.read().decode(errors="replace").replace("\r", "\n"))
            except OSError:
                continue
        return out

    def write_samples(self, step_id: str, samples: Sequence[StepSample]) -> Path:
        self.step_dir(step_id)
        path = self._step_path(step_id, SAMPLES_FILE)
        return write_json(path, [s.model_dump() for s in samples])

    def write_affinity(
        self, step_id: str, observed: Mapping[str, Any], violations: Sequence[str]
    ) -> Path:
        self.step_dir(step_id)
        record = {**observed, VIOLATIONS_KEY: list(violations)}
        return write_json(self._step_path(step_id, AFFINITY_FILE), record)

    def read_affinity(self, step_id: str) -> dict[str, Any]:
        try:
            path = self._step_path(step_id, AFFINITY_FILE)
            data = read_json(path)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("ignoring the affinity record of step %s: %s", step_id, exc)
            return {}
        return data if isinstance(data, dict) else {}

    def affinity_violations(self) -> bool:
        """True when any step saw an OSD and a fio thread share CPUs (or leave their sets)."""
        return any(self.read_affinity(step_id).get(VIOLATIONS_KEY) for step_id in self._step_ids())

    def _step_ids(self) -> list[str]:
        """Names of the real step directories (links and odd names left out)."""
        steps = self.root / STEPS_DIR
        if steps.is_symlink() or not steps.is_dir():
            return []
        return sorted(
            e.name
            for e in steps.iterdir()
            if e.is_dir() and not e.is_symlink() and is_safe_name(e.name)
        )

    def report_dir(self) -> Path:
        return self.path(REPORT_DIR)

    def write_report_file(self, name: str, data: str | bytes) -> Path:
        """A file of the run's report (summary, tables, PNG curves), written atomically."""
        self._dir(REPORT_DIR)
        return write_atomic(self.path(REPORT_DIR, safe_name(name, "report file")), data)

    def running_step(self) -> str:
        """The id of the step status.json says is running, if its result is not in yet."""
        current = self.read_status().current_step
        if not current or not is_safe_name(current):
            return ""
        done = (self.root / STEPS_DIR / current / RESULT_FILE).exists()
        return "" if done else current

    def last_progress(self) -> float:
        """Unix time of the newest of: a finished step's result, status.json's updatedAt."""
        times = []
        for step_id in self._step_ids():
            with contextlib.suppress(OSError):
                times.append((self.root / STEPS_DIR / step_id / RESULT_FILE).stat().st_mtime)
        updated = self.read_status().updated()
        return max([*times, *([updated] if updated is not None else [])], default=0.0)


@dataclass(frozen=True)
class FioPaths:
    output: Path
    stderr: Path
    eta: Path


def _read_result(path: Path) -> StepResult:
    """One result.json, checked; ValueError (or OSError) says why it cannot be used."""
    result = StepResult.from_json_dict(read_json(path))
    if result.step_id != path.parent.name:
        raise cj.ResultFormatError(
            f"step_id is {result.step_id!r}, not {path.parent.name!r} (its directory)"
        )
    if not is_safe_name(result.workload):
        raise cj.ResultFormatError(
            f"workload {result.workload!r} is not a plain name (letters, digits, . _ -): "
            "reports name files after it"
        )
    return result
