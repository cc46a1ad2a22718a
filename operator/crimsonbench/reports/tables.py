"""Tables of step results: markdown in the layout of the published Crimson comparisons,
and CSV/JSON with every figure for other tools."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, fields
from typing import Any

from crimsonbench.reports.definitions import PUBLISHED_BW_PER_MIB
from crimsonbench.results.repeats import RepeatSpread, repeat_spread
from crimsonbench.results.rules import average_repeats, by_workload, is_bandwidth_workload
from crimsonbench.results.types import FioSummary, ResourceSummary, StepResult
from crimsonbench.results.validity import VALIDITY, stored_verdict, verdict_cell

# Escaped underscores as published (the tables are pasted into markdown blogs).
PUBLISHED_COLUMNS = (
    "iodepth",
    "iops",
    "total\\_ios",
    "clat\\_ms",
    "clat\\_stdev",
    "usr\\_cpu",
    "sys\\_cpu",
    "OSD\\_cpu",
    "OSD\\_mem",
    "FIO\\_cpu",
)
# Bandwidth tables: the published tables' "bw" (KiB/s / 1000) next to ours (MiB/s)
PUBLISHED_BW_COLUMN = "bw\\_pub"
PERCENTILE_COLUMNS = ("clat\\_p99\\_ms", "clat\\_p99.9\\_ms")
# With repeats: the sample stddev and the 95 % interval's half width of the throughput and
# of the mean clat, over the repeats.
SPREAD_COLUMNS = ("sd", "±ci95", "clat\\_ms sd", "clat\\_ms ±ci95", "repeats")
# Crimson: Seastar's reactor_utilization (% of the period running tasks), mean and busiest
# reactor; OSD_cpu alone overstates the load of reactors that busy-poll.
REACTOR_COLUMNS = ("reactor\\_util", "reactor\\_max")
VERDICT_COLUMN = "verdict"

_NOT_FLAT = ("samples", "reactor_util_osd")  # renamed / a dict (in each step's JSON)
ROW_FIELDS: tuple[str, ...] = (
    ("step_id", "workload", "iodepth", "repeat")
    + tuple(f.name for f in fields(FioSummary))
    + tuple(
        f.name for f in fields(ResourceSummary) if f.name not in ("samples", "reactor_util_osd")
    )
    + ("resource_samples",)
    # the published tables' definitions (reports.definitions): sums over jobs, KiB/s / 1000
    + ("usr_cpu_sum", "sys_cpu_sum", "bw_published")
    # results.validity: valid / suspect ("" for a step judged by no version), reason codes
    + ("verdict", "suspect_reasons")
)


@dataclass(frozen=True)
class Table:
    """A table as text cells (headers with markdown's escaped underscores): markdown here,
    HTML in reports.html_page, so both show the same figures."""

    header: list[str]
    rows: list[list[str]]


def markdown_table(
    results: Sequence[StepResult], bandwidth: bool | None = None, percentiles: bool = False
) -> str:
    """One workload's rows, repeats averaged, by iodepth. The first figure column is
    `bw` (MiB/s) for bandwidth workloads and `iops` otherwise."""
    return to_markdown(step_table(results, bandwidth, percentiles))


def to_markdown(table: Table) -> str:
    lines = [
        "| " + "| ".join(table.header) + "|",
        "| " + "| ".join("---" for _ in table.header) + "|",
    ]
    lines += [" | " + "  | ".join(map(markdown_cell, cells)) + "  |" for cells in table.rows]
    return "\n".join(lines) + "\n"


def markdown_cell(text: str) -> str:
    """A cell's text kept inside its cell: a `|` would split it and a line break end the row
    (a study variant's value, a run's name or a verdict's reason may hold either)."""
    return " ".join(text.replace("|", "\\|").splitlines())


def step_table(
    results: Sequence[StepResult], bandwidth: bool | None = None, percentiles: bool = False
) -> Table:
    """markdown_table's header and cells."""
    rows = average_repeats(results)
    if bandwidth is None:
        bandwidth = bool(rows) and is_bandwidth_workload(rows[0].workload)
    spread = repeat_spread(results, {rows[0].workload} if bandwidth and rows else ())
    header = list(PUBLISHED_COLUMNS)
    if bandwidth:
        header[1:2] = ["bw", PUBLISHED_BW_COLUMN]
    if percentiles:
        header.extend(PERCENTILE_COLUMNS)
    reactors = any(r.resources.reactor_util is not None for r in rows)
    if reactors:
        header.extend(REACTOR_COLUMNS)
    # with several crimson OSDs, a column per OSD (mean over its reactors), as published
    per_osd = sorted(
        {k for r in rows for k in (r.resources.reactor_util_osd or {})},
        key=lambda k: int(k.split(".")[1]),
    )
    if len(per_osd) < 2:
        per_osd = []
    header.extend(f"{k}\\_util" for k in per_osd)
    if spread:
        header.extend(SPREAD_COLUMNS)
    # results.validity: a step whose figure cannot be trusted says so on its row
    judged = any(VALIDITY in r.extra for r in rows)
    if judged:
        header.append(VERDICT_COLUMN)
    table = Table(header, [])
    for r in sorted(rows, key=lambda r: r.iodepth):
        cells = _cells(r, bandwidth, percentiles)
        if reactors:
            cells += [_fmt_opt(r.resources.reactor_util), _fmt_opt(r.resources.reactor_util_max)]
        cells += [_fmt_opt((r.resources.reactor_util_osd or {}).get(k)) for k in per_osd]
        if spread:
            cells += _spread_cells(spread.get((r.workload, r.iodepth)))
        if judged:
            cells.append(verdict_cell(r.extra))
        table.rows.append(cells)
    return table


def _spread_cells(s: RepeatSpread | None) -> list[str]:
    if s is None:
        return ["n/a", "n/a", "n/a", "n/a", "1"]
    return [
        fmt_figure(s.throughput_stdev),
        f"±{fmt_figure(s.throughput.half_width)}",
        fmt_figure(s.latency_stdev),
        f"±{fmt_figure(s.latency.half_width)}",
        str(s.n),
    ]


def _cells(r: StepResult, bandwidth: bool, percentiles: bool) -> list[str]:
    f, res = r.fio, r.resources
    usr_sum, sys_sum = published_cpu(f)
    values = [
        *((f.bw_mib_s, published_bw(f)) if bandwidth else (f.iops,)),
        f.total_ios,
        f.clat_mean_ms,
        f.clat_stdev_ms,
        usr_sum,
        sys_sum,
        *sampled(res),
    ]
    cells = [str(r.iodepth)] + [fmt_figure(v) for v in values]
    if percentiles:
        # an approximate percentile (plain JSON, no histogram) is marked with ~
        mark = "" if f.percentiles_exact else "~"
        cells += [mark + fmt_figure(v) for v in (f.clat_p99_ms, f.clat_p999_ms)]
    return cells


def published_cpu(f: FioSummary) -> tuple[float, float]:
    """usr_cpu and sys_cpu as the published tables give them: summed over the jobs (ours
    are means per job; reports.definitions)."""
    return f.usr_cpu * f.jobs, f.sys_cpu * f.jobs


def published_bw(f: FioSummary) -> float:
    """The published tables' "MiB/s": fio's KiB/s / 1000."""
    return f.bw_mib_s * PUBLISHED_BW_PER_MIB


def sampled(res: ResourceSummary) -> tuple[float, float, float]:
    """OSD_cpu, OSD_mem, FIO_cpu; NaN (n/a, an empty CSV cell, JSON null) when nothing was
    sampled: a step shorter than one interval, or a run whose executor does not sample
    (the operator) — never a 0.00 that reads as measured."""
    if res.samples == 0:
        return math.nan, math.nan, math.nan
    return res.osd_cpu, res.osd_mem_mib, res.fio_cpu


def fmt_figure(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}"


def _fmt_opt(value: float | None) -> str:
    return "n/a" if value is None else fmt_figure(value)


def workload_tables(
    results: Sequence[StepResult],
    bandwidth_workloads: Collection[str] | None = None,
    percentiles: bool = False,
) -> dict[str, str]:
    """workload -> markdown table. bandwidth_workloads: names read as MiB/s; None decides
    by name (sequential presets start with "seq")."""
    out = {}
    for workload, rows in by_workload(results).items():
        bw = (
            is_bandwidth_workload(workload)
            if bandwidth_workloads is None
            else workload in bandwidth_workloads
        )
        out[workload] = markdown_table(rows, bandwidth=bw, percentiles=percentiles)
    return out


def flat_rows(results: Sequence[StepResult]) -> list[dict[str, Any]]:
    """Every step (repeats kept apart), one flat dict each, in run order."""
    out = []
    for r in sorted(results, key=lambda r: r.step_id):
        row: dict[str, Any] = {
            "step_id": r.step_id,
            "workload": r.workload,
            "iodepth": r.iodepth,
            "repeat": r.repeat,
        }
        row.update({f.name: getattr(r.fio, f.name) for f in fields(FioSummary)})
        osd_cpu, osd_mem_mib, fio_cpu = sampled(r.resources)
        row.update(
            osd_cpu=osd_cpu,
            osd_mem_mib=osd_mem_mib,
            fio_cpu=fio_cpu,
            reactor_util=r.resources.reactor_util,
            reactor_util_max=r.resources.reactor_util_max,
            resource_samples=r.resources.samples,
        )
        usr_sum, sys_sum = published_cpu(r.fio)
        row.update(usr_cpu_sum=usr_sum, sys_cpu_sum=sys_sum, bw_published=published_bw(r.fio))
        v = stored_verdict(r.extra)
        row.update(verdict=v.verdict if v else "", suspect_reasons=" ".join(v.codes()) if v else "")
        out.append(row)
    return out


def to_csv(results: Sequence[StepResult]) -> str:
    """All rows; a percentile fio did not report is an empty cell."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=ROW_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in flat_rows(results):
        writer.writerow({k: _no_nan(v, "") for k, v in row.items()})
    return buf.getvalue()


def to_json(results: Sequence[StepResult]) -> str:
    """All rows as a JSON list; a percentile fio did not report is null."""
    rows = [{k: _no_nan(v, None) for k, v in row.items()} for row in flat_rows(results)]
    return json.dumps(rows, indent=2, allow_nan=False) + "\n"


def _no_nan(value: Any, missing: Any) -> Any:
    return missing if isinstance(value, float) and math.isnan(value) else value
