"""A BenchmarkRun on a kind stack (e2e/harness/kind_bench.py), watched from outside the
operator: its status, and its end with every step stored in a results ConfigMap."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from harness.kind_bench import RUN_NS, BenchStack
from polling import poll_until

from crimsonbench.manifests.naming import child_name
from crimsonbench.manifests.results import read_stored, results_selector
from crimsonbench.results.types import StepResult


def run_status(s: BenchStack, run: str) -> dict[str, Any]:
    got = s.kind.kubectl_json("-n", RUN_NS, "get", "benchmarkrun", run)
    return dict(got.get("status") or {})


def run_child(s: BenchStack, run: str) -> str:
    """What the operator names the live run's Jobs, pool and cephx user after
    (manifests.naming.child_name: its name and its uid's tag)."""
    got = s.kind.kubectl_json("-n", RUN_NS, "get", "benchmarkrun", run)
    return child_name(run, got["metadata"]["uid"])


class CompletedRun(NamedTuple):
    status: dict[str, Any]
    results: dict[str, StepResult]  # step id -> its result
    ended: float  # time.monotonic() when the run was seen finished


def completed_run(
    s: BenchStack, run: str, finished: Callable[[], dict[str, Any] | None], steps: int
) -> CompletedRun:
    """Poll FINISHED (a status once the run ended, else None) for up to 30 min; the run
    Completed with STEPS steps, each in a results ConfigMap."""
    st = poll_until(f"the run {run} finished", finished, 1800,
                    lambda: f"{json.dumps(run_status(s, run))[:3000]}\n{s.operator_logs(80)}\n"
                            f"{s.rook.diagnostics()}", interval=1)  # fmt: skip
    ended = time.monotonic()
    assert st["phase"] == "Completed", st.get("message")
    assert st["stepsDone"] == st["stepsTotal"] == steps
    cms = s.kind.kubectl_json("-n", RUN_NS, "get", "configmaps", "-l",
                              results_selector(run))["items"]  # fmt: skip
    stored = read_stored(cms)
    assert stored.unreadable == [], stored.unreadable
    results = {r.step_id: r for r in stored.results}
    assert sorted(results) == sorted(step["id"] for step in st["steps"])
    return CompletedRun(st, results, ended)
