"""What the results store reads and writes next (decisions/stored_steps.py), from the
ConfigMaps manifests/results.py renders: a page at a time, only the run's own heads, the
parts they name, a half-written step left out and named; a step too large stops the run
after what was written before it; the summary counts what is stored. The same store
against a real API server: tests/k8s/test_run_ends.py."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from step_results import many, result

from crimsonbench.controller.decisions.stored_steps import (
    PAGE,
    KeepPage,
    Known,
    ListPage,
    ReadParts,
    ReadView,
    SetSummary,
    StoreView,
    WriteStep,
    next_read,
    next_store,
)
from crimsonbench.errors import ExecutionError
from crimsonbench.manifests.results import step_configmaps, step_selector
from crimsonbench.results.slim_steps import RunSteps
from crimsonbench.results.types import StepResult
from crimsonbench.results.validity import judged
from crimsonbench.spec.models import validate_spec
from crimsonbench.spec.sweep import ValiditySpec

UID = "uid-of-the-run"
OWNER = {"apiVersion": "bench.crimson.ceph.io/v1alpha1", "kind": "BenchmarkRun",
         "name": "r", "uid": UID, "controller": True}  # fmt: skip
SPEC = validate_spec({"target": {"rook": {"clusterName": "c"}}, "client": {"node": "n1"},
                      "workloads": [{"preset": "randread4k"}]})  # fmt: skip


def configmaps(step: StepResult, owner: dict[str, Any] | None = OWNER) -> list[dict[str, Any]]:
    return step_configmaps("r", step, namespace="bench", owner=owner)


def wide(index: int, clients: int) -> StepResult:
    """A step of `clients` rows (~350 bytes each: over 3,000 it takes parts)."""
    base = result(index, "randread4k", 1 + index, 1000.0)
    return replace(base, clients={f"node-{c:04d}": base.fio for c in range(clients)})


def test_the_first_read_lists_the_runs_heads_one_page() -> None:
    assert next_read(ReadView("r", UID)) == [ListPage(step_selector("r"), PAGE, None)]
    after = ReadView("r", UID, token="t1")  # the next page, from the API's continue token
    assert next_read(after) == [ListPage(step_selector("r"), PAGE, "t1")]


def test_a_page_is_kept_and_the_next_one_listed_until_the_api_says_last() -> None:
    steps = many(5)
    heads = [cm for s in steps[:3] for cm in configmaps(s)]
    (keep,) = next_read(ReadView("r", UID, page=tuple(heads), token="t1"))
    assert isinstance(keep, KeepPage) and keep.others == ()
    assert list(keep.steps.results) == [s.key for s in steps[:3]]
    last = [cm for s in steps[3:] for cm in configmaps(s)]
    view = ReadView("r", UID, page=tuple(last), token=None, pages=(keep.steps,))
    (known,) = next_read(view)
    assert isinstance(known, Known)
    assert list(known.steps.results) == [s.key for s in steps]  # both pages, in order
    assert known.steps.results[steps[4].key].clients == {}  # slim


def test_parts_are_read_only_for_the_runs_own_heads_and_a_missing_one_is_named() -> None:
    whole, partless = configmaps(wide(1, 4000)), configmaps(wide(2, 4000))
    another = configmaps(wide(3, 4000), owner={**OWNER, "uid": "another"})
    page = (whole[-1], partless[-1], another[-1])
    (read,) = next_read(ReadView("r", UID, page=page))
    assert isinstance(read, ReadParts)
    assert read.names == (whole[0]["metadata"]["name"], partless[0]["metadata"]["name"])
    parts = {whole[0]["metadata"]["name"]: whole[0]}  # partless's part is gone
    (known,) = next_read(ReadView("r", UID, page=page, parts=parts))
    assert isinstance(known, Known)
    assert list(known.steps.results) == [wide(1, 4000).key]
    assert known.steps.beside[wide(1, 4000).step_id][0] == 4000
    (why,) = known.steps.unreadable
    assert "is missing" in why and partless[-1]["metadata"]["name"] in why
    assert known.others == (another[-1]["metadata"]["name"],)  # named, never read


def test_a_page_of_only_anothers_heads_reads_no_parts() -> None:
    theirs = configmaps(wide(3, 4000), owner={**OWNER, "uid": "another"})
    (known,) = next_read(ReadView("r", UID, page=(theirs[-1],), others=("earlier",)))
    assert isinstance(known, Known) and known.steps.results == {}
    assert known.others == ("earlier", theirs[-1]["metadata"]["name"])


def store_view(results: list[StepResult], known: RunSteps | None = None) -> StoreView:
    planned = tuple(s.key for s in many(8))  # Step.id: what a step measures
    return StoreView("r", "bench", OWNER, SPEC, planned, known or RunSteps(),
                     tuple(results))  # fmt: skip


def test_only_steps_not_stored_are_written_then_the_summary_of_all() -> None:
    steps = many(4)
    known = RunSteps.joined(RunSteps.of(s) for s in steps[:2])
    *writes, summary = next_store(store_view(steps, known))
    assert [w.configmaps for w in writes if isinstance(w, WriteStep)] == [
        tuple(configmaps(s)) for s in steps[2:]
    ]
    assert [list(w.kept.results) for w in writes if isinstance(w, WriteStep)] == [
        [s.key] for s in steps[2:]
    ]
    assert isinstance(summary, SetSummary)
    assert (summary.steps_done, summary.progress) == (4, "4/8")
    assert [s.id for s in summary.summary.steps] == [s.step_id for s in steps]
    assert summary.suspect == "" and summary.results.name == "r-run"
    assert known.results.keys() == {s.key for s in steps[:2]}  # the view is not changed


def test_a_suspect_step_is_named_in_the_condition() -> None:
    ok = judged(result(0, "randread4k", 1, 1000.0), {}, ValiditySpec())
    bad = judged(result(1, "randread4k", 2, 1000.0), {}, ValiditySpec(),
                 faults=("health check OSD_DOWN: 1 osds down",))  # fmt: skip
    *_, summary = next_store(store_view([ok, bad]))
    assert isinstance(summary, SetSummary) and summary.summary.suspect_steps == 1
    assert summary.suspect == f"1 step(s) suspect: {bad.step_id} (fault)"


def test_a_step_too_large_stops_the_run_after_what_was_written_before_it() -> None:
    small = result(0, "randread4k", 1, 1000.0)
    first, refused = next_store(store_view([small, wide(1, 50_000)]))
    assert isinstance(first, WriteStep) and list(first.kept.results) == [small.key]
    assert isinstance(refused, ExecutionError)
    with pytest.raises(ExecutionError, match="fewer clients per step fit"):
        raise refused
