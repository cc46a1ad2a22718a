"""A step's earlier attempts, kept beside the one stored: each suspect attempt
sweep.rerunSuspect dropped (what it measured and why it was not kept), and on Kubernetes
each attempt dropped unmeasured (an OSD restarted during it). There the run's record keeps
a dropped attempt as one bounded line of text (suspect_attempt), read back here as
untrusted input (the status is writable by others)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

from crimsonbench.results import checked_json as cj
from crimsonbench.results.types import StepResult
from crimsonbench.results.validity import FAULT, SUSPECT, VALIDITY, Reason


def with_earlier_attempts(result: StepResult, earlier: Sequence[StepResult]) -> StepResult:
    """result, recording the earlier (suspect) attempts of its step (sweep.rerunSuspect):
    each one's throughput and the reasons it was not kept."""
    if not earlier:
        return result
    attempts = [
        {
            "iops": round(e.fio.iops, 1),
            "bw_mib_s": round(e.fio.bw_mib_s, 2),
            "verdict": (e.extra.get(VALIDITY) or {}).get("verdict", ""),
            "reasons": (e.extra.get(VALIDITY) or {}).get("reasons", []),
        }  # fmt: skip
        for e in earlier
    ]
    v = dict(result.extra.get(VALIDITY) or {})
    v["attempts"] = attempts
    return replace(result, extra={**result.extra, VALIDITY: v})


# On Kubernetes a dropped attempt is one line of text in the run's record (status
# record.stepRetries: bounded strings); a suspect one carries what it measured as JSON.
SUSPECT_ATTEMPT = "suspect "
_ATTEMPT_REASONS = 4
_ATTEMPT_DETAIL = 160  # characters of each reason's detail: the line stays under 1000


def suspect_attempt(result: StepResult) -> str:
    """The record's line for a suspect attempt dropped to run the step again."""
    raw = result.extra.get(VALIDITY) or {}
    reasons = [
        {**r, "detail": cj.one_line(str(r.get("detail", "")))[:_ATTEMPT_DETAIL]}
        for r in raw.get("reasons", [])[:_ATTEMPT_REASONS]
    ]
    slim = {"iops": round(result.fio.iops, 1), "bw_mib_s": round(result.fio.bw_mib_s, 2),
            "reasons": reasons}  # fmt: skip
    return SUSPECT_ATTEMPT + json.dumps(slim, separators=(",", ":"))


def is_suspect_attempt(line: str) -> bool:
    return line.startswith(SUSPECT_ATTEMPT)


def with_dropped_attempts(result: StepResult, why: Sequence[str]) -> StepResult:
    """result, recording the attempts of its step dropped before it (on Kubernetes): a
    suspect one (sweep.rerunSuspect) with what it measured and its reasons, one dropped
    unmeasured (an OSD restarted during it) as a fault saying why; in the order they ran,
    after any attempts already recorded."""
    if not why:
        return result
    v = dict(result.extra.get(VALIDITY) or {})
    v["attempts"] = [*v.get("attempts", []), *(dropped_attempt(w) for w in why)]
    return replace(result, extra={**result.extra, VALIDITY: v})


def dropped_attempt(line: str) -> dict[str, Any]:
    if is_suspect_attempt(line):
        try:
            slim = json.loads(line[len(SUSPECT_ATTEMPT) :])
            iops, bw, reasons = float(slim["iops"]), float(slim["bw_mib_s"]), slim["reasons"]
            if not (math.isfinite(iops) and math.isfinite(bw)) or not all(
                isinstance(r, dict) for r in reasons
            ):
                raise ValueError("not what suspect_attempt writes")
            return {"iops": iops, "bw_mib_s": bw, "verdict": SUSPECT, "reasons": list(reasons)}
        except (ValueError, KeyError, TypeError):
            pass  # a record edited by hand, or cut: said as it is below
    return {"iops": None, "bw_mib_s": None, "verdict": "dropped",
            "reasons": [asdict(Reason(FAULT, cj.one_line(line)[:500], 1.0, 0.0))]}  # fmt: skip
