"""Step results as ConfigMaps, and the summary the operator writes into .status.

Every step's full result (a StepResult, as results.store writes it to disk) is kept in a
ConfigMap of its own, `<run>-step-<step key>`, written once when the step ends and never
again: a run's results are never rewritten nor read whole per tick. A step whose JSON is
over one ConfigMap (the API server's 1 MiB) is cut into parts, `...-p1`, `...-p2`, written
before its own ConfigMap (the head), which comes last and says how many parts there are and
the sha256 of the whole: a head found means a whole result, or one seen to be incomplete
(then the step runs again), never a mix.

.status only carries a summary: the most recent steps, the peak of every workload.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from crimsonbench.manifests.naming import (
    GROUP,
    LABEL_ROLE,
    LABEL_RUN,
    dns_name,
    label_value,
    labels,
    metadata,
)
from crimsonbench.results.types import RunInfo, StepResult

RUN_INFO_KEY = "run.json"  # RunInfo of the run, as results.store writes it
PLAN_KEY = "plan.json"  # plan.summary.plan_summary of the run
ANNOTATION_PART = f"{GROUP}/part"
ANNOTATION_PARTS = f"{GROUP}/parts"
ANNOTATION_SHA256 = f"{GROUP}/sha256"  # of a step's whole JSON, on its head
ANNOTATION_STEP_KEY = f"{GROUP}/step-key"
STEP_KEY = "result.json"  # a step's JSON (its head's part, when cut)
PART_KEY = "part.json"  # the JSON of a part after the head
ROLE_STEP = "step-result"  # <run>-step-<key>: one step (the head, when cut in parts)
ROLE_STEP_PART = "step-result-part"  # <run>-step-<key>-pN: the rest of a step's JSON
MAX_STEP_PARTS = 16  # 14 MiB of JSON: a step of 1,024 clients takes ~1.2 MiB
# Bytes of JSON per ConfigMap. The API server allows 1 MiB of keys + values per ConfigMap
# (validateConfigMap); the request body escapes the quotes once more, which its 3 MiB body
# limit absorbs, and etcd stores protobuf (no escaping) under its 1.5 MiB limit.
DEFAULT_LIMIT = 900_000


# ---------------------------------------------------------------- ConfigMaps


def results_selector(run: str) -> str:
    """Every ConfigMap holding the run's results: the steps' heads and their parts."""
    roles = ",".join((ROLE_STEP, ROLE_STEP_PART))
    return f"{LABEL_RUN}={label_value(run)},{LABEL_ROLE} in ({roles})"


def owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    """Is the object the run's own: its ownerReferences name the run's uid. ConfigMaps are
    found by the run's name; one that is not its own (an earlier run of that name, deleted
    and made again before the garbage collector came, or orphaned; another's object
    labelled alike) is never read as the run's results, nor overwritten."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return any(isinstance(r, Mapping) and r.get("uid") == uid for r in refs)


def not_owned(objs: Iterable[Mapping[str, Any]], uid: str) -> list[str]:
    """The names of those that are not the run's (owned_by), to say they were left out."""
    return [str((o.get("metadata") or {}).get("name")) for o in objs if not owned_by(o, uid)]


def step_selector(run: str) -> str:
    """The heads of the run's steps (one per stored step)."""
    return f"{LABEL_RUN}={label_value(run)},{LABEL_ROLE}={ROLE_STEP}"


def step_configmap_name(run: str, key: str, part: int = 0) -> str:
    """`<run>-step-<key>` (part 0: the head), `...-p<part>` for the parts after it; made a
    valid name (with a hash) when the run's name or the key do not fit as they are."""
    head = dns_name(run, "step", key, max_len=249)  # room for "-p15"
    return head if part == 0 else f"{head}-p{part}"


class StepTooLarge(ValueError):
    """A step's JSON is over MAX_STEP_PARTS ConfigMaps."""


def step_configmaps(
    run: str, result: StepResult, *, namespace: str | None = None,
    limit_bytes: int = DEFAULT_LIMIT, owner: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """One step's result as ConfigMaps, to create in this order: the parts after the first
    (only for a JSON over limit_bytes), then the head, which names the step, how many parts
    there are and the sha256 of the whole (the commit: a reader trusts nothing without it).
    Each owned by `owner` (an ownerReference: they go with the run). StepTooLarge over
    MAX_STEP_PARTS."""
    text = _encode(result)  # ASCII (json.dumps escapes the rest): cut anywhere
    chunks = [text[i : i + limit_bytes] for i in range(0, len(text), limit_bytes)]
    if len(chunks) > MAX_STEP_PARTS:
        raise StepTooLarge(
            f"step {result.key}: its result is {len(text):,} bytes of JSON, over the "
            f"{MAX_STEP_PARTS} ConfigMaps of {limit_bytes:,} bytes a step may take"
        )
    key = result.key
    out = [
        _configmap(step_configmap_name(run, key, i), namespace, labels(run, ROLE_STEP_PART, key),
                   {ANNOTATION_PART: str(i), ANNOTATION_STEP_KEY: key}, {PART_KEY: chunk})
        for i, chunk in enumerate(chunks[1:], 1)
    ]  # fmt: skip
    head = {
        ANNOTATION_STEP_KEY: key,
        ANNOTATION_PARTS: str(len(chunks)),
        ANNOTATION_SHA256: hashlib.sha256(text.encode()).hexdigest(),
    }
    name = step_configmap_name(run, key)
    out.append(
        _configmap(name, namespace, labels(run, ROLE_STEP, key), head, {STEP_KEY: chunks[0]})
    )
    if owner is not None:
        for cm in out:
            cm["metadata"]["ownerReferences"] = [dict(owner)]
    return out


def _configmap(
    name: str, namespace: str | None, labels_: dict[str, str], annotations: dict[str, str],
    data: dict[str, str],
) -> dict[str, Any]:  # fmt: skip
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata(name, namespace, labels_, annotations), "data": data}  # fmt: skip


