"""The single-file HTML reports: report/report.html of a run and comparison.html of
`compare`. Pure: loaded results in, the document's text out (reports.report writes it
beside the markdown). Offline by construction: plots are inline SVG (reports.svg), the
styles inline, no script, no link out of the file."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from matplotlib.figure import Figure

from crimsonbench.reports.compare import BASELINE_NOTE, Run, comparison_rows, labels, workloads
from crimsonbench.reports.definitions import COLUMNS, EXTRA_COLUMNS
from crimsonbench.reports.html_figures import (
    add_hover_points,
    iops_time_series,
    reactor_heatmap,
)
from crimsonbench.reports.html_page import (
    esc,
    facts_html,
    figure_html,
    lines_html,
    note,
    page,
    section,
    table_html,
)
from crimsonbench.reports.notes import workload_notes
from crimsonbench.reports.plots import Series, cpu_per_step, response_curve
from crimsonbench.reports.svg import inline_svg
from crimsonbench.reports.tables import Table, step_table
from crimsonbench.reports.verdicts import gate_lines, verdict_intro, verdict_table
from crimsonbench.results.gate import GateFailure
from crimsonbench.results.rules import average_repeats, by_workload
from crimsonbench.results.types import RunInfo, StepResult
from crimsonbench.results.validity import VALIDITY, suspect_lines
from crimsonbench.results.verdict import Verdict
from crimsonbench.spec.models import SweepSpec

# Section ids (the browser test looks for them)
RUN_SECTIONS = ("run", "provenance", "reactors", "suspect", "definitions")
COMPARISON_SECTIONS = ("runs", "verdicts")


@dataclass(frozen=True)
class RunView:
    """Everything a run's report shows, as reports.report read it."""

    info: RunInfo
    results: Sequence[StepResult]
    bandwidth: Collection[str]  # workloads read as MiB/s
    extra: Mapping[str, Any] = field(default_factory=dict)  # run.json extra (untrusted)
    plan: Mapping[str, Any] | None = None  # plan.json (untrusted)
    sweep: SweepSpec | None = None
    unfinished: Sequence[str] = ()


@dataclass(frozen=True)
class VerdictView:
    """One NEW run against the baseline, as `compare` judged it."""

    new_label: str
    rows: Sequence[Verdict]
    failures: Sequence[GateFailure] = ()
    allowed: Sequence[GateFailure] = ()


def workload_anchor(workload: str) -> str:
    return f"workload-{workload}"


def comparison_anchor(workload: str) -> str:
    return f"comparison-{workload}"


# ---------------------------------------------------------------- the run


def run_report_html(view: RunView) -> str:
    svg = _Svgs()
    groups = by_workload(view.results)
    body = [
        section("run", "Run", facts_html(_run_facts(view)) + _spec_and_plan(view)),
        section("provenance", "Provenance", _provenance(view.extra.get("provenance"))),
    ]
    for workload, rows in groups.items():
        body.append(_workload(workload, rows, workload in view.bandwidth, view.sweep, svg))
    body += [
        section("reactors", "Reactor utilisation", _reactors(view, svg)),
        section("suspect", "Suspect steps", _suspect(view.results)),
        section("definitions", "Columns", _definitions()),
    ]
    nav = [("run", "Run"), ("provenance", "Provenance")]
    nav += [(workload_anchor(w), w) for w in groups]
    nav += [("reactors", "Reactors"), ("suspect", "Suspect steps"), ("definitions", "Columns")]
    return page(view.info.label, nav, body)


def _run_facts(view: RunView) -> list[tuple[str, str]]:
    i = view.info
    facts = [
        ("flavor / object store", f"{i.flavor} / {i.object_store}"),
        ("OSDs, reactors per OSD", f"{i.osds}, {i.reactors}"),
        ("CPU policy, hyper-threads", f"{i.policy}, {i.hyper_threads}"),
        ("Ceph", i.ceph_version or "unknown"),
        ("host, started", f"{i.host or 'unknown'}, {i.started or 'unknown'}"),
        ("completed steps", str(len(view.results))),
    ]
    if view.unfinished:
        facts.append(("unfinished steps (not in the tables)", ", ".join(view.unfinished)))
    return facts


