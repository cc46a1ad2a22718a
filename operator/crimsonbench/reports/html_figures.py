"""Figures only the HTML report has, and the hover targets of its response curves: a gid
on each point (reports.svg turns gid -> text into a <title> tooltip)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib as mpl
from matplotlib.colors import BoundaryNorm
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from crimsonbench.reports.plots import Series, curve_rows, curve_x, new_figure
from crimsonbench.reports.tables import fmt_figure, sampled
from crimsonbench.results.iops_log import IOPS_PER_SECOND
from crimsonbench.results.rules import by_workload
from crimsonbench.results.types import StepResult

# Per-second points drawn per step: an hour-long step keeps its shape in 300 bucket means,
# and 40 steps stay well under the page's size budget.
MAX_POINTS = 300
_HEAT = mpl.colormaps["YlOrRd"]
# 10 % bands: the colorbar of a continuous norm is rasterized (an embedded PNG) by matplotlib
_HEAT_NORM = BoundaryNorm(list(range(0, 101, 10)), _HEAT.N)


def point_tooltip(r: StepResult, bandwidth: bool, label: str | None = None) -> str:
    """What hovering a curve's point tells: its step's figures, one per line."""
    f = r.fio
    osd_cpu = sampled(r.resources)[0]
    lines = [label] if label else []
    lines += [
        f"iodepth {r.iodepth}",
        f"{fmt_figure(f.bw_mib_s)} MiB/s" if bandwidth else f"{fmt_figure(f.iops)} IOPS",
        f"mean clat {fmt_figure(f.clat_mean_ms)} ms",
        f"p99 clat {fmt_figure(f.clat_p99_ms)} ms",
        f"OSD CPU {fmt_figure(osd_cpu)} % of one core",
    ]
    return "\n".join(lines)


def add_hover_points(
    fig: Figure, series: Sequence[Series], bandwidth: bool, *, labelled: bool
) -> dict[str, str]:
    """A translucent halo on every point of reports.plots.response_curve(series) (the
    figure's first axes), each its own group: gid -> tooltip. labelled: the series'
    label leads the tooltip (overlaid runs)."""
    ax = fig.axes[0]
    tips: dict[str, str] = {}
    for i, (label, results) in enumerate(series):
        for r in curve_rows(results):
            gid = f"pt{i}-{r.iodepth}"
            # the series' colour (errorbar takes one per series, in order); no autoscale
            # change: the halo sits on a point already drawn
            ax.plot([curve_x(r, bandwidth)], [r.fio.clat_mean_ms], linestyle="none",
                    marker="o", markersize=11, color=f"C{i % 10}", alpha=0.25, gid=gid)  # fmt: skip
            tips[gid] = point_tooltip(r, bandwidth, label if labelled else None)
    return tips


def bucket_means(
    values: Sequence[float], limit: int = MAX_POINTS
) -> tuple[list[float], list[float]]:
    """(second, value) of a per-second series, as at most `limit` bucket means, each at
    its bucket's middle second (1-based: second 1 is the first measured one)."""
    n = len(values)
    if n <= limit:
        return [float(i + 1) for i in range(n)], list(values)
    size = math.ceil(n / limit)
    t, v = [], []
    for start in range(0, n, size):
        chunk = values[start : start + size]
        t.append(start + (len(chunk) + 1) / 2)
        v.append(math.fsum(chunk) / len(chunk))
    return t, v


def iops_time_series(rows: Sequence[StepResult], workload: str) -> Figure | None:
    """One workload's per-second IOPS (fio's IOPS logs, every job summed), a line per
    step, coloured by iodepth; None when no step has the series."""
    steps = [
        (r, r.extra.get(IOPS_PER_SECOND) or [])
        for r in sorted(rows, key=lambda r: (r.iodepth, r.repeat))
    ]
    steps = [(r, s) for r, s in steps if s]
    if not steps:
        return None
    repeats = len({r.repeat for r, _ in steps}) > 1
    fig = new_figure(11.0, 3.8)
    ax = fig.add_subplot()
    cmap = mpl.colormaps["viridis"]
    for i, (r, s) in enumerate(steps):
        t, v = bucket_means(s)
        label = f"qd {r.iodepth}" + (f" r{r.repeat}" if repeats else "")
        ax.plot(t, v, color=cmap(i / max(1, len(steps) - 1)), linewidth=1.2, label=label)
    ax.set_xlabel("second of the measured run (after the ramp)")
    ax.set_ylabel("IOPS, every job summed")
    ax.set_title(f"{workload}: IOPS per second of each step")
    ax.set_ylim(bottom=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5),
              ncol=1 + len(steps) // 16)  # fmt: skip
    return fig


def reactor_rows(r: StepResult) -> dict[str, float | None]:
    """A step's reactor figures as the heatmap's rows: each OSD's mean over its reactors,
    the mean over every reactor (when it differs from one OSD's) and the busiest reactor.
    Per-reactor values are not kept in step results (results.resources keeps these)."""
    res = r.resources
    per_osd = res.reactor_util_osd or {}
    out: dict[str, float | None] = {f"{k} (mean)": v for k, v in per_osd.items()}
    if len(per_osd) != 1:
        out["all reactors (mean)"] = res.reactor_util
    out["busiest reactor"] = res.reactor_util_max
    return out


def reactor_heatmap(results: Sequence[StepResult]) -> tuple[Figure, dict[str, str]] | None:
    """Seastar reactor utilisation (%), a row per reactor figure (reactor_rows) x a
    column per step (repeats averaged), each cell its own group: gid -> tooltip. None
    when no step has reactor figures (a classic run)."""
    steps = [r for rows in by_workload(results).values() for r in curve_rows(rows)]
    steps = [r for r in steps if r.resources.reactor_util is not None]
    if not steps:
        return None
    cells = [reactor_rows(r) for r in steps]
    names = list(dict.fromkeys(k for c in cells for k in c))
    names.sort(key=_osd_first)
    width = min(12.0, max(6.0, 2.5 + 0.32 * len(steps)))
    fig = new_figure(width, 1.9 + 0.38 * len(names))
    ax = fig.add_subplot()
    tips: dict[str, str] = {}
    for j, (r, c) in enumerate(zip(steps, cells, strict=True)):
        for i, name in enumerate(names):
            v = c.get(name)
            gid = f"cell{i}-{j}"
            face = "#eeeeee" if v is None else _HEAT(_HEAT_NORM(v))
            ax.add_patch(Rectangle((j, i), 1, 1, facecolor=face, edgecolor="white", gid=gid))
            text = "n/a" if v is None else f"{v:.0f}"
            if len(steps) <= 40:
                color = "white" if v is not None and v >= 60 else "black"
                ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=6.5,
                        color=color)  # fmt: skip
            tips[gid] = f"{r.workload} iodepth {r.iodepth}\n{name}: {text} %"
    ax.set_xlim(0, len(steps))
    ax.set_ylim(len(names), 0)
    ax.set_xticks([j + 0.5 for j in range(len(steps))])
    ax.set_xticklabels([f"{r.workload} qd{r.iodepth}" for r in steps], rotation=90, fontsize=7)
    ax.set_yticks([i + 0.5 for i in range(len(names))])
    ax.set_yticklabels(names, fontsize=8)
    ax.set_title("Seastar reactor utilisation (%) per step")
    fig.colorbar(mpl.cm.ScalarMappable(_HEAT_NORM, _HEAT), ax=ax, label="%", pad=0.01)
    return fig, tips


def _osd_first(name: str) -> tuple[int, int]:
    """osd.2 before osd.10 (a key of another shape after them), then the mean over every
    reactor, then the busiest."""
    if name == "all reactors (mean)":
        return 2, 0
    if name == "busiest reactor":
        return 3, 0
    number = name.split()[0].removeprefix("osd.")
    return (0, int(number)) if number.isascii() and number.isdigit() else (1, 0)
