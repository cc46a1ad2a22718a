"""Run a Grafana dashboard's queries against Prometheus the way Grafana would: resolve the
template variables (label_values), substitute them, and execute every panel target through
the HTTP API. Standard library only; used by preview.py and tests/dashboards/.
"""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

Series = list[dict[str, Any]]  # Prometheus' "result": [{"metric": {...}, "value"/"values"}]
_LABEL_VALUES = re.compile(r"^label_values\((?P<match>.*),\s*(?P<label>\w+)\)$")
_LEGEND_LABELS = re.compile(r"\{\{\s*(\w+)\s*\}\}")


@dataclass(frozen=True)
class Target:
    dashboard: str
    panel: str
    panel_type: str
    ref: str
    expr: str  # with the template variables still in it
    instant: bool
    table: bool  # format: table (merged with the panel's other targets by Grafana)
    legend: str


def api(base: str, path: str, **params: Any) -> Any:
    """GET an /api/v1 endpoint; raise on an error status (e.g. a query that does not parse)."""
    query = urllib.parse.urlencode(params, doseq=True)
    with urllib.request.urlopen(f"{base}/api/v1/{path}?{query}", timeout=30) as resp:
        body = json.load(resp)
    if body.get("status") != "success":
        raise RuntimeError(f"{path} {params}: {body}")
    return body["data"]


def instant(base: str, expr: str, at: float) -> Series:
    return list(api(base, "query", query=expr, time=f"{at:.3f}")["result"])


def range_query(base: str, expr: str, start: float, end: float, step: float = 1.0) -> Series:
    data = api(base, "query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step=step)
    return list(data["result"])


def targets(dashboard: dict[str, Any]) -> list[Target]:
    out = []
    for panel in dashboard.get("panels", []):
        for t in panel.get("targets", []):
            out.append(
                Target(
                    dashboard=dashboard["uid"],
                    panel=panel.get("title", ""),
                    panel_type=panel["type"],
                    ref=t.get("refId", ""),
                    expr=t["expr"],
                    instant=bool(t.get("instant")) and not t.get("range"),
                    table=t.get("format") == "table",
                    legend=t.get("legendFormat", ""),
                )
            )
    return out


def expected_labels(target: Target, panel: dict[str, Any]) -> set[str]:
    """Labels the panel relies on: those named in the legend, and for tables those the
    transformations and options use (join, partition, x axis)."""
    labels = set(_LEGEND_LABELS.findall(target.legend))
    if target.table:
        for tr in panel.get("transformations", []):
            opts = tr.get("options") or {}
            labels.update(opts.get("fields", []))
            labels.update(c["targetField"] for c in opts.get("conversions", []))
        if x := (panel.get("options") or {}).get("xField"):
            labels.add(x)
    return labels


def resolve_variables(base: str, dashboard: dict[str, Any], at: float) -> dict[str, list[str]]:
    """Every query variable's values ("All" selected), in dashboard order, like Grafana."""
    values: dict[str, list[str]] = {}
    for var in dashboard.get("templating", {}).get("list", []):
        if var["type"] != "query":
            continue
        m = _LABEL_VALUES.match(var["query"])
        if m is None:
            raise ValueError(f"variable {var['name']}: unsupported query {var['query']!r}")
        match = substitute(m["match"], values)
        series = api(base, "series", **{"match[]": match, "start": at - 3600, "end": at})
        values[var["name"]] = sorted({s[m["label"]] for s in series if m["label"] in s})
    return values


def substitute(expr: str, values: dict[str, list[str]]) -> str:
    """Multi-value variables as Grafana formats them for Prometheus: (a|b) with regex escapes,
    each backslash doubled since it lands inside a PromQL string ("127\\\\.0\\\\.0\\\\.1:9090"
    in the query is the regex 127\\.0\\.0\\.1:9090; a single backslash would not parse)."""
    for name in sorted(values, key=len, reverse=True):
        joined = "|".join(re.escape(v).replace("\\", "\\\\") for v in values[name])
        expr = expr.replace(f"${{{name}}}", f"({joined})").replace(f"${name}", f"({joined})")
    return expr


def merged_rows(results: dict[str, Series], columns: dict[str, str]) -> list[dict[str, Any]]:
    """Grafana's "merge" of instant table queries: one row per label set, a column per query
    (renamed with `columns`: ref -> name)."""
    rows: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    for ref, series in results.items():
        for s in series:
            labels = {k: v for k, v in s["metric"].items() if k != "__name__"}
            row = rows.setdefault(tuple(sorted(labels.items())), dict(labels))
            row[columns.get(ref, ref)] = float(s["value"][1])
    return list(rows.values())


def table_columns(panel: dict[str, Any]) -> dict[str, str]:
    """ref -> column name, from the panel's organize transformation ("Value #A": "iops")."""
    for tr in panel.get("transformations", []):
        if tr["id"] == "organize":
            rename = tr["options"].get("renameByName", {})
            return {k.removeprefix("Value #"): v for k, v in rename.items()}
    return {}