def _spec_and_plan(view: RunView) -> str:
    spec = _dict(view.extra.get("spec"))
    facts: list[tuple[str, str]] = []
    if view.sweep is not None:
        s = view.sweep
        facts += [
            ("iodepths", ", ".join(map(str, s.iodepths))),
            ("runtime, ramp, repeats", f"{s.runtime_seconds} s, {s.ramp_seconds} s, {s.repeats}"),
        ]
    facts.append(("workloads", ", ".join(by_workload(view.results)) or "none finished"))
    client, osd = _dict(spec.get("client")), _dict(spec.get("osd"))
    if client:
        facts.append(("clients", _pairs(client, ("images", "imageSize", "numJobs",
                                                  "processesPerImage", "prefill"))))  # fmt: skip
    if osd:
        facts.append(("OSD spec", _pairs(osd, ("count", "cpuSet", "cpusPerOsd", "reactors",
                                                "alienThreads", "cpuPolicy"))))  # fmt: skip
    target = [k for k, v in _dict(spec.get("target")).items() if v]
    if target:
        facts.append(("target", ", ".join(target)))
    plan = _dict(view.plan)
    cpu = _dict(plan.get("cpu"))
    for host, osds in _dict(cpu.get("hosts")).items():
        for name, where in _dict(osds).items():
            w = _dict(where)
            alien = f", alien threads on {_text(w['alien'])}" if w.get("alien") else ""
            facts.append((f"CPU set of {host} {name}", f"{_text(w.get('cpus'))}{alien}"))
    for name, client in _dict(plan.get("clients")).items():
        facts.append((f"CPU set of {name}", _text(_dict(client).get("cpus"))))
    if not plan:
        facts.append(("plan", "no plan.json: CPU sets unknown"))
    return "<h3>Spec and plan</h3>" + facts_html(facts)


def _provenance(raw: Any) -> str:
    prov = _dict(raw)
    if not prov:
        return note("run.json has no provenance (runs before it was recorded, or a run on "
                    "Kubernetes): versions as the run info above.")  # fmt: skip
    cpus = _dict(prov.get("cpus"))
    facts = [
        ("kernel", _text(prov.get("kernel"))),
        ("fio", _text(prov.get("fio"))),
        ("Ceph", _text(prov.get("ceph"))),
        ("CPU governor (per CPU)", _text(cpus.get("governor"))),
        (
            "boost / intel no_turbo",
            f"{_text(cpus.get('boost'))} / {_text(cpus.get('intel_no_turbo'))}",
        ),
    ]
    out = facts_html(facts)
    for name, osd in _dict(prov.get("osds")).items():
        o = _dict(osd)
        if "error" in o:
            out += f"<h3>{esc(name)}</h3>" + note(f"not read back: {_text(o['error'])}")
            continue
        rows = [("version", _text(o.get("version")))]
        differ = o.get("differ")
        if differ:
            rows.append(("did not take the planned", f"**{_text(differ)}**"))
        rows += [(str(k), _text(v)) for k, v in _dict(o.get("effective")).items()]
        planned = _dict(o.get("options"))
        table = Table(["option", "planned", "effective"], [
            [str(k), _text(_dict(v).get("planned")), _text(_dict(v).get("effective"))]
            for k, v in planned.items()
        ])  # fmt: skip
        out += f"<h3>{esc(name)}</h3>" + facts_html(rows)
        if planned:
            out += table_html(table, css="text")
    return out


def _workload(
    workload: str, rows: Sequence[StepResult], bw: bool, sweep: SweepSpec | None, svg: _Svgs
) -> str:
    series: list[Series] = [(workload, rows)]
    curve = _one_series(response_curve(series, workload, bw))
    tips = add_hover_points(curve, series, bw, labelled=False)
    parts = [
        lines_html(workload_notes(rows, bw, sweep)),
        table_html(
            step_table(average_repeats(rows), bandwidth=bw, percentiles=True),
            row_class=_suspect_row,
        ),
        figure_html(
            svg(curve, tips),
            "Hover a point: its iodepth, throughput, latency and OSD CPU. Bars: clat stddev.",
            "curve",
        ),
        figure_html(
            svg(_one_series(cpu_per_step(series, workload, memory=True))),
            "CPU in % of one core, memory as RSS; means of the samples of each step.",
        ),
    ]
    ts = iops_time_series(rows, workload)
    parts.append(
        figure_html(svg(ts), "fio's IOPS log: a flat line is a steady step.")
        if ts is not None
        else note("No per-second IOPS in these results (fio's IOPS log was not kept).")
    )
    return section(workload_anchor(workload), workload, "".join(parts))


def _reactors(view: RunView, svg: _Svgs) -> str:
    heat = reactor_heatmap(view.results)
    if heat is None:
        why = "a classic OSD has none" if view.info.flavor == "classic" else "none sampled"
        return note(f"No Seastar reactor utilisation in these results ({why}).")
    fig, tips = heat
    return figure_html(
        svg(fig, tips),
        "Seastar's reactor_utilization, mean of each step's samples (repeats averaged): "
        "each OSD's mean over its reactors and the busiest reactor (per-reactor values are "
        "not kept). Hover a cell for its value.",
    )


def _suspect(results: Sequence[StepResult]) -> str:
    ordered = sorted(results, key=lambda r: (r.workload, r.iodepth, r.repeat))
    lines = suspect_lines(ordered)
    if lines:
        return lines_html(lines)
    if not any(VALIDITY in r.extra for r in results):
        return note("No step was judged (results written before verdicts existed).")
    return note("No suspect step: every judged step is valid.")


def _suspect_row(cells: Sequence[str]) -> str:
    return "suspect" if cells and cells[-1].startswith("SUSPECT") else ""


