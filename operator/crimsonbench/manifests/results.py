"""Step results as ConfigMaps, and the summary the operator writes into .status.

The full results (every StepResult, as results.store writes them to disk) are kept in
ConfigMaps `<run>-results-0`, `<run>-results-1`, ...: one JSON list of steps per
ConfigMap, split so that each stays under the API server's 1 MiB object limit.
.status only carries a summary: the most recent steps, the peak of every workload.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, fields
from typing import Any

from crimsonbench.manifests.naming import GROUP, dns_name, labels, metadata
from crimsonbench.results.types import RunInfo, StepResult

RESULTS_KEY = "results.json"
RUN_INFO_KEY = "run.json"  # RunInfo of the run, as results.store writes it
PLAN_KEY = "plan.json"  # plan.summary.plan_summary of the run
ANNOTATION_PART = f"{GROUP}/part"
ANNOTATION_PARTS = f"{GROUP}/parts"
ANNOTATION_STEPS = f"{GROUP}/steps"
# Bytes of JSON per ConfigMap. The API server allows 1 MiB of keys + values per ConfigMap
# (validateConfigMap); the request body escapes the quotes once more, which its 3 MiB body
# limit absorbs, and etcd stores protobuf (no escaping) under its 1.5 MiB limit.
DEFAULT_LIMIT = 900_000


# ---------------------------------------------------------------- ConfigMaps


def results_configmap_name(run: str, part: int) -> str:
    """`<run>-results-<part>`: a run's name is a valid object name, so this is one too
    unless it gets too long (then it is shortened with a hash)."""
    name = f"{run}-results-{part}"
    return name if len(name) <= 253 else dns_name(run, "results", str(part), max_len=253)


def results_configmaps(
    run: str,
    results: Sequence[StepResult],
    limit_bytes: int = DEFAULT_LIMIT,
    *,
    namespace: str | None = None,
) -> list[dict[str, Any]]:
    """Every step result, in step order, as compact JSON lists over as many ConfigMaps as
    needed, each holding at most limit_bytes of JSON. NaN (a percentile fio did not report)
    is stored as null, as results.store does on disk. At least one ConfigMap (maybe `[]`).
    Raises ValueError when one step alone is larger than limit_bytes."""
    rows = [_encode(r) for r in sorted(results, key=lambda r: r.step_id)]
    chunks: list[list[str]] = [[]]
    size = 2  # the brackets
    for row in rows:
        need = len(row.encode()) + (1 if chunks[-1] else 0)  # the comma
        if 2 + len(row.encode()) > limit_bytes:
            raise ValueError(f"one step result is {len(row)} bytes, over limit_bytes {limit_bytes}")
        if size + need > limit_bytes:
            chunks.append([])
            size = 2
            need = len(row.encode())
        chunks[-1].append(row)
        size += need
    parts = len(chunks)
    out = []
    for i, chunk in enumerate(chunks):
        annotations = {
            ANNOTATION_PART: str(i),
            ANNOTATION_PARTS: str(parts),
            ANNOTATION_STEPS: str(len(chunk)),
        }
        out.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": metadata(
                    results_configmap_name(run, i), namespace, labels(run, "results"), annotations
                ),
                "data": {RESULTS_KEY: "[" + ",".join(chunk) + "]"},
            }
        )
    return out


def read_results_configmaps(configmaps: Iterable[Mapping[str, Any]]) -> list[StepResult]:
    """The inverse of results_configmaps (parts in any order), in step order. Raises
    ValueError when a part is missing."""
    by_part: dict[int, Mapping[str, Any]] = {}
    expected = None
    for cm in configmaps:
        annotations = (cm.get("metadata") or {}).get("annotations") or {}
        by_part[int(annotations[ANNOTATION_PART])] = cm
        expected = int(annotations[ANNOTATION_PARTS])
    if expected is None:
        return []
    missing = sorted(set(range(expected)) - set(by_part))
    if missing:
        raise ValueError(f"results ConfigMap part(s) {missing} of {expected} are missing")
    out: list[StepResult] = []
    for i in range(expected):
        out += [_decode(d) for d in json.loads(by_part[i]["data"][RESULTS_KEY])]
    return sorted(out, key=lambda r: r.step_id)


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
