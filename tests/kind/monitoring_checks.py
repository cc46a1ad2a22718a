"""The kind Rook run as a kube-prometheus-stack user sees it: the real prometheus-operator
(v0.93.0, built here) runs a Prometheus (Debian's) that selects our chart's ServiceMonitor
and PrometheusRule by their `release` label, as that stack does; nothing of its scrape or
rule configuration is written by the tests (e2e/harness/monitoring.py).

Called by tests/kind/test_kind_rook_run.py after its run, on the same stack (one kind
cluster for the tier):
- `prometheus_saw_the_run`: the operator's target, from the ServiceMonitor, is up; every
  panel query of dashboards/*.json, with the template variables resolved through
  Prometheus as Grafana does (dashboards/panels.py), returns series with the labels the
  panel uses, from that run; the run's series carry the run's namespace; what
  `crimsonbench fetch` wrote of the run agrees with what Prometheus stored, step by step
  (the peak IOPS included);
- `failed_run_fires_alerts`: the rules of dashboards/rules.yaml are in Prometheus' rules
  API from our PrometheusRule; a run that fails at run time (its osdNodes name a node
  without OSDs: only the cluster knows) makes CrimsonbenchRunFailed and
  CrimsonbenchReconcileErrors fire (alerts API), and deleting it clears them.
Metrics the operator does not export (docs/metrics.md, operator column "**no**") must
return nothing: a panel target on them is data from local runs only.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.kind_bench import OPERATOR_NS, RUN_NS, BenchStack, run_manifest
from harness.monitoring import Monitoring
from polling import poll_until

from crimsonbench.results.store import ResultStore
from crimsonbench.spec.api import GROUP, PLURAL

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "dashboards"
if str(DASHBOARDS) not in sys.path:
    sys.path.insert(0, str(DASHBOARDS))
import panels  # noqa: E402  (dashboards/panels.py: dashboards/ is not a package)

OPERATOR_SERVICE = "crimsonbench-operator-metrics"  # templates/service.yaml
LOOKBACK = 3 * 3600  # seconds of Prometheus data a check looks through


def operator_absent_metrics() -> set[str]:
    """docs/metrics.md: metrics whose operator column says **no**."""
    out = set()
    for line in (ROOT / "docs" / "metrics.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and cells[-2].startswith("**no**"):
            out.add(re.sub(r"\{.*", "", cells[1].strip("`")))
    return out


def monitoring_of(s: BenchStack) -> Monitoring:
    assert s.monitoring is not None, "the kind_rook stack runs with monitoring=True"
    return s.monitoring


def _times(m: Monitoring, expr: str, start: float, end: float) -> list[float]:
    """The evaluation times (1 s apart) at which EXPR returned anything."""
    series = panels.range_query(m.url, expr, start, end, step=1.0)
    return sorted({float(v[0]) for s in series for v in s["values"]})


def run_window(m: Monitoring, run: str) -> tuple[float, float]:
    """(first, last) second at which Prometheus has the run's phase series."""
    now = time.time()
    seen = _times(m, f'crimsonbench_run_phase{{run="{run}"}}', max(m.started, now - LOOKBACK), now)
    assert seen, f"Prometheus never stored a series of run {run}"
    return seen[0], seen[-1]