def _definitions() -> str:
    table = Table(["column", "this table", "published tables (ceph-aprg fio-parse-jsons.py)"],
                  [list(c) for c in COLUMNS])  # fmt: skip
    extra = [f"- {name}: {what}" for name, what in EXTRA_COLUMNS]
    return table_html(table, css="text") + lines_html(["Also in the tables:", *extra])


# ---------------------------------------------------------------- the comparison


def comparison_html(
    runs: Sequence[Run],
    bandwidth: Collection[str],
    verdicts: Sequence[VerdictView],
    threshold_pct: float,
    alpha: float,
    *,
    title: str = "",
    leading: Sequence[tuple[str, str, str]] = (),
) -> str:
    """The comparison page; a study puts its own sections first (leading: anchor, title,
    body html) and names the page (title)."""
    svg = _Svgs()
    names = labels(runs)
    baseline = note(f"Baseline (ratio 1.00): **{names[0]}**. {BASELINE_NOTE}")
    body = [section(a, t, html) for a, t, html in leading]
    body.append(
        section("runs", "Runs", table_html(_runs_table(runs, names), css="text") + baseline)
    )
    for workload in workloads(runs):
        bw = workload in bandwidth
        series: list[Series] = [
            (name, rows)
            for name, (_, results) in zip(names, runs, strict=True)
            if (rows := [r for r in results if r.workload == workload])
        ]
        curve = response_curve(series, workload, bw)
        tips = add_hover_points(curve, series, bw, labelled=True)
        parts = [
            table_html(comparison_rows(runs, workload, bandwidth), cell_class=_ratio_class),
            figure_html(
                svg(curve, tips),
                "Hover a point: its run, iodepth, throughput, latency and OSD CPU.",
                "curve",
            ),
            figure_html(svg(cpu_per_step(series, workload, memory=True))),
        ]
        body.append(section(comparison_anchor(workload), workload, "".join(parts)))
    body.append(
        section("verdicts", "Verdicts", verdicts_html(names[0], verdicts, threshold_pct, alpha))
    )
    nav = [(a, t) for a, t, _ in leading] + [("runs", "Runs")]
    nav += [(comparison_anchor(w), w) for w in workloads(runs)]
    nav.append(("verdicts", "Verdicts"))
    return page(title or "Comparison: " + " vs ".join(names), nav, body)


def _runs_table(runs: Sequence[Run], names: Sequence[str]) -> Table:
    header = ["run", "flavor", "object store", "OSDs", "reactors", "CPU policy", "Ceph",
              "host", "started", "steps"]  # fmt: skip
    rows = [
        [
            name,
            i.flavor,
            i.object_store,
            str(i.osds),
            str(i.reactors),
            i.policy,
            i.ceph_version or "unknown",
            i.host or "unknown",
            i.started or "unknown",
            str(len(results)),
        ]
        for name, (i, results) in zip(names, runs, strict=True)
    ]
    return Table(header, rows)


def _ratio_class(cell: str) -> str:
    return "bad" if cell.endswith("(suspect)") else ""


def verdicts_html(
    base: str, verdicts: Sequence[VerdictView], threshold_pct: float, alpha: float
) -> str:
    out = [note(verdict_intro(threshold_pct, alpha))]
    for v in verdicts:
        table = verdict_table(v.rows, threshold_pct, alpha)
        out.append(f"<h3>{esc(v.new_label)} vs {esc(base)}</h3>")
        out.append(table_html(table, cell_class=_regression_class))
        out.append(lines_html(gate_lines(v.rows, threshold_pct, alpha, v.failures, v.allowed)))
    return "".join(out)


def _regression_class(cell: str) -> str:
    return "bad" if cell.startswith("**REGRESSION**") else ""


# ---------------------------------------------------------------- helpers


class _Svgs:
    """Figures of one page as inline SVG, each with its own id prefix."""

    def __init__(self) -> None:
        self._n: Iterator[int] = count(1)

    def __call__(self, fig: Figure, tips: Mapping[str, str] | None = None) -> str:
        return inline_svg(fig, f"f{next(self._n)}", tips)


def _one_series(fig: Figure) -> Figure:
    """The figure without legends: with one series, the title names it."""
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is not None:
            legend.remove()
    return fig


def _dict(value: Any) -> dict[str, Any]:
    """A JSON object of an untrusted file, or {} for anything else."""
    return {str(k): v for k, v in value.items()} if isinstance(value, Mapping) else {}


def _text(value: Any) -> str:
    """A JSON value for people: objects as "k: v, ...", lists comma-separated."""
    if value is None:
        return "n/a"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_text(v)}" for k, v in value.items()) or "n/a"
    if isinstance(value, list | tuple):
        return ", ".join(_text(v) for v in value) or "none"
    return str(value)


def _pairs(d: Mapping[str, Any], keys: Sequence[str]) -> str:
    return ", ".join(f"{k} {_text(d[k])}" for k in keys if d.get(k) is not None)
