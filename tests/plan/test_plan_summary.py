"""plan.json's content (plan_summary) for each kind of target: a local or Rook run has a CPU
layout per host; an external cluster's OSDs are not ours to plan, so it has none (the
operator records it for every run, and once crashed on an external one)."""

from __future__ import annotations

import json
from pathlib import Path

from crimsonbench.plan.build import build_plan
from crimsonbench.plan.hosts import ClusterLayout
from crimsonbench.plan.summary import plan_summary
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.spec.models import validate_spec

TOPO = parse_lscpu_json(
    (Path(__file__).resolve().parents[1] / "fixtures/lscpu/this-vm.json").read_text()
)
CLIENT = {"node": "n1", "cpuSet": "1", "images": 2, "imageSize": "64Mi"}
SWEEP = {"iodepths": [1, 4], "runtimeSeconds": 3}


def test_external_target_has_no_cpu_layout_but_everything_else() -> None:
    spec = validate_spec({
        "target": {"external": {"user": "admin", "monHost": "127.0.0.1:6789",
                                "keyringSecret": {"name": "k"}}},
        "osd": {"flavor": "classic", "objectStore": "memstore", "count": 1},
        "client": {**CLIENT, "pool": "bench"}, "workloads": [{"preset": "randread4k"}],
        "sweep": SWEEP,
    })  # fmt: skip
    plan = build_plan("ext", spec, ClusterLayout({"n1": TOPO}, {}, ("n1",), plan_osds=False))
    summary = plan_summary(plan)
    assert summary["cpu"] == {
        "policy": None, "hyper_threads": None, "alien_threads": None, "hosts": {}
    }  # fmt: skip
    assert [c["cpus"] for c in summary["clients"].values()] == ["1"]
    assert summary["steps"] == [s.id for s in plan.steps] and len(plan.steps) == 2
    json.dumps(summary)  # plan.json: plain JSON


def test_local_target_names_each_osd_cpus() -> None:
    spec = validate_spec({
        "target": {"local": {}},
        "osd": {"flavor": "classic", "objectStore": "memstore", "count": 1, "cpuSet": "0"},
        "client": {"cpuSet": "1", "images": 2, "imageSize": "64Mi"},
        "workloads": [{"preset": "randread4k"}], "sweep": SWEEP,
    })  # fmt: skip
    summary = plan_summary(build_plan("loc", spec, TOPO))
    assert summary["cpu"]["hosts"] == {"local": {"osd.0": {"cpus": "0", "alien": ""}}}
    assert summary["cpu"]["policy"] is not None
