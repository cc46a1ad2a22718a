from __future__ import annotations

import json
import logging
import math
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from crimsonbench.results.run_status import RunStatus
from crimsonbench.results.store import (
    MARKER_FILE,
    MARKER_TEXT,
    CorruptResults,
    ResultStore,
    UnsafePath,
)
from crimsonbench.results.types import (
    FioSummary,
    ResourceSummary,
    RunInfo,
    StepResult,
)
from crimsonbench.spec.status import StepSample

INFO = RunInfo("sea", "crimson", "seastore", 1, 56, "osd", "dual", "19.2.1", "o05", "2025-10-06")


def result(step_id: str, qd: int = 1, p999: float = 0.9) -> StepResult:
    fio = FioSummary(1000.5, 3.9, 300150, 0.29, 0.11, 0.25, 0.7, p999, 1.41, 1.26, 300.0, 32)
    return StepResult(
        step_id=step_id,
        workload="randread4k",
        iodepth=qd,
        repeat=1,
        fio=fio,
        resources=ResourceSummary(353.2, 53.66, 40.0, 300),
        extra={"affinity": [0, 1]},
    )


def test_run_info_round_trip_with_extra(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.write_run_info(INFO, {"spec": {"sweep": {"repeats": 2}}})
    assert store.read_run_info() == INFO
    assert store.read_run()[1] == {"spec": {"sweep": {"repeats": 2}}}
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["info"]["reactors"] == 56


def test_run_info_ignores_keys_it_does_not_know(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(
        json.dumps(
            {
                "info": {
                    "name": "x",
                    "flavor": "classic",
                    "object_store": "bluestore",
                    "osds": 1,
                    "reactors": 0,
                    "policy": "default",
                    "hyper_threads": "dual",
                    "from_the_future": 1,
                }
            }
        )
    )
    store = ResultStore(tmp_path)
    assert store.read_run_info().name == "x"
    assert store.read_run()[1] == {}


def test_step_round_trip_and_sorted_load(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    b, a = result("001-randread4k-qd002-r1", 2), result("000-randread4k-qd001-r1", 1)
    path = store.write_step(b)
    store.write_step(a)
    assert path == tmp_path / "steps" / b.step_id / "result.json"
    assert store.completed_steps() == {a.step_id: a, b.step_id: b}
    assert store.load_results() == [a, b]
    # a second store on the same directory sees the same: nothing lives in memory
    assert ResultStore(tmp_path).load_results() == [a, b]


def test_missing_percentile_is_null_on_disk_and_nan_in_memory(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    path = store.write_step(result("000-x-qd001-r1", p999=math.nan))
    assert json.loads(path.read_text())["fio"]["clat_p999_ms"] is None
    (back,) = store.load_results()
    assert math.isnan(back.fio.clat_p999_ms)
    assert back.fio.clat_p99_ms == 0.7


def test_empty_store_has_no_steps(tmp_path: Path) -> None:
    assert ResultStore(tmp_path / "nothing-yet").completed_steps() == {}


def test_interrupted_writes_never_count(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = ResultStore(tmp_path)
    done = result("000-randread4k-qd001-r1")
    store.write_step(done)
    # 1. killed while writing: only the temporary file exists
    half = store.step_dir("001-randread4k-qd002-r1")
    full = json.dumps(result("001-randread4k-qd002-r1").to_json_dict())
    (half / ".result.json.abc123.tmp").write_text(full[: len(full) // 2])
    # 2. a result.json cut short by something that did not write atomically
    (store.step_dir("002-randread4k-qd004-r1") / "result.json").write_text(full[:100])
    # 3. a result.json that belongs to another step (a moved directory)
    (store.step_dir("003-randread4k-qd008-r1") / "result.json").write_text(full)
    with caplog.at_level(logging.WARNING):
        assert list(store.completed_steps()) == [done.step_id]
    assert "002-randread4k-qd004-r1" in caplog.text and "001-randread4k-qd002-r1" in caplog.text


def test_a_failed_rename_leaves_no_result_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ResultStore(tmp_path)
    store.create()  # the directory and its marker exist; the step's write is cut

    def crash(src: str, dst: str) -> None:
        raise KeyboardInterrupt  # as if the run were stopped at this very moment

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        store.write_step(result("000-x-qd001-r1"))
    assert list((tmp_path / "steps" / "000-x-qd001-r1").iterdir()) == []
    assert store.completed_steps() == {}


def test_rewriting_a_step_replaces_it(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    first = result("000-x-qd001-r1")
    store.write_step(first)
    second = replace(first, fio=replace(first.fio, iops=2.0))
    store.write_step(second)
    assert store.load_results() == [second]


def test_raw_files_next_to_the_result(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    sid = "000-randread4k-qd001-r1"
    paths = store.fio_paths(sid, "client-1")
    assert paths.output.parent == store.step_dir(sid)
    samples = [StepSample(t=0.0, osd_cpu=1.0, osd_mem_mib=2.0, fio_cpu=3.0),
               StepSample(t=1.0, osd_cpu=4.0, osd_mem_mib=5.0, fio_cpu=6.0)]  # fmt: skip
    written = store.write_samples(sid, samples)
    assert [StepSample(**s) for s in json.loads(written.read_text())] == samples
    assert store.completed_steps() == {}  # raw files alone do not complete a step


@pytest.mark.parametrize("bad", ["../escape", "a/b", "", ".hidden", "x..y"])
def test_unsafe_names_are_refused(tmp_path: Path, bad: str) -> None:
    store = ResultStore(tmp_path)
    with pytest.raises(ValueError, match="not a safe file name"):
        store.step_dir(bad)
    with pytest.raises(ValueError, match="not a safe file name"):
        store.fio_paths("000-x", bad)
    with pytest.raises(ValueError, match="not a safe file name"):
        store.write_report_file(bad, "x")


def test_report_files_are_written_whole_through_the_store(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.write_report_file("summary.md", "old\n")
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    assert store.write_report_file("a.png", png).read_bytes() == png

    # a write that fails half-way leaves the previous file, and no temporary beside it
    class Unwritable(str):
        def encode(self, *args: object, **kwargs: object) -> bytes:
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        store.write_report_file("summary.md", Unwritable("new"))
    assert (store.report_dir() / "summary.md").read_text() == "old\n"
    assert sorted(p.name for p in store.report_dir().iterdir()) == ["a.png", "summary.md"]


def test_a_relative_results_directory_gives_paths_valid_from_any_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`crimsonbench run` defaults to results/<name>, relative; fio then runs in the step's
    directory, so every path handed to it must be absolute (make demo failed with fio's
    'output file open error')."""
    monkeypatch.chdir(tmp_path)
    store = ResultStore(Path("results") / "demo")
    paths = store.fio_paths("000-randread4k-qd001-r1", "client-0")
    job = store.write_job_file("000-randread4k-qd001-r1", "fio_test_0-p0", "[global]\n")
    assert store.root == tmp_path / "results" / "demo"
    assert paths.output.is_absolute() and job.is_absolute()
    monkeypatch.chdir(paths.output.parent)  # where fio runs
    assert job.exists() and paths.output.parent.is_dir()


# ---------------------------------------------------------------- paths, links, marker


def test_a_new_results_directory_carries_our_marker(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "a" / "b")
    store.write_spec({"x": 1})
    assert store.has_marker and (tmp_path / "a" / "b" / MARKER_FILE).read_text() == MARKER_TEXT
    empty = tmp_path / "empty"
    empty.mkdir()
    ResultStore(empty).write_status(RunStatus())
    assert ResultStore(empty).has_marker  # an empty directory becomes ours too
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "data.db").write_text("precious")
    ResultStore(theirs).write_report_file("summary.md", "x")  # `report` into an old dir
    assert not ResultStore(theirs).has_marker  # a directory with content is not claimed


def test_clear_deletes_only_in_a_directory_with_our_marker(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "data.db").write_text("precious")
    with pytest.raises(UnsafePath, match="has no .crimsonbench-results file"):
        ResultStore(theirs).clear()
    assert (theirs / "data.db").read_text() == "precious"
    # ours: everything goes but the lock and the marker; a link is removed, not followed
    store = ResultStore(tmp_path / "ours")
    store.write_step(result("000-x-qd001-r1"))
    store.lock_path.write_text("pid 1")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("keep")
    (store.root / "linked").symlink_to(outside, target_is_directory=True)
    store.clear()
    assert sorted(p.name for p in store.root.iterdir()) == [MARKER_FILE, ".lock"]
    assert (outside / "keep").read_text() == "keep"


@pytest.mark.parametrize("linked", ["steps", "report", "steps/000-x-qd001-r1"])
def test_nothing_is_written_through_a_link_in_the_directory(tmp_path: Path, linked: str) -> None:
    store = ResultStore(tmp_path / "run")
    store.write_step(result("000-x-qd001-r1"))
    store.write_report_file("summary.md", "x")
    outside = tmp_path / "outside"
    shutil.move(store.root / linked, outside)
    (store.root / linked).symlink_to(outside, target_is_directory=True)
    before = sorted(p.name for p in outside.iterdir())
    with pytest.raises(UnsafePath, match=f"{store.root / linked} is a symbolic link"):
        if linked == "report":
            store.write_report_file("summary.md", "y")
        else:
            store.write_step(result("000-x-qd001-r1"))
    if linked != "report":
        with pytest.raises(UnsafePath, match="is a symbolic link"):
            store.write_samples("000-x-qd001-r1", [])
    assert sorted(p.name for p in outside.iterdir()) == before
    assert store.links() == [store.root / linked]


def test_paths_stay_under_the_root(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "run")
    assert store.path("steps", "000-x", "result.json") == tmp_path / "run/steps/000-x/result.json"
    for bad in ("..", "", ".", "a/b", "x\0y"):
        with pytest.raises(UnsafePath, match="not a plain file name"):
            store.path("steps", bad)
    # the root itself may be a link: the user named it
    (tmp_path / "run").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "run", target_is_directory=True)
    ResultStore(tmp_path / "alias").write_spec({"x": 1})
    assert (tmp_path / "run" / "spec.json").exists()


def test_a_broken_step_is_left_out_of_a_resume_and_refused_by_reports(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    good = result("000-randread4k-qd001-r1")
    store.write_step(good)
    broken = store.step_dir("001-randread4k-qd002-r1") / "result.json"
    broken.write_text('{"step_id": 1}')
    store.step_dir("002-randread4k-qd004-r1")  # started, never finished: not broken
    assert list(store.completed_steps()) == [good.step_id]  # the run does 001 again
    scan = store.scan_steps()
    assert scan.unfinished == ["002-randread4k-qd004-r1"]
    assert scan.problems == [(broken, "step_id is 1, not a string")]
    with pytest.raises(CorruptResults) as err:
        store.read_results()
    assert str(err.value).startswith(f"{tmp_path}/steps/001-randread4k-qd002-r1/result.json: ")


def test_what_the_store_writes_it_reads_back_checked(tmp_path: Path) -> None:
    """Every field through to_json_dict / from_json_dict, NaN percentiles as null."""
    store = ResultStore(tmp_path)
    r = replace(
        result("000-x-qd001-r1", p999=math.nan),
        clients={"client-0": result("x").fio},
        start_skew_ms=12.0,
        extra={"iops_per_second": [1.0, 2.5], "wall_seconds": 3.0},
    )
    store.write_step(r)
    (back,) = store.read_results()
    assert math.isnan(back.fio.clat_p999_ms)
    assert replace(back, fio=replace(back.fio, clat_p999_ms=0.0)) == replace(
        r, fio=replace(r.fio, clat_p999_ms=0.0)
    )
