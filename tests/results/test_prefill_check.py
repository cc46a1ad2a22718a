"""Read steps over images the prefill left short are suspect (results/prefill_check.py):
the images' use as `rbd du` reports it, each workload's rw as the plan renders it. The
ceph tier runs it for real (tests/local/test_step_validity.py: prefill off)."""

from __future__ import annotations

import json
from pathlib import Path

from crimsonbench.plan.build import build_plan
from crimsonbench.plan.hosts import ClusterLayout
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.results.prefill_check import prefill_faults, reads, written_shares
from crimsonbench.spec.models import validate_spec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TOPOLOGY = parse_lscpu_json((FIXTURES / "lscpu" / "single-socket-8-noht.json").read_text())
SPEC = json.loads((FIXTURES / "driver" / "spec.json").read_text())
SPEC["workloads"] = [{"preset": p} for p in ("randread4k", "randwrite4k", "seqread64k",
                                              "seqwrite64k")]  # fmt: skip
PLAN = build_plan("p", validate_spec(SPEC),
                  ClusterLayout({"here": TOPOLOGY}, {}, ("here",), plan_osds=False))  # fmt: skip
MIB = 2**20


def test_only_the_reading_workloads_read() -> None:
    assert {s.workload: reads(PLAN, s) for s in PLAN.steps} == {
        "randread4k": True,
        "randwrite4k": False,
        "seqread64k": True,
        "seqwrite64k": False,
    }


def test_images_short_of_their_size_are_named_with_the_share_written() -> None:
    size = 64 * MIB
    used = {"img-0": size, "img-1": 16 * MIB, "stranger": 0}  # one not ours, one absent
    assert written_shares(used, ["img-0", "img-1", "img-2"], size) == {"img-1": 0.25,
                                                                       "img-2": 0.0}  # fmt: skip
    assert written_shares({"img-0": size + 4096}, ["img-0"], size) == {}  # du rounds up


def test_a_read_step_over_them_is_a_fault_a_write_step_is_not() -> None:
    short = {f"img-{i}": i / 10 for i in range(6)}
    by_workload = {s.workload: prefill_faults(PLAN, s, short) for s in PLAN.steps}
    assert by_workload["randwrite4k"] == by_workload["seqwrite64k"] == ()
    (fault,) = by_workload["randread4k"]
    assert "img-0 0 %, img-1 10 %, img-2 20 %, img-3 30 % and 2 more" in fault, fault
    assert all(prefill_faults(PLAN, s, {}) == () for s in PLAN.steps)
