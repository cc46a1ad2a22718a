"""What a stored step was measured under, so that a resumed run keeps it only when its
spec would measure the same (resume by content, as CBT keys its results).

A step's key (plan.types.step_key) says what varies from step to step: the workload, the
iodepth, the repeat. Everything else in the spec is the steps' meaning: the OSDs, the
clients, the target, runtime and ramp, every workload's definition (a custom workload's
name stays when its bs changes). Only the sweep's axes and its rules for which steps run
are left out: adding iodepths, repeats or workloads, or changing earlyExit, latencyTarget
or kneeSearch, keeps every finished step; anything else starts the run over.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from crimsonbench.errors import InvalidSpec
from crimsonbench.spec.models import BenchmarkRunSpec, validate_spec

# spec.sweep fields that say which steps exist and which of them run, not what one measures
SWEEP_AXES = ("iodepths", "repeats", "earlyExit", "latencyTarget", "kneeSearch")
_SHOWN = 120  # characters of a value in a message


def meaning(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A spec (camelCase, as spec.json and the API hold it) reduced to what its steps'
    results depend on; workloads become {key: definition}."""
    out = {k: v for k, v in spec.items() if k not in ("sweep", "workloads")}
    out["sweep"] = {k: v for k, v in (spec.get("sweep") or {}).items() if k not in SWEEP_AXES}
    out["workloads"] = {
        str(w.get("preset") or w.get("name") or ""): w for w in spec.get("workloads") or []
    }
    return out


def meaning_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """What differs between two specs' meanings, one "spec.<field>: old -> new" each (a
    workload only in one of them is an axis, not a change). Both are read as specs first,
    so an older file without a field that now has a default compares equal."""
    old, new = meaning(_normalized(before, "the stored spec")), meaning(_normalized(after, "spec"))
    old_w, new_w = old.pop("workloads"), new.pop("workloads")
    out = _differences(old, new, "spec")
    for key in sorted(old_w.keys() & new_w.keys()):
        out += _differences(old_w[key], new_w[key], f"spec.workloads[{key}]")
    return out


def _normalized(spec: Mapping[str, Any], what: str) -> dict[str, Any]:
    try:
        model = validate_spec(dict(spec))
    except InvalidSpec as exc:
        raise InvalidSpec(
            exc.field, f"{what} cannot be read as a spec today: {exc.message}"
        ) from None
    return model.model_dump(mode="json", by_alias=True)


def _differences(old: Any, new: Any, path: str) -> list[str]:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out: list[str] = []
        for key in sorted(old.keys() | new.keys()):
            out += _differences(old.get(key), new.get(key), f"{path}.{key}")
        return out
    if old == new:
        return []
    return [f"{path}: {_shown(old)} -> {_shown(new)}"]


def _shown(value: Any) -> str:
    text = "unset" if value is None else json.dumps(value, sort_keys=True)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def effective_spec(
    now: Mapping[str, Any], planned: str
) -> tuple[BenchmarkRunSpec | None, InvalidSpec | None]:
    """The spec a run goes on with, and why an edit of it is refused (None: it is not).

    Until the run is planned (planned == ""), its spec as it is now. After, the spec is
    frozen but for the sweep's axes (more iodepths, repeats, workloads; the rules for which
    steps run): an edit that keeps every step's meaning is taken; one that changes it, or
    that no longer validates (a value the CRD admits and Python refuses, or a rule an
    operator upgrade added), is refused, and the run goes on with the planned spec (None if
    even that no longer validates: then only its cleanup can run, from its undo record)."""
    try:
        current: BenchmarkRunSpec | InvalidSpec = validate_spec(dict(now))
    except InvalidSpec as exc:
        current = exc
    if not planned:
        return (None, current) if isinstance(current, InvalidSpec) else (current, None)
    try:
        frozen: BenchmarkRunSpec | None = validate_spec(json.loads(planned))
    except (InvalidSpec, ValueError):
        frozen = None
    if isinstance(current, InvalidSpec):
        return frozen, InvalidSpec(
            current.field,
            f"the spec was edited after the run was planned and no longer validates "
            f"({current.message}); the run stops and restores the cluster from its record",
        )
    if frozen is None:
        return None, InvalidSpec(
            "spec",
            "the spec the run was planned with no longer validates under this operator (a "
            "rule it added since); the run stops and restores the cluster from its record",
        )
    changes = meaning_changes(json.loads(planned), current.model_dump(mode="json", by_alias=True))
    if changes:
        return frozen, InvalidSpec(
            "spec",
            f"the spec changed what the run's steps measure after it was planned "
            f"({'; '.join(changes[:10])}): the steps stored so far would not compare with "
            "the rest, so the run stops here (its results are kept) and restores the "
            "cluster; create a new BenchmarkRun for this spec",
        )
    return current, None
