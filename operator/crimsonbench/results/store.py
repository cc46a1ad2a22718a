"""The results directory: everything a report needs, as JSON files, so a run can resume
and reports can be recomputed from the files alone. This module owns every file name in
it; the local runner, `crimsonbench fetch` (a Kubernetes run), the metrics collector and
the reports all go through ResultStore.

    <root>/spec.json                      the BenchmarkRun spec the results belong to
    <root>/plan.json                      what the planner decided (CPU sets, options, steps)
    <root>/run.json                       RunInfo and the executor's extra dict
    <root>/status.json                    phase, progress, current step (as the operator's)
    <root>/.lock                          held by the one run writing here
    <root>/steps/<step_id>/result.json    StepResult.to_dict(); present = step complete
    <root>/steps/<step_id>/fio-<client>.json  fio's raw output, one per fio client
    <root>/steps/<step_id>/fio-<client>.eta   fio's status lines (live IOPS while it runs)
    <root>/steps/<step_id>/<job>.fio          the job files fio ran
    <root>/steps/<step_id>/<job>_iops.N.log   fio's per-second IOPS log of each job
    <root>/steps/<step_id>/samples.json   the resource samples taken during the step
    <root>/steps/<step_id>/affinity.json  CPU affinity seen on every thread, and violations

Every file is written to a temporary name and renamed into place, so a run killed
mid-write never leaves a half-written result.json that would count as complete.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from crimsonbench.results.types import ResourceSample, RunInfo, StepResult

log = logging.getLogger(__name__)

RUN_FILE = "run.json"
SPEC_FILE = "spec.json"
PLAN_FILE = "plan.json"
STATUS_FILE = "status.json"
LOCK_FILE = ".lock"
STEPS_DIR = "steps"
RESULT_FILE = "result.json"
SAMPLES_FILE = "samples.json"
AFFINITY_FILE = "affinity.json"
REPORT_DIR = "report"  # what `crimsonbench report` derives from the rest
VIOLATIONS_KEY = "violations"  # the list of CPU-affinity violations in affinity.json

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


class NotAResultsDirectory(ValueError):
    """The directory holds no results (the message says what it lacks)."""


class ResultStore:
    def __init__(self, root: Path) -> None:
        # absolute: fio runs with its step directory as working directory (its IOPS logs
        # land there), so a relative --output would be resolved twice and not be found
        self.root = Path(root).absolute()

    def check_readable(self) -> None:
        """Raise NotAResultsDirectory unless this looks like a results directory."""
        if not self.root.is_dir():
            raise NotAResultsDirectory(f"{self.root} is not a directory")
        if not os.access(self.root, os.R_OK | os.X_OK):
            raise NotAResultsDirectory(f"{self.root} is not readable (permissions)")
        if not (self.root / RUN_FILE).exists() and not (self.root / STEPS_DIR).is_dir():
            raise NotAResultsDirectory(
                f"{self.root} is not a results directory: it has neither {RUN_FILE} nor "
                f"{STEPS_DIR}/ (give the directory `crimsonbench run` or `fetch` wrote)"
            )

    def clear(self) -> None:
        """Delete every result (the lock stays: its holder is the caller)."""
        if not self.root.is_dir():
            return
        for entry in self.root.iterdir():
            if entry.name != LOCK_FILE:
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()

    @property
    def lock_path(self) -> Path:
        return self.root / LOCK_FILE

    # ------------------------------------------------------------ spec, plan, status

    def write_spec(self, spec: Mapping[str, Any]) -> Path:
        return _write_json(self.root / SPEC_FILE, dict(spec))

    def read_spec(self) -> dict[str, Any] | None:
        """The spec the results belong to, or None when none was written yet."""
        return _read_optional(self.root / SPEC_FILE)

    def write_plan(self, summary: Mapping[str, Any]) -> Path:
        return _write_json(self.root / PLAN_FILE, dict(summary))

    def read_plan(self) -> dict[str, Any] | None:
        return _read_optional(self.root / PLAN_FILE)

    def write_status(self, status: Mapping[str, Any]) -> Path:
        return _write_json(self.root / STATUS_FILE, dict(status))

    def read_status(self) -> dict[str, Any]:
        """status.json, or {} while none was written (or it is being replaced)."""
        return _read_optional(self.root / STATUS_FILE) or {}

    # ------------------------------------------------------------ the run

    def write_run_info(self, info: RunInfo, extra: Mapping[str, Any] | None = None) -> Path:
        """extra: anything the reports may use, e.g. {"spec": spec.model_dump(...)}."""
        return _write_json(self.root / RUN_FILE, {"info": asdict(info), "extra": dict(extra or {})})

    def read_run_info(self) -> RunInfo:
        raw = self._read_run()["info"]
        known = {f.name for f in fields(RunInfo)}
        # files from newer versions may carry more keys; older ones fewer (defaults apply)
        return RunInfo(**{k: v for k, v in raw.items() if k in known})

    def read_run_extra(self) -> dict[str, Any]:
        return dict(self._read_run().get("extra") or {})

    def _read_run(self) -> dict[str, Any]:
        data = json.loads((self.root / RUN_FILE).read_text())
        if not isinstance(data, dict) or not isinstance(data.get("info"), dict):
            raise ValueError(f"{self.root / RUN_FILE} has no 'info' object")
        return data

    # ------------------------------------------------------------ steps

    def step_dir(self, step_id: str) -> Path:
        """The step's directory, created if needed."""
        path = self.root / STEPS_DIR / _safe(step_id, "step id")
        path.mkdir(parents=True, exist_ok=True)
        return path

    def write_step(self, result: StepResult) -> Path:
        """Mark the step complete; write its raw files first."""
        path = self.step_dir(result.step_id) / RESULT_FILE
        return _write_json(path, result.to_json_dict())

    def completed_steps(self) -> dict[str, StepResult]:
        """step_id -> result of every step whose result.json is whole and consistent."""
        out: dict[str, StepResult] = {}
        steps = self.root / STEPS_DIR
        if not steps.is_dir():
            return out
        for path in sorted(steps.glob(f"*/{RESULT_FILE}")):
            result = _read_result(path)
            if result is not None:
                out[result.step_id] = result
        return out

    def load_results(self) -> list[StepResult]:
        return [r for _, r in sorted(self.completed_steps().items())]

    # ------------------------------------------------------------ raw files

    def write_fio_output(self, step_id: str, name: str, text: str) -> Path:
        """fio's stdout as captured (possibly with notes before the JSON)."""
        path = self.step_dir(step_id) / f"fio-{_safe(name, 'fio job name')}.json"
        write_atomic(path, text)
        return path

    def fio_outputs(self, step_id: str) -> list[Path]:
        return sorted((self.root / STEPS_DIR / _safe(step_id, "step id")).glob("fio-*.json"))

    def fio_paths(self, step_id: str, client: str) -> FioPaths:
        """Where the fio of one client keeps its output and status lines in a step."""
        d = self.step_dir(step_id)
        name = _safe(client, "fio client name")
        return FioPaths(
            output=d / f"fio-{name}.json",
            stderr=d / f"fio-{name}.stderr",
            eta=d / f"fio-{name}.eta",
        )

    def write_job_file(self, step_id: str, job: str, text: str) -> Path:
        """The job file fio runs (kept: it says exactly what ran)."""
        path = self.step_dir(step_id) / f"{_safe(job, 'fio job name')}.fio"
        write_atomic(path, text)
        return path

    def iops_logs(self, step_id: str) -> list[Path]:
        """fio's per-job IOPS logs of a step (<job>_iops.<n>.log[.<host>])."""
        return sorted((self.root / STEPS_DIR / _safe(step_id, "step id")).glob("*_iops.*.log*"))

    def eta_tails(self, step_id: str, size: int = 4096) -> list[str]:
        """The last `size` bytes of every fio status-line file of a step (live IOPS)."""
        out = []
        for path in sorted((self.root / STEPS_DIR / _safe(step_id, "step id")).glob("fio-*.eta")):
            try:
                with path.open("rb") as fh:
                    fh.seek(max(path.stat().st_size - size, 0))
                    out.append(fh.read().decode(errors="replace").replace("\r", "\n"))
            except OSError:
                continue
        return out

    def write_samples(self, step_id: str, samples: Sequence[ResourceSample]) -> Path:
        return _write_json(self.step_dir(step_id) / SAMPLES_FILE, [asdict(s) for s in samples])

    def read_samples(self, step_id: str) -> list[ResourceSample]:
        path = self.root / STEPS_DIR / _safe(step_id, "step id") / SAMPLES_FILE
        return [ResourceSample(**s) for s in json.loads(path.read_text())]

    def write_affinity(
        self, step_id: str, observed: Mapping[str, Any], violations: Sequence[str]
    ) -> Path:
        record = {**observed, VIOLATIONS_KEY: list(violations)}
        return _write_json(self.step_dir(step_id) / AFFINITY_FILE, record)

    def read_affinity(self, step_id: str) -> dict[str, Any]:
        path = self.root / STEPS_DIR / _safe(step_id, "step id") / AFFINITY_FILE
        return _read_optional(path) or {}

    def affinity_violations(self) -> bool:
        """True when any step saw an OSD and a fio thread share CPUs (or leave their sets)."""
        for path in self.root.glob(f"{STEPS_DIR}/*/{AFFINITY_FILE}"):
            if (_read_optional(path) or {}).get(VIOLATIONS_KEY):
                return True
        return False

    def report_dir(self) -> Path:
        return self.root / REPORT_DIR

    def write_report_file(self, name: str, data: str | bytes) -> Path:
        """A file of the run's report (summary, tables, PNG curves), written atomically."""
        return write_atomic(self.report_dir() / _safe(name, "report file"), data)

    def running_step(self) -> str:
        """The id of the step status.json says is running, if its result is not in yet."""
        current = str(self.read_status().get("currentStep") or "")
        if not current or not _SAFE_NAME.match(current):
            return ""
        done = (self.root / STEPS_DIR / current / RESULT_FILE).exists()
        return "" if done else current

    def last_progress(self) -> float:
        """Unix time of the newest of: a finished step's result, status.json's updatedAt."""
        times = [p.stat().st_mtime for p in self.root.glob(f"{STEPS_DIR}/*/{RESULT_FILE}")]
        with contextlib.suppress(KeyError, TypeError, ValueError):
            times.append(dt.datetime.fromisoformat(self.read_status()["updatedAt"]).timestamp())
        return max(times, default=0.0)


@dataclass(frozen=True)
class FioPaths:
    output: Path
    stderr: Path
    eta: Path


def _read_optional(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("ignoring %s: %s", path, exc)
        return None
    return data if isinstance(data, dict) else None


def _read_result(path: Path) -> StepResult | None:
    try:
        data = json.loads(path.read_text())
        result = StepResult.from_json_dict(data)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("ignoring %s: not a complete step result (%s)", path, exc)
        return None
    if result.step_id != path.parent.name:
        log.warning("ignoring %s: it is the result of step %s", path, result.step_id)
        return None
    return result


def _safe(name: str, what: str) -> str:
    if not _SAFE_NAME.match(name) or ".." in name:
        raise ValueError(f"{what} {name!r} is not a safe file name (letters, digits, . _ -)")
    return name


def _write_json(path: Path, data: Any) -> Path:
    # allow_nan=False: the files stay strict JSON for jq and other tools
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n")
    return path


def write_atomic(path: Path, data: str | bytes) -> Path:
    """PATH holds DATA whole or keeps what it held: a temporary file, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)
    return path


def _fsync_dir(path: Path) -> None:
    # makes the rename itself survive a power cut; not every filesystem allows it
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
