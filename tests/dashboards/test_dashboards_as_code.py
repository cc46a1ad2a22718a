"""The dashboards are generated (grafana-foundation-sdk): the checked-in JSON is exactly what
the generator makes, and every dashboard carries the variables the queries use."""

from __future__ import annotations

import json
import re

import generate  # dashboards/generate.py
import panels


def test_checked_in_json_is_freshly_generated() -> None:
    for name in generate.DASHBOARDS:
        assert (generate.HERE / name).read_text() == generate.render(name), (
            f"{name} is stale: run python dashboards/generate.py"
        )


def test_variables_and_datasource() -> None:
    for name in generate.DASHBOARDS:
        board = json.loads((generate.HERE / name).read_text())
        variables = {v["name"]: v for v in board["templating"]["list"]}
        assert {"datasource", "run", "backend", "policy", "workload"} <= set(variables)
        assert variables["datasource"]["type"] == "datasource"
        for panel in board["panels"]:
            if panel["type"] == "row":
                continue
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            for t in panel["targets"]:
                assert t["datasource"]["uid"] == "${datasource}"
                used = set(re.findall(r"\$(\w+)", t["expr"]))
                assert used <= set(variables), (panel["title"], used)


def test_the_published_step_table_columns() -> None:
    board = json.loads((generate.HERE / "crimsonbench-run.json").read_text())
    (steps,) = [p for p in board["panels"] if p["type"] == "table"]
    assert list(panels.table_columns(steps).values()) == [
        "iops", "bw MiB/s", "total_ios", "clat_ms", "clat_stdev",
        "usr_cpu", "sys_cpu", "OSD_cpu", "OSD_mem", "FIO_cpu",
    ]  # fmt: skip


def test_substitution_is_grafana_multi_value_regex() -> None:
    expr = 'x{run=~"$run", workload=~"${workload}"}'
    got = panels.substitute(expr, {"run": ["a.b", "c"], "workload": ["randread4k"]})
    assert got == 'x{run=~"(a\\\\.b|c)", workload=~"(randread4k)"}'  # a\\.b in PromQL
