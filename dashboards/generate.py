"""Grafana dashboards for crimsonbench, as code (grafana-foundation-sdk).

    python dashboards/generate.py          # rewrite dashboards/*.json
    python dashboards/generate.py --check  # exit 1 if the checked-in JSON is stale

Not part of the crimsonbench package on purpose: the SDK is a development tool (the `test`
extra), the operator image only ships the JSON (the Helm chart's Grafana sidecar ConfigMap).
Metric reference: docs/metrics.md. tests/dashboards/ runs every query here against a real
Prometheus scraping a real local run, and Grafana's own dashboard linter checks the JSON in
make test's static checks (scripts/lint-dashboards.sh; exclusions with their reasons in
dashboards/.lint).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path

from grafana_foundation_sdk.builders import barchart, bargauge, stat, table, timeseries, xychart
from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus as prom
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common, prometheus
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models import xychart as xymodel

HERE = Path(__file__).resolve().parent
# The data source is a template variable, so the dashboards work with any Prometheus.
DS = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
# job and instance: the scrape that exported the series (Grafana's convention, checked by
# its linter). Two hosts running the same spec export the same run name: these tell them apart.
SCRAPE = 'job=~"$job", instance=~"$instance"'
RUN = SCRAPE + ', run=~"$run", backend=~"$backend", policy=~"$policy"'
STEP = RUN + ', workload=~"$workload"'
MIB = 1048576

# The published per-step table: (column, PromQL over the step metrics, Grafana unit)
STEP_COLUMNS = (
    ("iops", f"crimsonbench_step_iops{{{STEP}}}", "iops"),
    ("bw MiB/s", f"crimsonbench_step_bandwidth_bytes_per_second{{{STEP}}} / {MIB}", "MiBs"),
    ("total_ios", f"crimsonbench_step_total_ios{{{STEP}}}", "short"),
    ("clat_ms", f"crimsonbench_step_clat_mean_seconds{{{STEP}}} * 1000", "ms"),
    ("clat_stdev", f"crimsonbench_step_clat_stdev_seconds{{{STEP}}} * 1000", "ms"),
    ("usr_cpu", f"crimsonbench_step_usr_cpu_percent{{{STEP}}}", "percent"),
    ("sys_cpu", f"crimsonbench_step_sys_cpu_percent{{{STEP}}}", "percent"),
    ("OSD_cpu", f"crimsonbench_step_osd_cpu_percent{{{STEP}}}", "percent"),
    ("OSD_mem", f"crimsonbench_step_osd_memory_bytes{{{STEP}}} / {MIB}", "mbytes"),
    ("FIO_cpu", f"crimsonbench_step_fio_cpu_percent{{{STEP}}}", "percent"),
)
_HIDDEN = ("Time", "namespace", "flavor", "reactors", "osds", "__name__")


def _ref(i: int) -> str:
    return chr(ord("A") + i)


def instant_table(expr: str, ref: str) -> prom.Dataquery:
    """One row per series; labels become columns (merged across queries by the panel)."""
    return (
        prom.Dataquery()
        .expr(expr)
        .instant()
        .format(prometheus.PromQueryFormat.TABLE)
        .ref_id(ref)
        .datasource(DS)
    )


def series(expr: str, legend: str, ref: str = "A") -> prom.Dataquery:
    return prom.Dataquery().expr(expr).range().legend_format(legend).ref_id(ref).datasource(DS)


def instant(expr: str, legend: str, ref: str = "A") -> prom.Dataquery:
    return prom.Dataquery().expr(expr).instant().legend_format(legend).ref_id(ref).datasource(DS)


def transform(id_: str, **options: object) -> model.DataTransformerConfig:
    return model.DataTransformerConfig(id_val=id_, options=options)


def _organize(names: Iterable[str], hide: Iterable[str] = _HIDDEN) -> model.DataTransformerConfig:
    rename = {f"Value #{_ref(i)}": n for i, n in enumerate(names)}
    return transform("organize", excludeByName=dict.fromkeys(hide, True), renameByName=rename)


def _by_iodepth() -> list[model.DataTransformerConfig]:
    return [
        transform("merge"),
        transform(
            "convertFieldType",
            conversions=[{"targetField": "iodepth", "destinationType": "number"}],
        ),
        transform("sortBy", sort=[{"field": "iodepth"}]),
    ]


def variables() -> list[dash.DatasourceVariable | dash.QueryVariable]:
    def query(name: str, label: str, source: str, all_value: str = ".*") -> dash.QueryVariable:
        return (
            dash.QueryVariable(name)
            .label(label)
            .query(f"label_values({source}, {name})")
            .datasource(DS)
            .multi(True)
            .include_all(True)
            .all_value(all_value)
            .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(model.VariableSort.ALPHABETICAL_ASC)
        )

    return [
        dash.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        # every scraped series has a job and an instance: ".+" is "all" (the linter's rule)
        query("job", "Job", "crimsonbench_run_steps", ".+"),
        query("instance", "Instance", 'crimsonbench_run_steps{job=~"$job"}', ".+"),
        query("run", "Run", f"crimsonbench_run_steps{{{SCRAPE}}}"),
        query("backend", "Backend", f'crimsonbench_run_steps{{{SCRAPE}, run=~"$run"}}'),
        query(
            "policy",
            "CPU policy",
            f'crimsonbench_run_steps{{{SCRAPE}, run=~"$run", backend=~"$backend"}}',
        ),
        query("workload", "Workload", f"crimsonbench_step_iops{{{RUN}}}"),
    ]


def _base(uid: str, title: str, description: str) -> dash.Dashboard:
    d = (
        dash.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(["crimsonbench", "ceph", "crimson"])
        .readonly()  # provisioned from code (the chart's ConfigMaps): edits would be lost
        .time("now-1h", "now")
        .refresh("10s")
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
    )
    for v in variables():
        d = d.with_variable(v)
    return d


def _name_stat(title: str, description: str, expr: str, legend: str, w: int) -> stat.Panel:
    """A stat panel that shows the series' legend (e.g. the phase) instead of the value 1
    (no unit: the value is never shown; dashboards/.lint says so to the linter)."""
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .with_target(instant(expr, legend))
        .text_mode(common.BigValueTextMode.NAME)
        .color_mode(common.BigValueColorMode.NONE)
        .graph_mode(common.BigValueGraphMode.NONE)
        .height(4)
        .span(w)
    )


def run_dashboard() -> dash.Dashboard:
    d = _base(
        "crimsonbench-run",
        "crimsonbench: run overview",
        "Phase, progress, current step and live IOPS of benchmark runs; the published "
        "per-step table; OSD and fio CPU and memory per step.",
    )
    d = d.with_row(dash.Row("Run"))
    d = d.with_panel(
        _name_stat(
            "Phase",
            "The phase each run is in: Pending, Preparing, Running, Restoring, Completed or "
            "Failed.",
            f"crimsonbench_run_phase{{{RUN}}} == 1",
            "{{run}}: {{phase}}",
            6,
        )
    )
    d = d.with_panel(
        bargauge.Panel()
        .title("Progress (steps done / planned)")
        .datasource(DS)
        .with_target(instant(f"crimsonbench_run_progress_ratio{{{RUN}}}", "{{run}}"))
        .unit("percentunit")
        .min(0)
        .max(1)
        .height(4)
        .span(6)
    )
    d = d.with_panel(
        _name_stat(
            "Current step",
            "The step each run is measuring now (workload and iodepth); none between steps.",
            f"crimsonbench_run_current_step{{{RUN}}} == 1",
            "{{run}}: {{step}}",
            6,
        ).no_value("between steps / finished")
    )
    d = d.with_panel(
        stat.Panel()
        .title("Since last progress")
        .description("Alert CrimsonbenchRunStuck fires after 15 min without progress.")
        .datasource(DS)
        .with_target(
            instant(
                f"time() - crimsonbench_run_last_progress_timestamp_seconds{{{RUN}}}", "{{run}}"
            )
        )
        .unit("s")
        .height(4)
        .span(3)
    )
    d = d.with_panel(
        stat.Panel()
        .title("Failures / CPU overlap")
        .description("CPU overlap: local mode checks OSD and fio thread affinity every step.")
        .datasource(DS)
        .with_target(instant(f"crimsonbench_run_failures{{{RUN}}}", "{{run}} failures"))
        .with_target(
            instant(f"crimsonbench_run_cpu_overlap_detected{{{RUN}}}", "{{run}} CPU overlap", "B")
        )
        .text_mode(common.BigValueTextMode.VALUE_AND_NAME)
        .unit("bool_yes_no")  # both are 1 or 0
        .height(4)
        .span(3)
    )
    d = d.with_panel(
        timeseries.Panel()
        .title("Live IOPS of the running step")
        .description(
            "From fio's status line, once a second (local mode). The operator has per-step "
            "results only: see the finished steps' IOPS."
        )
        .datasource(DS)
        .with_target(series(f"crimsonbench_run_live_iops{{{RUN}}}", "{{run}} {{step}}"))
        .with_target(
            series(f"crimsonbench_step_iops{{{STEP}}}", "{{run}} {{workload}} qd{{iodepth}}", "B")
        )
        .unit("iops")
        .height(8)
        .span(12)
    )
    d = d.with_panel(
        timeseries.Panel()
        .title("Completion latency of finished steps")
        .description("Mean and p99 per step; a step's series starts when it finishes.")
        .datasource(DS)
        .with_target(
            series(
                f"crimsonbench_step_clat_mean_seconds{{{STEP}}}",
                "{{run}} {{workload}} qd{{iodepth}} mean",
            )
        )
        .with_target(
            series(
                f"crimsonbench_step_clat_p99_seconds{{{STEP}}}",
                "{{run}} {{workload}} qd{{iodepth}} p99",
                "B",
            )
        )
        .unit("s")
        .height(8)
        .span(12)
    )
    d = d.with_row(dash.Row("Steps"))
    d = d.with_panel(steps_table())
    d = d.with_row(dash.Row("Resources per step"))
    d = d.with_panel(
        _bars(
            "OSD and fio CPU per step (% of one core)",
            [
                ("OSD_cpu", "crimsonbench_step_osd_cpu_percent"),
                ("FIO_cpu", "crimsonbench_step_fio_cpu_percent"),
            ],  # fmt: skip
            "percent",
        )
    )
    d = d.with_panel(
        _bars(
            "OSD memory per step (RSS)",
            [("OSD_mem", "crimsonbench_step_osd_memory_bytes")],
            "bytes",
        )
    )
    return d


def steps_table() -> table.Panel:
    names = [name for name, _, _ in STEP_COLUMNS]
    p = (
        table.Panel()
        .title("Steps (the published table)")
        .description("One row per finished step; latency in ms, CPU in % of one core, memory MiB.")
        .datasource(DS)
        .unit("short")
        .height(10)
        .span(24)
    )
    for name, _, unit in STEP_COLUMNS:
        p = p.override_by_name(name, [model.DynamicConfigValue(id_val="unit", value=unit)])
    for i, (_, expr, _) in enumerate(STEP_COLUMNS):
        p = p.with_target(instant_table(expr, _ref(i)))
    for t in (*_by_iodepth(), _organize(names, (*_HIDDEN, "step"))):
        p = p.with_transformation(t)
    return p


def _bars(title: str, metrics: list[tuple[str, str]], unit: str) -> barchart.Panel:
    p = barchart.Panel().title(title).datasource(DS).unit(unit).x_field("step").height(8).span(12)
    for i, (_, metric) in enumerate(metrics):
        p = p.with_target(instant_table(f"{metric}{{{STEP}}}", _ref(i)))
    p = p.with_transformation(transform("merge"))
    return p.with_transformation(_organize([n for n, _ in metrics]))


def curves_dashboard() -> dash.Dashboard:
    d = _base(
        "crimsonbench-curves",
        "crimsonbench: response curves",
        "IOPS against mean completion latency per workload, one series per run, so CPU "
        "policies and backends compare side by side (the published Crimson curves).",
    )
    return d.with_panel(response_curve())


def response_curve() -> xychart.Panel:
    """An XY chart: Grafana's panel for one numeric field against another. Prometheus gives
    one series per step; instant queries in table format, merged on the step's labels, make
    one row per step with IOPS, mean latency and stddev; partitioned by run, one series per
    run. The stddev is drawn as its own points on the latency axis (the XY chart has no error
    bars)."""
    columns = ("IOPS", "clat_ms", "clat_stdev_ms")
    exprs = (
        f"crimsonbench_step_iops{{{STEP}}}",
        f"crimsonbench_step_clat_mean_seconds{{{STEP}}} * 1000",
        f"crimsonbench_step_clat_stdev_seconds{{{STEP}}} * 1000",
    )
    p = (
        xychart.Panel()
        .title("IOPS vs mean latency (ms): $workload")
        .description(xychart_description())
        .datasource(DS)
        .repeat("workload")
        .repeat_direction("h")
        .series_mapping(xymodel.SeriesMapping.AUTO)
        .dims(xychart.XYDimensionConfig().x("IOPS").exclude(["iodepth"]))
        .show(xymodel.ScatterShow.POINTS_AND_LINES)
        .legend(
            common_b.VizLegendOptions()
            .show_legend(True)
            .display_mode(common.LegendDisplayMode.LIST)
            .placement(common.LegendPlacement.BOTTOM)
        )
        .axis_label("ms")
        .height(10)
        .span(12)
    )
    for i, expr in enumerate(exprs):
        p = p.with_target(instant_table(expr, _ref(i)))
    for t in (
        *_by_iodepth(),
        _organize(columns, (*_HIDDEN, "backend", "policy", "workload", "step")),
        transform("partitionByValues", fields=["run"], keepFields=False),
    ):
        p = p.with_transformation(t)
    return p


def xychart_description() -> str:
    return (
        "x: IOPS of each finished step, y: mean completion latency and its stddev (ms), one "
        "series per run (partitioned by the run label), points in iodepth order."
    )


DASHBOARDS = {
    "crimsonbench-run.json": run_dashboard,
    "crimsonbench-curves.json": curves_dashboard,
}


def render(name: str) -> str:
    built = DASHBOARDS[name]().build()
    return json.dumps(built, cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--check", action="store_true", help="fail if the JSON is stale")
    opts = args.parse_args(argv)
    stale = []
    for name in DASHBOARDS:
        path, text = HERE / name, render(name)
        if opts.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print(f"stale: {', '.join(stale)}; run python dashboards/generate.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
