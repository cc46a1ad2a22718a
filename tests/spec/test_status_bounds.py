"""A run's status stays bounded however long the run goes (issue 36): every field of it
has a bound in the CRD, and what grows with the run (retries, messages, step summaries) is
cut or keeps its newest entries when the operator writes it, so a status patch is never
refused for its size (past etcd's 1.5 MiB no later patch goes through, and the run could
never end)."""

from __future__ import annotations

import json
from typing import Any

from crimsonbench.controller.record import RunRecord
from crimsonbench.spec.crd import build_crd
from crimsonbench.spec.status import (
    CUT,
    MESSAGE_CHARS,
    RETRIED_STEPS,
    RETRY_REASONS,
    STATUS_STEP_SUMMARIES,
    BenchmarkRunStatus,
)


def unbounded(node: Any, path: str = "status") -> list[str]:
    """Every string without maxLength (or enum, or an anchored pattern), array without
    maxItems and map without maxProperties in a schema."""
    kind, found = node.get("type"), []
    bounded_pattern = str(node.get("pattern", "")).endswith(")$")  # ^(a|b)$
    if kind == "string" and not ({"maxLength", "enum"} & node.keys()) and not bounded_pattern:
        found.append(path)
    if kind == "array":
        found += [path] if "maxItems" not in node else []
        found += unbounded(node["items"], f"{path}[]")
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        found += [path] if "maxProperties" not in node else []
        found += unbounded(node["additionalProperties"], f"{path}.*")
    for key, child in (node.get("properties") or {}).items():
        found += unbounded(child, f"{path}.{key}")
    return found


def test_every_field_of_the_status_is_bounded_in_the_crd() -> None:
    version = build_crd()["spec"]["versions"][0]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert unbounded(status) == []


def test_the_check_finds_an_unbounded_field() -> None:
    schema = {"type": "object", "properties": {
        "a": {"type": "string"}, "b": {"type": "array", "items": {"type": "integer"}},
        "c": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}},
        "d": {"type": "string", "pattern": "^(x|y)$"}}}  # fmt: skip
    assert unbounded(schema, "s") == ["s.a", "s.b", "s.c"]


def test_a_long_runs_status_keeps_its_newest_and_stays_small() -> None:
    """Ten thousand retried steps, a thousand step summaries, messages of a megabyte:
    the status as the operator writes it stays under 256 KiB (etcd takes 1.5 MiB for the
    whole object, the spec and kopf's annotations with it)."""
    rec = RunRecord.load({})
    status, book = rec.status, rec.book
    for i in range(10_000):  # as step_loop._retry writes them, one step at a time
        book.step_retries = {**book.step_retries, f"step-{i}": ["osd.0 restarted " * 20] * 20}
    assert len(book.step_retries) == RETRIED_STEPS
    assert list(book.step_retries)[-1] == "step-9999"  # the running step is never dropped
    assert all(len(r) == RETRY_REASONS for r in book.step_retries.values())
    status.message = status.failure = "x" * 1_000_000
    assert len(status.message) == MESSAGE_CHARS and status.message.endswith(CUT)
    for kind in ("Planned", "ClusterFree", "RolledOut", "StepRetried", "Stalled", "Succeeded"):
        rec.condition(kind, False, "Why", "a job's log " * 100_000)
    summaries = [{"id": f"w-qd{i:03d}-r1", "workload": "w", "iodepth": 1} for i in range(1000)]
    status.steps = BenchmarkRunStatus.model_validate({"steps": summaries}).steps
    assert len(status.steps) == STATUS_STEP_SUMMARIES and status.steps[-1].id == "w-qd999-r1"
    book.planned_spec = json.dumps({"a": "b" * 1000})
    size = len(json.dumps(rec.status_patch()).encode())
    assert size < 256 * 1024, size
    # what the API server returns is read back as it was written
    again = RunRecord.load(json.loads(json.dumps(rec.status_patch())))
    assert again.status_patch() == {}
