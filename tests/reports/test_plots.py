from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.container import ErrorbarContainer
from matplotlib.image import imread
from matplotlib.text import Annotation
from report_helpers import sweep

from crimsonbench.reports.plots import cpu_per_step, png, response_curve
from crimsonbench.results.store import write_atomic

CLASSIC = sweep("randread4k", [(1, 108365.87, 0.29), (2, 124779.61, 0.51), (4, 130072.33, 0.98)])


def data(values: object) -> list[float]:
    return np.asarray(values, dtype=float).tolist()


def errorbars(ax: Axes) -> list[ErrorbarContainer]:
    return [c for c in ax.containers if isinstance(c, ErrorbarContainer)]


SEASTORE = sweep("randread4k", [(1, 126108.05, 0.25), (2, 186270.38, 0.34)], start=10)


def test_response_curve_has_one_series_per_run() -> None:
    fig = response_curve([("classic", CLASSIC), ("seastore", SEASTORE)], "randread4k", False)
    (ax,) = fig.axes
    bars = errorbars(ax)
    assert len(bars) == 2
    legend = ax.get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == ["classic", "seastore"]
    line = bars[0].lines[0]
    assert data(line.get_xdata()) == [r.fio.iops for r in CLASSIC]
    assert data(line.get_ydata()) == [r.fio.clat_mean_ms for r in CLASSIC]
    notes = [c.get_text() for c in ax.get_children() if isinstance(c, Annotation)]
    assert sorted(notes) == sorted(["1", "2", "4", "1", "2"])
    assert ax.get_xlabel() == "IOPS"


def test_bandwidth_curve_uses_mib_s() -> None:
    rows = sweep("seqread64k", [(1, 20000.0, 1.4), (4, 30000.0, 4.6)])
    (ax,) = response_curve([("run", rows)], "seqread64k", True).axes
    assert data(errorbars(ax)[0].lines[0].get_xdata()) == [r.fio.bw_mib_s for r in rows]
    assert "MiB/s" in ax.get_xlabel()


def test_error_bars_do_not_go_below_zero() -> None:
    rows = sweep("randread4k", [(1, 100.0, 1.0)])
    rows = [replace(rows[0], fio=replace(rows[0].fio, clat_stdev_ms=5.0))]
    (ax,) = response_curve([("run", rows)], "randread4k", False).axes
    segments = errorbars(ax)[0].lines[2][0].get_segments()
    assert segments[0][:, 1].min() == pytest.approx(0.0)
    assert segments[0][:, 1].max() == pytest.approx(6.0)


def test_cpu_plot_has_osd_and_fio_axes_with_a_line_per_run() -> None:
    fig = cpu_per_step([("classic", CLASSIC), ("seastore", SEASTORE)], "randread4k")
    osd_ax, fio_ax = fig.axes
    assert len(osd_ax.get_lines()) == 2 and len(fio_ax.get_lines()) == 2
    assert data(osd_ax.get_lines()[0].get_xdata()) == [1, 2, 4]
    assert data(fio_ax.get_lines()[1].get_ydata()) == [r.resources.fio_cpu for r in SEASTORE]


def test_png_is_a_real_image(tmp_path: Path) -> None:
    fig = response_curve([("classic", CLASSIC)], "randread4k", False)
    path = write_atomic(tmp_path / "sub" / "curve.png", png(fig))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = imread(path)
    assert img.shape[:2] == (550, 800)  # 8 x 5.5 inches at 100 dpi
    assert np.unique(img.reshape(-1, img.shape[2]), axis=0).shape[0] > 10  # not blank
