"""The metrics endpoint's content, from a results directory laid out as local mode writes it
and from the operator's reconcile statistics, through prometheus_client's real exposition."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from crimsonbench.controller.metrics_view import ReconcileStats
from crimsonbench.metrics import RunCollector, new_registry, state_from_store
from crimsonbench.results.run_status import RunStatus
from crimsonbench.results.store import ResultStore
from crimsonbench.results.types import FioSummary, ResourceSummary, RunInfo, StepResult

# A real fio 3.33 status line (--eta=always --eta-newline=1), as local mode captures it.
ETA = "Jobs: 1 (f=1): [r(1)][45.5%][r=10.5MiB/s][r=2690 IOPS][eta 00m:06s]\n"


def _step(index: int, workload: str, qd: int, iops: float) -> StepResult:
    fio = FioSummary(
        iops=iops,
        bw_mib_s=iops * 4 / 1024,
        total_ios=int(iops * 3),
        clat_mean_ms=0.5,
        clat_stdev_ms=0.1,
        clat_p50_ms=0.4,
        clat_p99_ms=2.0,
        clat_p999_ms=4.0,
        usr_cpu=1.5,
        sys_cpu=2.5,
        runtime_s=3.0,
        jobs=2,
    )
    return StepResult(
        step_id=f"{index:03d}-{workload}-qd{qd:03d}-r1",
        workload=workload,
        iodepth=qd,
        repeat=1,
        fio=fio,
        resources=ResourceSummary(80.0, 512.0, 30.0, 6),
        extra={"wall_seconds": 4.25},
    )


def _results_dir(root: Path, phase: str, current: str, violations: list[str]) -> ResultStore:
    store = ResultStore(root)
    store.write_run_info(RunInfo("quick", "classic", "memstore", 1, 0, "none", "dual"))
    store.write_step(_step(0, "randread4k", 1, 2000.0))
    store.write_affinity("000-randread4k-qd001-r1", {"osd.0": {"11": "0"}, "fio": {"12": "1"}}, [])
    # fio writes the status lines itself, where the store tells it to
    store.fio_paths(current, "img0").eta.write_text(ETA)
    store.fio_paths(current, "img1").eta.write_text(ETA.replace("2690", "1.5k"))
    store.write_affinity(current, {}, violations)
    status = RunStatus(phase=phase, steps_done=1, steps_total=4, current_step=current,
                       updated_at=dt.datetime(2030, 1, 1, tzinfo=dt.UTC).isoformat())  # fmt: skip
    store.write_status(status)
    return store


def _scrape(root: Path) -> dict[str, list[tuple[dict[str, str], float]]]:
    registry = new_registry(RunCollector(lambda: state_from_store(root)))
    text = generate_latest(registry).decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_run_metrics_while_a_step_runs(tmp_path: Path) -> None:
    _results_dir(tmp_path, "Running", "001-randread4k-qd004-r1", [])
    m = _scrape(tmp_path)
    run = {"run": "quick", "namespace": "", "backend": "memstore", "flavor": "classic",
           "policy": "none", "reactors": "0", "osds": "1"}  # fmt: skip
    assert m["crimsonbench_run_steps"] == [(run, 4.0)]
    assert m["crimsonbench_run_steps_done"] == [(run, 1.0)]
    assert m["crimsonbench_run_progress_ratio"] == [(run, 0.25)]
    assert m["crimsonbench_run_failures"] == [(run, 0.0)]
    # status.json's updatedAt is newer than the finished step's file: it wins
    when = dt.datetime(2030, 1, 1, tzinfo=dt.UTC).timestamp()
    assert m["crimsonbench_run_last_progress_timestamp_seconds"] == [(run, when)]
    current = {**run, "step": "001-randread4k-qd004-r1"}
    assert m["crimsonbench_run_current_step"] == [(current, 1.0)]
    assert m["crimsonbench_run_live_iops"] == [(current, 2690.0 + 1500.0)]
    assert m["crimsonbench_run_cpu_overlap_detected"] == [(run, 0.0)]
    phases = {labels["phase"]: v for labels, v in m["crimsonbench_run_phase"]}
    assert phases["Running"] == 1.0 and sum(phases.values()) == 1.0
    step = {**run, "workload": "randread4k", "iodepth": "1", "step": "000-randread4k-qd001-r1"}
    expected = {
        "crimsonbench_step_iops": 2000.0,
        "crimsonbench_step_bandwidth_bytes_per_second": 2000.0 * 4 / 1024 * 2**20,
        "crimsonbench_step_total_ios": 6000.0,
        "crimsonbench_step_clat_mean_seconds": 0.0005,
        "crimsonbench_step_clat_stdev_seconds": 0.0001,
        "crimsonbench_step_clat_p99_seconds": 0.002,
        "crimsonbench_step_clat_p999_seconds": 0.004,
        "crimsonbench_step_usr_cpu_percent": 1.5,
        "crimsonbench_step_sys_cpu_percent": 2.5,
        "crimsonbench_step_osd_cpu_percent": 80.0,
        "crimsonbench_step_osd_memory_bytes": 512.0 * 2**20,
        "crimsonbench_step_fio_cpu_percent": 30.0,
        "crimsonbench_step_duration_seconds": 4.25,
    }
    for name, value in expected.items():
        assert m[name] == [(step, pytest.approx(value))], name
    (info,) = m["crimsonbench_build_info"]
    assert info[1] == 1.0 and info[0]["version"] == "0.1.0"


def test_an_overlap_fails_the_run_and_is_reported(tmp_path: Path) -> None:
    _results_dir(tmp_path, "Failed", "001-randread4k-qd004-r1", ["fio tid 7 on 0-1"])
    m = _scrape(tmp_path)
    assert [v for _, v in m["crimsonbench_run_cpu_overlap_detected"]] == [1.0]
    assert [v for _, v in m["crimsonbench_run_failures"]] == [1.0]
    # Not running: no current step, no live IOPS (no stale readout after the end)
    assert "crimsonbench_run_current_step" not in m
    assert "crimsonbench_run_live_iops" not in m


def test_a_finished_current_step_has_no_live_readout(tmp_path: Path) -> None:
    store = _results_dir(tmp_path, "Running", "000-randread4k-qd001-r1", [])
    assert store.completed_steps()
    m = _scrape(tmp_path)
    assert "crimsonbench_run_current_step" not in m
    assert "crimsonbench_run_live_iops" not in m


def test_nothing_before_the_run_is_written(tmp_path: Path) -> None:
    m = _scrape(tmp_path)
    assert not any(name.startswith("crimsonbench_run") for name in m)
    assert "crimsonbench_build_info" in m


def test_reconcile_stats_time_and_count_errors_by_class() -> None:
    stats = ReconcileStats()

    @stats.instrument
    def handler(fail: type[Exception] | None = None) -> str:
        if fail is not None:
            raise fail("boom")
        return "ok"

    assert handler() == "ok" and handler.__name__ == "handler"
    for exc in (ValueError, ValueError, KeyError):
        with pytest.raises(exc):
            handler(fail=exc)
    registry = new_registry(RunCollector(list), stats)
    text = generate_latest(registry).decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }
    assert samples[("crimsonbench_operator_reconcile_duration_seconds_count", ())] == 4.0
    assert (
        samples[("crimsonbench_operator_reconcile_duration_seconds_bucket", (("le", "+Inf"),))]
        == 4.0
    )
    errors = "crimsonbench_operator_reconcile_errors_total"
    assert samples[(errors, (("error", "ValueError"),))] == 2.0
    assert samples[(errors, (("error", "KeyError"),))] == 1.0


def test_the_operators_view_shows_a_runs_last_steps_and_counts_them_all() -> None:
    """A run of 5,000 stored steps shows its last 4,096 steps' series (the largest sweep's
    40,960 would be 570,000 series per scrape) and counts all 5,000; finished runs keep
    their series only while they hold 50,000 steps in all, the newest first."""
    import logging
    from dataclasses import replace
    from types import SimpleNamespace

    from crimsonbench.controller import metrics_view
    from crimsonbench.controller.metrics_view import RunsView
    from crimsonbench.controller.record import RunRecord
    from crimsonbench.controller.step_index import StepIndex
    from crimsonbench.results.slim_steps import RunSteps
    from crimsonbench.spec.models import validate_spec
    from crimsonbench.spec.status import Phase

    spec = validate_spec({"target": {"external": {"monHost": "m", "keyringSecret": {"name": "k"},
                                                  "user": "admin"}},
                          "osd": {"flavor": "classic"}, "client": {"node": "n", "pool": "rbd"},
                          "workloads": [{"preset": "randread4k"}]})  # fmt: skip
    index, view = StepIndex(), RunsView(3600)

    def observe(name: str, steps: int, phase: Phase) -> None:
        known = RunSteps()
        for i in range(steps):  # each its own key (workload, iodepth, repeat)
            known.add(replace(_step(i, "randread4k", 1 + i % 64, 100.0 + i), repeat=1 + i // 64))
        index.put(name, known)
        record = RunRecord.load({"phase": phase.value, "stepsDone": steps, "stepsTotal": steps})
        ctx = SimpleNamespace(name=name, namespace="bench", uid=name, spec=spec, record=record,
                              steps=index, logger=logging.getLogger("t"))  # fmt: skip
        view.observe(ctx)  # type: ignore[arg-type]

    observe("big", 5000, Phase.RUNNING)
    (state,) = view.states()
    assert len(state.steps) == metrics_view.STEP_SERIES_KEPT == 4096
    every = sorted(_step(i, "randread4k", 1 + i % 64, 1.0).step_id for i in range(5000))
    assert [s.step_id for s in state.steps] == every[-4096:]  # the last in step order
    text = generate_latest(new_registry(RunCollector(view.states))).decode()
    assert 'crimsonbench_run_steps_done{backend="' in text
    done = next(f for f in text_string_to_metric_families(text)
                if f.name == "crimsonbench_run_steps_done")  # fmt: skip
    assert [s.value for s in done.samples] == [5000.0]
    for i in range(13):  # 13 finished runs of 4,096 shown steps: over 50,000
        observe(f"done-{i}", 4096, Phase.COMPLETED)
    shown = {s.info.name: len(s.steps) for s in view.states()}
    assert shown["done-0"] == 0 and shown["done-12"] == 4096 and shown["big"] == 4096
    assert sum(n for k, n in shown.items() if k.startswith("done")) <= 50_000
    assert {s.info.name: s.steps_done for s in view.states()}["done-0"] == 4096
