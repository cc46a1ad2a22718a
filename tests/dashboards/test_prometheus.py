"""Every dashboard query and alert rule against a real Prometheus scraping a real local run.

A tiny memstore run (2 workloads x 2 iodepths, 3 s each) serves /metrics through the CLI's
own helper; Prometheus (the Debian binary) scrapes it every second and loads rules.yaml.
Then every panel target of every dashboard, with the template variables resolved through
Prometheus like Grafana does, must return series carrying the labels the panel uses.
Set CRIMSONBENCH_DASHBOARD_PNG=docs/dashboards.png to also keep the preview picture.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import panels  # dashboards/panels.py
import preview  # dashboards/preview.py
import pytest
import yaml
from test_local_run import free_port, quick_spec  # tests/local helpers

from crimsonbench.cli import _metrics
from crimsonbench.local.runner import LocalRun
from crimsonbench.progress import QuietEvents
from crimsonbench.spec.models import validate_spec
from crimsonbench.spec.status import Phase

pytestmark = pytest.mark.ceph
DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """(Prometheus URL, port it scrapes); stopped and removed afterwards."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("prometheus not installed (Debian package prometheus; scripts/setup.sh)")
    target, port = free_port(), free_port()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(DASHBOARDS / "rules.yaml")],
        "scrape_configs": [
            {"job_name": "crimsonbench", "static_configs": [{"targets": [f"127.0.0.1:{target}"]}]}
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    proc = subprocess.Popen(
        [binary, f"--config.file={tmp_path / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("wb"),
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{url}/-/ready", timeout=2)
                break
            except OSError:
                assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
                assert time.monotonic() < deadline, "Prometheus not ready after 30 s"
                time.sleep(0.3)
        yield url, target
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _moment(url: str, expr: str, start: float, end: float) -> float:
    """The last time at which `expr` (a scalar-ish condition) held, from Prometheus' data."""
    series = panels.range_query(url, expr, start, end)
    assert series, f"never true during the run: {expr}"
    return max(float(v[0]) for s in series for v in s["values"])


def _check_panel(
    url: str,
    board: dict[str, Any],
    panel: dict[str, Any],
    values: dict[str, list[str]],
    at: float,
    start: float,
    end: float,
) -> int:
    label_sets = []
    for target in panels.targets({**board, "panels": [panel]}):
        expr = panels.substitute(target.expr, values)
        assert "$" not in expr, expr
        if target.instant:
            result = panels.instant(url, expr, at)
        else:
            result = panels.range_query(url, expr, start, end)
        where = f"{board['uid']} / {panel['title']} / {target.ref}: {expr}"
        assert result, f"no data: {where}"
        for s in result:
            missing = panels.expected_labels(target, panel) - set(s["metric"])
            assert not missing, f"{where}: series without {missing}: {s['metric']}"
        if target.table:
            label_sets.append({frozenset(s["metric"].items()) - _names(s) for s in result})
    # Table targets are merged on their labels: each must describe the same steps.
    assert all(ls == label_sets[0] for ls in label_sets), f"{panel['title']}: rows do not join"
    return len(panel["targets"])


def _names(s: dict[str, Any]) -> frozenset[tuple[str, str]]:
    return frozenset((k, v) for k, v in s["metric"].items() if k == "__name__")


def test_dashboards_and_rules_on_a_real_run(tmp_path: Path, prometheus: tuple[str, int]) -> None:
    url, port = prometheus
    spec = validate_spec(quick_spec("memstore"))
    res = tmp_path / "res"
    start = time.time()
    with _metrics(port, res):
        outcome = LocalRun("dash", spec, res, QuietEvents()).execute()
        assert outcome.phase == Phase.COMPLETED, outcome.message
        time.sleep(3)  # the last state scraped
        end = time.time()
    # Instant panels are checked while the last step ran: steps finished, one running.
    at = _moment(url, "max(crimsonbench_run_live_iops) > 0 and on() "
                      "max(crimsonbench_run_steps_done) >= 3", start, end)  # fmt: skip

    checked_panels = checked_queries = 0
    for name in ("crimsonbench-run.json", "crimsonbench-curves.json"):
        board = json.loads((DASHBOARDS / name).read_text())
        values = panels.resolve_variables(url, board, end)
        assert values == {
            "job": ["crimsonbench"], "instance": [f"127.0.0.1:{port}"],
            "run": ["dash"], "backend": ["memstore"], "policy": [spec.osd.cpu_policy.value],
            "workload": ["randread4k", "seqwrite64k"],
        }  # fmt: skip
        for panel in board["panels"]:
            if panel["type"] == "row":
                continue
            checked_queries += _check_panel(url, board, panel, values, at, start, end)
            checked_panels += 1
    print(f"checked {checked_panels} panels, {checked_queries} queries")
    assert checked_panels >= 10

    # The final table holds all four steps with every published column.
    run = json.loads((DASHBOARDS / "crimsonbench-run.json").read_text())
    (table,) = [p for p in run["panels"] if p["type"] == "table"]
    results = {
        t.ref: panels.instant(url, panels.substitute(t.expr, values), end)
        for t in panels.targets({**run, "panels": [table]})
    }
    rows = panels.merged_rows(results, panels.table_columns(table))
    assert len(rows) == 4
    stored = {r.step_id: r for r in outcome.results}
    for row in rows:
        assert row["iops"] == pytest.approx(stored[row["step"]].fio.iops)
        assert row["clat_ms"] == pytest.approx(stored[row["step"]].fio.clat_mean_ms)

    # Every alert rule parses and executes, in Prometheus' own rule manager too.
    rules = yaml.safe_load((DASHBOARDS / "rules.yaml").read_text())["groups"]
    for rule in (r for g in rules for r in g["rules"]):
        panels.instant(url, rule["expr"], end)  # raises on a parse or execution error
    loaded = panels.api(url, "rules")["groups"]
    health = {r["name"]: r["health"] for g in loaded for r in g["rules"]}
    assert len(health) == 4 and set(health.values()) == {"ok"}, health
    firing = [a["labels"]["alertname"] for a in panels.api(url, "alerts")["alerts"]]
    assert firing == [], firing  # a healthy completed run raises nothing

    png = tmp_path / "dashboards.png"
    assert preview.render(url, at, start, png) == checked_panels
    assert png.stat().st_size > 20_000
    if keep := os.environ.get("CRIMSONBENCH_DASHBOARD_PNG"):
        preview.render(url, at, start, Path(keep))
