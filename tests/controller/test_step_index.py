"""The operator's in-memory copies of a run's stored steps (step_index.py): what the sweep,
the status summary and the metrics read, the same whether a step was just stored or read
back from its ConfigMap, without the rows only fetch and the reports need."""

from __future__ import annotations

import json
from dataclasses import replace

from step_results import result

from crimsonbench.controller.step_index import StepIndex
from crimsonbench.results.slim_steps import RunSteps
from crimsonbench.results.types import ResourceSummary, StepResult


def wide(index: int) -> StepResult:
    base = result(index, "randread4k", 1 + index, 1000.0 + index)
    clients = {f"node-{c}": replace(base.fio, iops=100.0 - c) for c in range(4)}
    return replace(base, step_id=base.key, clients=clients, start_skew_ms=3.5,
                   extra={"wall_seconds": 12.5, "iops_per_second": [1.0] * 300})  # fmt: skip


def test_a_stored_step_and_the_same_read_back_are_kept_alike() -> None:
    stored, read = RunSteps(), RunSteps()
    for i in range(3):
        stored.add(wide(i))
        read.add_json(json.loads(json.dumps(wide(i).to_json_dict())))
    for known in (stored, read):
        assert list(known.results) == [wide(i).key for i in range(3)]
        kept = known.results[wide(1).key]
        assert kept.clients == {} and kept.extra == {}  # slim
        assert kept.start_skew_ms == 3.5 and kept.resources == wide(1).resources
        assert known.beside[wide(1).step_id] == (4, "node-3", 12.5)  # the fewest IOPS
    assert json.dumps(read.results[wide(2).key].to_json_dict(), sort_keys=True) == json.dumps(
        stored.results[wide(2).key].to_json_dict(), sort_keys=True
    )


def test_equal_resources_are_one_object_and_a_positional_id_keeps_its_key() -> None:
    known = RunSteps()
    same = ResourceSummary(0.0, 0.0, 0.0, 0)  # no metrics-server: every step alike
    older = replace(result(7, "randread4k", 16, 1.0), resources=same)  # "0007-randread4k-..."
    known.add(older)
    known.add(replace(result(8, "randread4k", 32, 1.0), resources=ResourceSummary(0, 0, 0, 0)))
    a, b = known.results.values()
    assert a.resources is b.resources
    assert older.step_id != older.key and list(known.results)[0] == older.key
    assert known.beside[older.step_id] == (1, "", None)


def test_runs_are_kept_by_uid_until_forgotten() -> None:
    index = StepIndex()
    index.put("u1", RunSteps())
    assert index.get("u1") is not None and len(index) == 1
    index.forget("u1")
    index.forget("u1")  # twice: fine
    assert index.get("u1") is None and len(index) == 0
