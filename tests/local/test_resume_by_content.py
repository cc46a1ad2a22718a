"""Resume by content against a real Ceph cluster: a finished run given one more iodepth
runs only the new step; a results directory an older version wrote (step ids with the
step's position first) is resumed the same way and still reported; a spec that would
measure something else is refused before anything is written, naming what changed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from crimsonbench.errors import InvalidSpec
from crimsonbench.local.runner import LocalRun
from crimsonbench.progress import QuietEvents
from crimsonbench.reports.report import write_report
from crimsonbench.results.store import ResultStore
from crimsonbench.spec.models import validate_spec
from crimsonbench.spec.status import Phase

pytestmark = pytest.mark.ceph


def small(tmp_path: Path, iodepths: list[int], runtime: int = 3) -> Any:
    return validate_spec({
        "target": {"local": {"workDir": str(tmp_path / "cluster")}},
        "osd": {"flavor": "classic", "objectStore": "memstore", "count": 1, "cpuSet": "0"},
        "client": {"cpuSet": "1", "images": 1, "imageSize": "64Mi"},
        "workloads": [{"preset": "randread4k"}],
        "sweep": {"iodepths": iodepths, "runtimeSeconds": runtime, "rampSeconds": 1,
                  "earlyExit": {"enabled": False}},
    })  # fmt: skip


def stamps(res: Path) -> dict[str, int]:
    """step directory -> its result.json's mtime (a step run again changes it)."""
    return {p.parent.name: p.stat().st_mtime_ns for p in (res / "steps").glob("*/result.json")}


def run(tmp_path: Path, spec: Any) -> list[str]:
    """The run's steps that ran now (their results written by this run)."""
    res = tmp_path / "res"
    before = stamps(res) if res.exists() else {}
    outcome = LocalRun("resume", spec, res, QuietEvents()).execute()
    assert outcome.phase == Phase.COMPLETED, outcome.message
    return sorted(k for k, t in stamps(res).items() if before.get(k) != t)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs: OSD and fio")
def test_one_more_iodepth_runs_only_the_new_step(tmp_path: Path) -> None:
    res = tmp_path / "res"
    assert run(tmp_path, small(tmp_path, [1])) == ["randread4k-qd001-r1"]
    assert run(tmp_path, small(tmp_path, [1, 4])) == ["randread4k-qd004-r1"]
    status = json.loads((res / "status.json").read_text())
    assert (status["stepsDone"], status["stepsTotal"]) == (2, 2)

    # as an older version left it: the step's position first in its directory and id
    old = res / "steps" / "000-randread4k-qd001-r1"
    (res / "steps" / "randread4k-qd001-r1").rename(old)
    doc = json.loads((old / "result.json").read_text())
    (old / "result.json").write_text(json.dumps({**doc, "step_id": old.name}))
    assert run(tmp_path, small(tmp_path, [1, 4, 16])) == ["randread4k-qd016-r1"]
    ids = [r.step_id for r in ResultStore(res).read_results()]
    assert sorted(ids) == [old.name, "randread4k-qd004-r1", "randread4k-qd016-r1"]
    write_report(res)
    csv = (res / "report" / "results.csv").read_text().splitlines()
    assert len(csv) == 4 and all(f",{qd}," in "\n".join(csv) for qd in (1, 4, 16))

    # another runtime measures something else: refused, naming it, nothing written
    before = stamps(res), (res / "spec.json").read_text()
    with pytest.raises(InvalidSpec) as err:
        LocalRun("resume", small(tmp_path, [1, 4], runtime=4), res, QuietEvents()).execute()
    assert err.value.field == "--results"
    assert "spec.sweep.runtimeSeconds: 3 -> 4" in err.value.message
    assert "--fresh" in err.value.message
    assert (stamps(res), (res / "spec.json").read_text()) == before
