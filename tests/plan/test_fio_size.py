"""size= in the job files: the image's own size, so our fio's rbd engine connects in each
job's thread instead of probing every image from fio's main thread (images/fio/, 0002);
left to a workload that sets the range itself (size or offset)."""

from __future__ import annotations

import configparser
from pathlib import Path
from typing import Any

import pytest

from crimsonbench.plan.build import build_plan
from crimsonbench.plan.fio_jobs import prefill_job_file, step_job_file
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.plan.types import RunPlan
from crimsonbench.spec.models import validate_spec

LSCPU = Path(__file__).parents[1] / "fixtures" / "lscpu" / "single-socket-8-noht.json"


def _plan(workload: dict[str, Any]) -> RunPlan:
    spec = validate_spec({
        "target": {"local": {}}, "osd": {"flavor": "classic", "cpuSet": "6-7"},
        "client": {"images": 3, "cpuSet": "0-3", "imageSize": "96Mi"},
        "workloads": [workload], "sweep": {"iodepths": [4]},
    })  # fmt: skip
    return build_plan("size", spec, parse_lscpu_json(LSCPU.read_text()))


def _global(text: str) -> dict[str, str]:
    ini = configparser.ConfigParser(interpolation=None, strict=True)  # a repeated key fails
    ini.read_string(text)
    return dict(ini["global"])


def test_every_job_file_names_the_images_size() -> None:
    plan = _plan({"preset": "randread4k"})
    client = plan.clients[0]
    assert _global(step_job_file(plan, plan.steps[0], client))["size"] == str(96 * 2**20)
    assert _global(prefill_job_file(plan, client))["size"] == str(96 * 2**20)


@pytest.mark.parametrize(
    ("options", "size"),
    [({"offset": "32m"}, None), ({"size": "50%"}, "50%"), ({"size": "64m", "offset": "8m"}, "64m")],
)
def test_a_workload_that_sets_the_range_keeps_it(options: dict[str, str], size: str | None) -> None:
    """A planned size= beside the workload's offset= would reach past the image's end."""
    workload = {"name": "ranged", "rw": "randread", "bs": "4k", "options": options}
    plan = _plan(workload)
    shared = _global(step_job_file(plan, plan.steps[0], plan.clients[0]))
    assert shared.get("size") == size
    assert {k: shared[k] for k in options} == options