# ---------------------------------------------------------------------- the run, scraped
def prometheus_saw_the_run(s: BenchStack, run: str) -> None:
    m = monitoring_of(s)
    t0 = time.monotonic()
    # the operator's target, configured by prometheus-operator from our ServiceMonitor
    target = m.wait_target_up("serviceMonitor/crimsonbench/crimsonbench-operator/")
    assert target["labels"]["service"] == OPERATOR_SERVICE, target["labels"]
    assert target["labels"]["namespace"] == OPERATOR_NS, target["labels"]
    config = m.api("status/config")["yaml"]
    job = yaml.safe_load(config)["scrape_configs"]
    (ours,) = [j for j in job if j["job_name"].startswith("serviceMonitor/crimsonbench/")]
    assert ours["scrape_interval"] == "2s" and ours["metrics_path"] == "/metrics", ours

    # a run that just completed reaches Prometheus at its next scrape (2 s): look again for
    # a while (seen: the run test failing right after Completed, this query 1-2 s later)
    deadline = time.monotonic() + 30
    while True:
        start, last = run_window(m, run)
        completed = _times(m, f'crimsonbench_run_phase{{run="{run}", phase="Completed"}} == 1',
                           start, last)  # fmt: skip
        if completed or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert completed, f"Prometheus never saw {run} Completed"
    end = completed[0]
    # instant panels at a moment the last steps ran: steps finished, one running
    last_steps = (f'max(crimsonbench_run_current_step{{run="{run}"}}) == 1 and on() '
                  f'max(crimsonbench_run_steps_done{{run="{run}"}}) >= 3')  # fmt: skip
    during = _times(m, last_steps, start, end)
    assert during, f"no scrape while {run}'s last step ran"
    at = during[-1]

    # the run's series carry the run's namespace (not the operator pod's)
    for series in m.query(f'crimsonbench_run_steps{{run="{run}"}}', end):
        assert series["metric"]["namespace"] == RUN_NS, series["metric"]

    absent = operator_absent_metrics()
    assert absent == {"crimsonbench_run_live_iops", "crimsonbench_run_cpu_overlap_detected"}
    checked = empty = 0
    for name in ("crimsonbench-run.json", "crimsonbench-curves.json"):
        board = json.loads((DASHBOARDS / name).read_text())
        values = panels.resolve_variables(m.url, board, end)
        assert run in values["run"] and "bluestore" in values["backend"], values
        assert {"randread4k", "randwrite4k"} <= set(values["workload"]), values
        values["run"] = [run]  # this run's series only (the variable is multi-value)
        for panel in board["panels"]:
            if panel["type"] == "row":
                continue
            label_sets = []
            for t in panels.targets({**board, "panels": [panel]}):
                expr = panels.substitute(t.expr, values)
                got = panels.instant(m.url, expr, at) if t.instant else \
                    panels.range_query(m.url, expr, start, end)  # fmt: skip
                where = f"{board['uid']} / {panel['title']} / {t.ref}: {expr}"
                if any(a in expr for a in absent):
                    assert got == [], f"the operator exports it now (docs/metrics.md): {where}"
                    empty += 1
                    continue
                assert got, f"no data from the kind run: {where}"
                for series in got:
                    assert series["metric"].get("run") == run, (where, series["metric"])
                    missing = panels.expected_labels(t, panel) - set(series["metric"])
                    assert not missing, f"{where}: series without {missing}: {series['metric']}"
                if t.table:
                    label_sets.append({frozenset(x["metric"].items()) - _name(x) for x in got})
                checked += 1
            assert all(ls == label_sets[0] for ls in label_sets), f"{panel['title']}: no join"
    print(f"\nPrometheus (prometheus-operator): {checked} panel queries with data, "
          f"{empty} on local-only metrics empty")  # fmt: skip
    assert checked >= 20

    # what a user fetches of the run = what Prometheus stored of it, step by step
    assert m.recorder is not None
    fetched_dir = m.recorder.fetched.get(run)
    assert fetched_dir is not None, f"{run} was never fetched: {m.recorder.errors}"
    fetched = {r.step_id: r.fio.iops for r in ResultStore(fetched_dir).read_results()}
    stored = {
        x["metric"]["step"]: float(x["value"][1])
        for x in m.query(
            f'max by (step) (max_over_time(crimsonbench_step_iops{{run="{run}"}}'
            f"[{int(end - start) + 60}s]))",
            end,
        )  # fmt: skip
    }
    assert sorted(stored) == sorted(fetched), (sorted(stored), sorted(fetched))
    for step, iops in fetched.items():
        assert stored[step] == pytest.approx(iops, rel=1e-9), step
    peak = m.query(f'max(max_over_time(crimsonbench_step_iops{{run="{run}"}}'
                   f"[{int(end - start) + 60}s]))", end)  # fmt: skip
    assert float(peak[0]["value"][1]) == pytest.approx(max(fetched.values()), rel=1e-9)
    print(f"peak IOPS: fetched {max(fetched.values()):.1f}, Prometheus {peak[0]['value'][1]}")
    s.timings.update(monitoring_panel_queries=checked, monitoring_local_only_queries=empty,
                     monitoring_peak_iops=max(fetched.values()),
                     monitoring_run_checks_s=time.monotonic() - t0)  # fmt: skip


