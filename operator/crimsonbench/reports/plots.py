"""PNG plots with matplotlib's object API and the Agg canvas: no pyplot global state and
no display, so reports render the same in a pod, a CI job or a terminal."""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from crimsonbench.results.repeats import repeat_spread
from crimsonbench.results.rules import average_repeats
from crimsonbench.results.types import StepResult

log = logging.getLogger(__name__)

# (label, results of one workload): one series per run, so several runs overlay
Series = tuple[str, Sequence[StepResult]]


def _plain(text: str) -> str:
    """Text matplotlib draws as written: a $ would start mathtext (a run named "a$^$b"
    fails at render time)."""
    return text.replace("$", r"\$")


def new_figure(width: float = 8.0, height: float = 5.5) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def curve_rows(results: Sequence[StepResult]) -> list[StepResult]:
    """The points of a response curve: repeats averaged, by iodepth."""
    return sorted(average_repeats(results), key=lambda r: r.iodepth)


def curve_x(r: StepResult, bandwidth: bool) -> float:
    """A point's throughput: MiB/s for bandwidth workloads, else IOPS (y: mean clat)."""
    return r.fio.bw_mib_s if bandwidth else r.fio.iops


def response_curve(series: Sequence[Series], workload: str, bandwidth: bool) -> Figure:
    """Throughput (IOPS, or MiB/s) vs mean clat with stddev bars, points named by iodepth.
    With repeats, horizontal bars are the 95 % interval of the throughput over them."""
    fig = new_figure()
    ax = fig.add_subplot()
    any_repeats = False
    for label, results in series:
        rows = curve_rows(results)
        x = [curve_x(r, bandwidth) for r in rows]
        y = [r.fio.clat_mean_ms for r in rows]
        # clat stddev often exceeds the mean (a long tail); a bar below 0 ms means nothing
        low = [min(r.fio.clat_stdev_ms, r.fio.clat_mean_ms) for r in rows]
        high = [r.fio.clat_stdev_ms for r in rows]
        spread = repeat_spread(results, {workload} if bandwidth else ())
        xerr = [
            s.throughput.half_width if (s := spread.get((r.workload, r.iodepth))) else 0.0
            for r in rows
        ]
        any_repeats = any_repeats or bool(spread)
        ax.errorbar(x, y, yerr=[low, high], xerr=xerr if spread else None, marker="o",
                    capsize=3, label=_plain(label))  # fmt: skip
        for r, xi, yi in zip(rows, x, y, strict=True):
            ax.annotate(
                str(r.iodepth), (xi, yi), textcoords="offset points", xytext=(4, 4), fontsize=7
            )
    ax.set_xlabel("bandwidth (MiB/s)" if bandwidth else "IOPS")
    ax.set_ylabel("mean clat (ms), bars: stddev")
    if any_repeats:
        ax.set_xlabel(ax.get_xlabel() + ", bars: 95 % interval over repeats")
    ax.set_title(f"{workload}: {'bandwidth' if bandwidth else 'IOPS'} vs latency (labels: iodepth)")
    ax.grid(True, alpha=0.3)
    if series:
        ax.legend(fontsize=8)
    return fig


def cpu_per_step(series: Sequence[Series], workload: str, memory: bool = False) -> Figure:
    """OSD CPU and fio CPU (% of one core) vs iodepth, and with memory the OSDs' RSS;
    separate axes, as their scales differ by orders of magnitude."""
    panels = [("OSD CPU (% of one core)", "OSD CPU"), ("fio CPU (% of one core)", "fio CPU")]
    if memory:
        panels.append(("OSD memory (RSS, MiB)", "OSD memory"))
    fig = new_figure(11.0 if len(panels) == 2 else 12.0, 4.5 if len(panels) == 2 else 3.8)
    axes = fig.subplots(1, len(panels), sharex=True)
    for label, results in series:
        rows = curve_rows(results)
        qd = [r.iodepth for r in rows]
        values = [
            [r.resources.osd_cpu for r in rows],
            [r.resources.fio_cpu for r in rows],
            [r.resources.osd_mem_mib for r in rows],
        ]
        for ax, ys in zip(axes, values, strict=False):
            ax.plot(qd, ys, marker="o", label=_plain(label))
    for ax, (ylabel, what) in zip(axes, panels, strict=True):
        ax.set_xlabel("iodepth")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{workload}: {what}")
        ax.grid(True, alpha=0.3)
    if series:
        axes[0].legend(fontsize=8)
    return fig


def png(fig: Figure) -> bytes:
    """The figure as PNG bytes (the caller writes them where they belong)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()
