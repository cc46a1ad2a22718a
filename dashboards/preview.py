"""A preview of the dashboards' queries, drawn with matplotlib (Grafana is not packaged here):
every panel's targets run against a real Prometheus with all template values selected, and
each panel is drawn roughly as its Grafana type would show it. It is not Grafana.

    python dashboards/preview.py --prometheus http://127.0.0.1:9090 --at UNIX_TIME \
        --start UNIX_TIME --out docs/dashboards.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import panels as q  # dashboards/panels.py, next to this file
from matplotlib.axes import Axes
from matplotlib.figure import Figure

HERE = Path(__file__).resolve().parent
Results = dict[str, tuple[dict[str, Any], q.Series]]  # ref -> (target, Prometheus result)
DASHBOARDS = ("crimsonbench-run.json", "crimsonbench-curves.json")


def _legend(fmt: str, labels: dict[str, str]) -> str:
    return q._LEGEND_LABELS.sub(lambda m: labels.get(m[1], ""), fmt) if fmt else str(labels)


def _results(
    base: str, panel: dict[str, Any], values: dict[str, list[str]], at: float, start: float
) -> Results:
    out: Results = {}
    for t in panel.get("targets", []):
        expr = q.substitute(t["expr"], values)
        if t.get("instant") and not t.get("range"):
            out[t["refId"]] = (t, q.instant(base, expr, at))
        else:
            out[t["refId"]] = (t, q.range_query(base, expr, start, at, step=2.0))
    return out


def draw_panel(ax: Axes, panel: dict[str, Any], res: Results, start: float) -> None:
    kind = panel["type"]
    ax.set_title(f"{panel['title']}  [{kind}]", fontsize=8, loc="left")
    ax.tick_params(labelsize=6)
    if kind in ("stat", "bargauge"):
        lines = [
            f"{_legend(t.get('legendFormat', ''), s['metric'])}: {float(s['value'][1]):.3g}"
            for t, series in res.values()
            for s in series
        ]
        ax.axis("off")
        ax.text(0.02, 0.5, "\n".join(lines) or "no data", fontsize=7, va="center")
    elif kind == "timeseries":
        for t, series in res.values():
            for s in series:
                xs = [float(v[0]) - start for v in s["values"]]
                ys = [float(v[1]) for v in s["values"]]
                ax.plot(xs, ys, label=_legend(t.get("legendFormat", ""), s["metric"]))
        ax.set_xlabel("seconds since start", fontsize=6)
        ax.legend(fontsize=5)
    elif kind == "table":
        rows = q.merged_rows({r: s for r, (_, s) in res.items()}, q.table_columns(panel))
        cols = ["run", "workload", "iodepth", *q.table_columns(panel).values()]
        rows.sort(key=lambda r: (r["run"], r["workload"], int(r["iodepth"])))
        cells = [[_fmt(r.get(c, "")) for c in cols] for r in rows]
        ax.axis("off")
        tbl = ax.table(cellText=cells or [["no data"] * len(cols)], colLabels=cols, loc="center")
        tbl.auto_set_font_size(False)
        tbl.set_fontsize(6)
    elif kind == "barchart":
        rows = q.merged_rows({r: s for r, (_, s) in res.items()}, q.table_columns(panel))
        rows.sort(key=lambda r: r["step"])
        names = list(q.table_columns(panel).values())
        width = 0.8 / max(len(names), 1)
        for i, name in enumerate(names):
            xs = [j + i * width for j in range(len(rows))]
            ax.bar(xs, [r.get(name, 0.0) for r in rows], width, label=name)
        ax.set_xticks(range(len(rows)), [r["step"] for r in rows], rotation=20, fontsize=5)
        ax.legend(fontsize=6)
    elif kind == "xychart":
        _draw_xy(ax, panel, res)


def _draw_xy(ax: Axes, panel: dict[str, Any], res: Results) -> None:
    rows = q.merged_rows({r: s for r, (_, s) in res.items()}, q.table_columns(panel))
    x = panel["options"]["dims"]["x"]
    ys = [c for c in q.table_columns(panel).values() if c != x]
    for (run, workload), group in sorted(_groups(rows).items()):
        group.sort(key=lambda r: int(r["iodepth"]))
        for y, style in zip(ys, ("o-", "x:"), strict=False):
            label = f"{run} {workload} {y}"
            ax.plot([r[x] for r in group], [r[y] for r in group], style, label=label)
    ax.set_xlabel(x, fontsize=6)
    ax.set_ylabel("ms", fontsize=6)
    ax.legend(fontsize=5)


def _groups(rows: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault((r["run"], r["workload"]), []).append(r)
    return out


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def render(base: str, at: float, start: float, out: Path) -> int:
    """Draw every panel of every dashboard into one PNG; returns the number of panels."""
    boards = [json.loads((HERE / name).read_text()) for name in DASHBOARDS]
    drawn = [(b, p) for b in boards for p in b["panels"] if p["type"] != "row"]
    heights = [0.45 if p["type"] in ("stat", "bargauge") else 1.0 for _, p in drawn]
    fig = Figure(figsize=(11, 2.8 * sum(heights)))
    axes = fig.subplots(len(drawn), 1, gridspec_kw={"height_ratios": heights})
    for ax, (board, panel) in zip(axes, drawn, strict=True):
        values = q.resolve_variables(base, board, at)
        draw_panel(ax, panel, _results(base, panel, values, at, start), start)
        ax.set_title(f"{board['title']} / {ax.get_title(loc='left')}", fontsize=8, loc="left")
    fig.suptitle(
        "Preview of the crimsonbench dashboards' queries on a real local run "
        "(matplotlib, not Grafana)",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.99))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    return len(drawn)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prometheus", required=True)
    p.add_argument("--at", type=float, required=True, help="instant queries at this time")
    p.add_argument("--start", type=float, required=True, help="range queries from here")
    p.add_argument("--out", type=Path, default=HERE.parent / "docs" / "dashboards.png")
    a = p.parse_args()
    print(render(a.prometheus, a.at, a.start, a.out), "panels ->", a.out)


if __name__ == "__main__":
    main()