def _name(series: dict[str, Any]) -> frozenset[tuple[str, str]]:
    return frozenset((k, v) for k, v in series["metric"].items() if k == "__name__")


# ---------------------------------------------------------------------- alerts
def rule_names() -> list[str]:
    groups = yaml.safe_load((DASHBOARDS / "rules.yaml").read_text())["groups"]
    return sorted(r["alert"] for g in groups for r in g["rules"])


def firing(m: Monitoring, alert: str, **labels: str) -> list[dict[str, Any]]:
    return [
        a
        for a in m.api("alerts")["alerts"]
        if a["labels"].get("alertname") == alert
        and a["state"] == "firing"
        and all(a["labels"].get(k) == v for k, v in labels.items())
    ]


def failed_run_fires_alerts(s: BenchStack, name: str = "kind-fails") -> None:
    m = monitoring_of(s)
    t0 = time.monotonic()
    # the rules, loaded by prometheus-operator from our chart's PrometheusRule (its rule
    # file is named <namespace>-<name>-<uid>.yaml), evaluated
    (rule,) = s.kind.kubectl_json("-n", OPERATOR_NS, "get", "prometheusrules")["items"]
    meta = rule["metadata"]
    rule_file = f"/{meta['namespace']}-{meta['name']}-{meta['uid']}.yaml"

    def loaded() -> dict[str, str] | None:
        ours = [g for g in m.api("rules")["groups"] if g["file"].endswith(rule_file)]
        health = {r["name"]: r["health"] for g in ours for r in g["rules"]}
        ok = sorted(health) == rule_names() and set(health.values()) == {"ok"}
        return health if ok else None

    poll_until(f"our rules ({rule_file}) loaded and evaluated", loaded, 300,
               lambda: json.dumps(m.api("rules"))[:3000], interval=2)  # fmt: skip
    assert firing(m, "CrimsonbenchRunFailed") == [], "a failed run before ours"

    # a run that only the cluster can refuse: its OSD node runs no OSD
    body = run_manifest(name, sorted(s.kind.workers), "bench-kind-fails")
    body["spec"]["target"]["rook"]["osdNodes"] = [s.kind.control_plane]
    custom = [f"{PLURAL}.{GROUP}"]
    s.kind.apply(body)
    try:

        def status() -> dict[str, Any]:
            doc = s.kind.kubectl_json("-n", RUN_NS, "get", *custom, name)
            return dict(doc.get("status") or {})

        st = poll_until("the run Failed", lambda: status().get("phase") == "Failed" and status(),
                        600, lambda: s.operator_logs(40), interval=2)  # fmt: skip
        assert "osdNodes" in st.get("message", ""), st
        failed_at = time.monotonic()

        def both_fire() -> list[dict[str, Any]] | None:
            got = firing(m, "CrimsonbenchRunFailed", run=name, namespace=RUN_NS)
            errors = firing(m, "CrimsonbenchReconcileErrors", error="PermanentError")
            return [*got, *errors] if got and errors else None

        alerts = poll_until("CrimsonbenchRunFailed and CrimsonbenchReconcileErrors firing",
                            both_fire, 300,
                            lambda: json.dumps(m.api("alerts"))[:3000], interval=2)  # fmt: skip
        s.timings["monitoring_alerts_after_failed_s"] = time.monotonic() - failed_at
        run_failed = next(a for a in alerts if a["labels"]["alertname"] == "CrimsonbenchRunFailed")
        assert run_failed["annotations"]["summary"] == f"Benchmark run {RUN_NS}/{name} failed"
        assert run_failed["labels"]["severity"] == "warning"
    finally:
        s.kind.kubectl("-n", RUN_NS, "delete", *custom, name, "--ignore-not-found",
                       "--wait=true", "--timeout=300s", timeout=360)  # fmt: skip
    # the run gone, its series go stale and the alert resolves
    poll_until("CrimsonbenchRunFailed resolved",
               lambda: not firing(m, "CrimsonbenchRunFailed", run=name), 120,
               lambda: json.dumps(m.api("alerts"))[:3000], interval=2)  # fmt: skip
    s.timings["monitoring_alert_checks_s"] = time.monotonic() - t0
