"""A two-variant study on real local Ceph clusters through the CLI: killed in its second
variant, resumed by the same command, no step run twice, one comparison at the end with
both variants in its grid; and --dry-run, which checks every variant and runs nothing."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.ceph

CLI = [sys.executable, "-m", "crimsonbench.cli"]


def study_file(tmp_path: Path, name: str = "two-images") -> Path:
    base: dict[str, Any] = {
        "target": {"local": {"workDir": str(tmp_path / "cluster")}},
        "osd": {"flavor": "classic", "objectStore": "memstore", "count": 1, "cpuSet": "0"},
        "client": {"cpuSet": "1", "images": 1, "imageSize": "64Mi"},
        "workloads": [{"preset": "randread4k"}],
        "sweep": {"iodepths": [1, 4], "runtimeSeconds": 3, "rampSeconds": 1,
                  "earlyExit": {"enabled": False}},
    }  # fmt: skip
    doc = {
        "apiVersion": "bench.crimson.ceph.io/v1alpha1",
        "kind": "BenchmarkStudy",
        "metadata": {"name": name},
        "spec": {"base": base, "vary": [{"field": "client.images", "values": [1, 2]}]},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def step_files(root: Path) -> dict[str, int]:
    """Every finished step of every run of the study: path -> mtime (ns)."""
    return {
        str(p.relative_to(root)): p.stat().st_mtime_ns
        for p in sorted((root / "runs").glob("*/steps/*/result.json"))
    }


def test_a_study_killed_in_its_second_variant_resumes_and_compares(tmp_path: Path) -> None:
    spec = study_file(tmp_path)
    root = tmp_path / "study"
    cmd = [*CLI, "study", str(spec), "--results", str(root)]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    second = root / "runs" / "two-images-images-2" / "steps" / "randread4k-qd001-r1"
    deadline = time.monotonic() + 400
    while not (second / "result.json").exists():
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert time.monotonic() < deadline, "the second variant's first step never finished"
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    first_wall = time.monotonic() - started
    assert proc.returncode == 130, out
    assert "goes on from here" in out
    record = json.loads((root / "study.json").read_text())
    assert [(r["name"], r.get("phase")) for r in record["runs"]] == [
        ("two-images-images-1", "Completed"),
        ("two-images-images-2", "Failed"),
    ]
    assert "interrupted" in record["runs"][1]["message"]
    before = step_files(root)
    assert len(before) == 3, before  # both steps of variant 1, the first of variant 2
    assert not (root / "comparison").exists()

    started = time.monotonic()
    resumed = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    second_wall = time.monotonic() - started
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = step_files(root)
    assert len(after) == 4
    for path, mtime in before.items():  # what was finished was never run again
        assert after[path] == mtime, path
    record = json.loads((root / "study.json").read_text())
    assert record["resumed"] == 1
    assert [r["phase"] for r in record["runs"]] == ["Completed", "Completed"]
    md = (root / "comparison" / "comparison.md").read_text()
    grid = md.split("\n## Grid\n", 1)[1].split("\n## ", 1)[0]
    assert "| images-1 | randread4k |" in grid.replace("  ", " ")
    assert "| images-2 | randread4k |" in grid.replace("  ", " ")
    assert (root / "comparison" / "comparison.html").stat().st_size > 10_000
    runs_wall = sum(r["wallSeconds"] for r in record["runs"])
    print(f"\nstudy: first invocation {first_wall:.1f} s (killed), resume {second_wall:.1f} s; "
          f"runs' own wall time {runs_wall:.1f} s (the last invocation's run: "
          f"{record['runs'][1]['wallSeconds']:.1f} s)")  # fmt: skip


def test_dry_run_checks_every_variant_and_starts_nothing(tmp_path: Path) -> None:
    spec = study_file(tmp_path)
    root = tmp_path / "study"
    done = subprocess.run([*CLI, "study", str(spec), "--results", str(root), "--dry-run"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "2 variants x 1 repeat(s) = 2 runs (0 done)" in done.stderr
    assert "two-images-images-2: client.images=2 (2 steps)" in done.stderr
    assert not root.exists()


def test_a_variant_whose_cpus_this_machine_lacks_is_refused_before_any_run(
    tmp_path: Path,
) -> None:
    spec = study_file(tmp_path)
    doc = yaml.safe_load(spec.read_text())
    doc["spec"]["vary"] = [{"field": "osd.cpuSet", "values": ["0", "4095"]}]
    spec.write_text(yaml.safe_dump(doc))
    root = tmp_path / "study"
    done = subprocess.run([*CLI, "study", str(spec), "--results", str(root)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "run two-images-cpuset-4095 (osd.cpuSet=4095)" in done.stderr
    assert not root.exists()
