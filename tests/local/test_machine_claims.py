"""Two local runs on one machine (issue 36, class 10), on real clusters: a run pinning CPUs
another run holds is refused at once, naming that run (its pid, spec file and results
directory), or waits for them with --wait-cpus; a run killed outright (SIGKILL) frees its
CPUs at once (the kernel drops its locks), and the next run removes what it left (its
daemons, its fio, its directory) and marks its status Failed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_watch import Run, clean_up, leftovers, ours, write_spec
from test_local_run import quick_spec

pytestmark = pytest.mark.ceph


def spec_file(tmp_path: Path, name: str, runtime: int) -> Path:
    spec = quick_spec("memstore", runtimeSeconds=runtime)
    spec["target"]["local"]["workDir"] = str(tmp_path / f"{name}-cluster")
    return write_spec(tmp_path / f"{name}.yaml", name, spec)


def test_same_cpus_refused_or_queued_and_a_killed_run_cleaned_up(tmp_path: Path) -> None:
    a_spec = spec_file(tmp_path, "a", runtime=30)
    a = Run(a_spec, tmp_path / "a-res")
    try:
        a.wait_until("a step running", a.stepping)

        b = Run(spec_file(tmp_path, "b", runtime=3), tmp_path / "b-res")
        assert b.finish() == 2, b.output
        (line,) = [ln for ln in b.output.splitlines() if ln.startswith("error:")]
        holder = f"pid {a.proc.pid} (spec {a_spec}, results {tmp_path / 'a-res'})"
        assert line.startswith(
            f"error: spec.osd.cpuSet: CPU 0-1 are pinned by crimsonbench {holder}"
        )
        assert "--wait-cpus" in line and not (tmp_path / "b-res").exists()
        assert not (tmp_path / "b-cluster").exists()  # nothing of B started

        c = Run(spec_file(tmp_path, "c", runtime=3), tmp_path / "c-res", "--wait-cpus", "900")
        c.wait_until("C waiting for A's CPUs", lambda: c.said("waiting for CPUs"))
        assert ours(str(tmp_path / "a-cluster")), "A's cluster is up"
        a.proc.kill()  # SIGKILL: no handler, no teardown
        a.finish()
        assert c.finish(900) == 0, c.output[-3000:]
        assert f"removed the leftovers of a dead run: pid {a.proc.pid}" in c.output
        assert leftovers(tmp_path / "a-cluster", tmp_path / "a-res") == []
        status = json.loads((tmp_path / "a-res" / "status.json").read_text())
        assert status["phase"] == "Failed", status
        assert f"the run (pid {a.proc.pid}) died without cleaning up" in status["message"]
        assert (tmp_path / "a-res" / "steps").is_dir()  # its results stay
    finally:
        for name in ("a", "b", "c"):
            clean_up(tmp_path / f"{name}-cluster", tmp_path / f"{name}-res")