def part_names(head: Mapping[str, Any]) -> list[str]:
    """The names of the parts a head says its step has after it (none for most steps)."""
    meta = head.get("metadata") or {}
    parts = _int((meta.get("annotations") or {}).get(ANNOTATION_PARTS), 1)
    name = str(meta.get("name", ""))
    return [f"{name}-p{i}" for i in range(1, min(parts, MAX_STEP_PARTS))]


def read_step(head: Mapping[str, Any], parts: Mapping[str, Mapping[str, Any]]) -> StepResult:
    """A step from its head and the parts it names (by name); ValueError naming what is
    missing or does not match (the step was being written: it runs again)."""
    return _decode(read_step_json(head, parts))


def read_step_json(head: Mapping[str, Any], parts: Mapping[str, Mapping[str, Any]]) -> Any:
    """read_step's JSON, checked whole against its sha256 but not read as a StepResult."""
    meta = head.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    name = meta.get("name", "?")
    pieces = [str((head.get("data") or {}).get(STEP_KEY, ""))]
    for part in part_names(head):
        found = parts.get(part)
        if found is None:
            raise ValueError(f"ConfigMap {name}: its part {part} is missing")
        pieces.append(str((found.get("data") or {}).get(PART_KEY, "")))
    text = "".join(pieces)
    if hashlib.sha256(text.encode()).hexdigest() != annotations.get(ANNOTATION_SHA256):
        raise ValueError(f"ConfigMap {name}: its parts do not make the result it names")
    return json.loads(text)


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


@dataclass(frozen=True)
class StoredResults:
    """The steps a run's ConfigMaps hold, and what could not be read (its step runs again)."""

    results: list[StepResult]  # step order
    unreadable: list[str]


def read_stored(configmaps: Iterable[Mapping[str, Any]]) -> StoredResults:
    """Every step result among a run's ConfigMaps (results_selector), in step order; a
    head whose parts are not all there, or do not make its sha256, is named in
    `unreadable` (its step runs again)."""
    heads, parts, found, unreadable = [], {}, {}, []
    for cm in configmaps:
        meta = cm.get("metadata") or {}
        role = (meta.get("labels") or {}).get(LABEL_ROLE)
        if role == ROLE_STEP:
            heads.append(cm)
        elif role == ROLE_STEP_PART:
            parts[str(meta.get("name"))] = cm
    for head in heads:
        try:
            result = read_step(head, parts)
        except ValueError as exc:
            unreadable.append(str(exc))
            continue
        found[result.key] = result
    return StoredResults(sorted(found.values(), key=lambda r: r.step_id), unreadable)


def _encode(result: StepResult) -> str:
    return json.dumps(result.to_json_dict(), separators=(",", ":"), sort_keys=True, allow_nan=False)


def _decode(d: dict[str, Any]) -> StepResult:
    return StepResult.from_json_dict(d)


# ---------------------------------------------------------------- what ran


def run_configmap_name(run: str) -> str:
    name = f"{run}-run"
    return name if len(name) <= 253 else dns_name(run, "run", max_len=253)


def run_configmap(
    run: str, info: RunInfo, plan: Mapping[str, Any], *, namespace: str | None = None
) -> dict[str, Any]:
    """`<run>-run`: what ran (RunInfo: flavor, store, Ceph version, start) and the plan
    (CPU sets, Ceph options, steps), written once the run is planned, so that
    `crimsonbench fetch` can rebuild the results directory a local run writes."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(run_configmap_name(run), namespace, labels(run, "run-info"), None),
        "data": {
            RUN_INFO_KEY: json.dumps(asdict(info), sort_keys=True),
            PLAN_KEY: json.dumps(plan, sort_keys=True),
        },
    }


def read_run_configmap(cm: Mapping[str, Any]) -> tuple[RunInfo, dict[str, Any]]:
    """The inverse of run_configmap: (RunInfo, plan summary)."""
    data = cm.get("data") or {}
    raw = json.loads(data[RUN_INFO_KEY])
    known = {f.name for f in fields(RunInfo)}
    return RunInfo(**{k: v for k, v in raw.items() if k in known}), json.loads(data[PLAN_KEY])
