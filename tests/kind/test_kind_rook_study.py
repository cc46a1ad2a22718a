"""A BenchmarkStudy on Rook in kind, applied as a user would: two variants (2 and 4 images
over the two workers' OSDs, one workload, one iodepth), run one after another by the
operator as BenchmarkRuns it owns, each restoring its cluster; then `crimsonbench
fetch-study` writes the study directory and one comparison with both variants in its grid.
Prints the study's wall time against the sum of its runs' own (the overhead of running
them as a study: creating each run once the one before it ended)."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import pytest
from harness.kind_bench import RUN_NS, BenchStack, run_manifest
from rook_runs import RunBench
from typer.testing import CliRunner

from crimsonbench.cli import app
from crimsonbench.spec.api import GROUP, VERSION

pytestmark = pytest.mark.kind

STUDY = "kind-study"


def seconds(a: str, b: str) -> float:
    return (dt.datetime.fromisoformat(b) - dt.datetime.fromisoformat(a)).total_seconds()


def test_a_study_applied_on_rook_ends_in_one_comparison(
    kind_rook: BenchStack, tmp_path: Path
) -> None:
    a = RunBench(kind_rook)
    base = run_manifest("unused", sorted(kind_rook.kind.workers), "bench-study",
                        iodepths=(4,), runtime=3)["spec"]  # fmt: skip
    base["workloads"] = [{"preset": "randread4k"}]
    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "BenchmarkStudy",
        "metadata": {"name": STUDY, "namespace": RUN_NS},
        "spec": {"base": base, "vary": [{"field": "client.images", "values": [2, 4]}]},
    }
    before = a.snapshot()
    t0 = time.monotonic()
    a.custom.create_namespaced_custom_object(GROUP, VERSION, RUN_NS, "benchmarkstudies", body)

    def study() -> dict[str, Any]:
        got = a.custom.get_namespaced_custom_object(GROUP, VERSION, RUN_NS, "benchmarkstudies",
                                                    STUDY)  # fmt: skip
        return dict(got.get("status") or {})

    st = a.wait("the study to end", lambda: study() if study().get("phase") in (
        "Completed", "Failed") else None, timeout=1500)  # fmt: skip
    wall = time.monotonic() - t0
    assert st["phase"] == "Completed", json.dumps(st)[:3000]
    names = [f"{STUDY}-images-2", f"{STUDY}-images-4"]
    assert [(r["name"], r["phase"]) for r in st["runs"]] == [(n, "Completed") for n in names]
    runs = [a.status(n) for n in names]
    assert all(a.uid(n) for n in names)  # kept: assert_restored names their children by it
    own = sum(seconds(r["startedAt"], r["finishedAt"]) for r in runs)
    # one at a time: the second began after the first had ended
    assert seconds(runs[0]["finishedAt"], runs[1]["startedAt"]) >= 0
    print(f"\nstudy of 2 runs on kind: {wall:.0f} s wall, the runs' own {own:.0f} s "
          f"(overhead {wall - own:.0f} s, {(wall - own) / own:.1%})")  # fmt: skip

    # one step per run: its verdict decides whether the grid may use it (on this 2-CPU
    # machine kind's own processes share the clients' CPU, and the verdict says so)
    stored = {n: next(iter(a.stored_results(n).values())) for n in names}
    suspect = {n: r.extra["validity"]["verdict"] == "suspect" for n, r in stored.items()}
    kubeconfig = str(kind_rook.kind.kubeconfig)
    for allow in (False, True):
        out = tmp_path / f"study-{allow}"
        got = CliRunner().invoke(app, ["fetch-study", f"{RUN_NS}/{STUDY}", "--kubeconfig",
                                       kubeconfig, "--results", str(out)]
                                 + (["--allow-suspect"] if allow else []))  # fmt: skip
        assert got.exit_code == 0, got.output
        md = (out / "comparison" / "comparison.md").read_text()
        grid = md.split("\n## Grid\n", 1)[1].split("\n## ", 1)[0]
        for n in names:
            variant = n.removeprefix(f"{STUDY}-")
            cells = next(ln for ln in grid.splitlines() if f"| {variant} " in ln).split("|")
            cells = [c.strip() for c in cells[1:-1]]
            assert cells[1] == "randread4k" and cells[-1] == str(int(suspect[n])), cells
            if suspect[n] and not allow:
                assert cells[2] == "n/a (no trusted step)", cells
            else:  # the figure is the stored step's own
                assert cells[2] == f"{stored[n].fio.iops:.2f}" and cells[3] == "4", cells
        assert (out / "comparison" / "comparison.html").stat().st_size > 10_000
        record = json.loads((out / "study.json").read_text())
        assert record["source"] == f"{RUN_NS}/{STUDY}"
    print(f"suspect: {suspect}")

    a.custom.delete_namespaced_custom_object(GROUP, VERSION, RUN_NS, "benchmarkstudies", STUDY)
    for n in names:
        a.wait(f"run {n} deleted with its study", lambda n=n: a.run(n) is None, timeout=600)
    for n in names:
        a.assert_restored(before, n, "bench-study")
