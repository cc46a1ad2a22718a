"""The results directory: everything a report needs, as JSON files, so a run can resume
and reports can be recomputed from the files alone.

    <root>/run.json                     RunInfo and the executor's extra dict
    <root>/steps/<step_id>/result.json  StepResult.to_dict(); present = step complete
    <root>/steps/<step_id>/fio-*.json   fio's raw output, one per fio process
    <root>/steps/<step_id>/samples.json the resource samples taken during the step

Every file is written to a temporary name and renamed into place, so a run killed
mid-write never leaves a half-written result.json that would count as complete.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from crimsonbench.results.types import FioSummary, ResourceSample, RunInfo, StepResult

log = logging.getLogger(__name__)

RUN_FILE = "run.json"
STEPS_DIR = "steps"
RESULT_FILE = "result.json"
SAMPLES_FILE = "samples.json"

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_FIO_FLOATS = frozenset(f.name for f in fields(FioSummary) if f.type == "float")


class ResultStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

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
        return _write_json(path, _nan_to_none(result.to_dict()))

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
        _write_text(path, text)
        return path

    def fio_outputs(self, step_id: str) -> list[Path]:
        return sorted((self.root / STEPS_DIR / _safe(step_id, "step id")).glob("fio-*.json"))

    def write_samples(self, step_id: str, samples: Sequence[ResourceSample]) -> Path:
        return _write_json(self.step_dir(step_id) / SAMPLES_FILE, [asdict(s) for s in samples])

    def read_samples(self, step_id: str) -> list[ResourceSample]:
        path = self.root / STEPS_DIR / _safe(step_id, "step id") / SAMPLES_FILE
        return [ResourceSample(**s) for s in json.loads(path.read_text())]


def _read_result(path: Path) -> StepResult | None:
    try:
        data = json.loads(path.read_text())
        result = StepResult.from_dict(_none_to_nan(data))
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
    _write_text(path, json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n")
    return path


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


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


def _nan_to_none(d: dict[str, Any]) -> dict[str, Any]:
    # A percentile fio did not report is NaN in memory and null on disk.
    fio = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d["fio"].items()}
    return {**d, "fio": fio}


def _none_to_nan(d: dict[str, Any]) -> dict[str, Any]:
    fio = {k: (math.nan if v is None and k in _FIO_FLOATS else v) for k, v in d["fio"].items()}
    return {**d, "fio": fio}
