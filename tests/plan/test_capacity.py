"""A run that cannot fit is refused when it is planned, naming the field: the images in the
OSDs' stores, an in-memory store in RAM, a file-backed store on its disk, a block size in
an image (issue 36, classes 10 and 11). Before, `plan` showed them and the run failed
minutes later (the default 32 x 2 GiB images into one 8 GiB memstore OSD mid-prefill)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from crimsonbench.cli import app
from crimsonbench.errors import InvalidSpec
from crimsonbench.plan.capacity import NEARFULL, Measured, check_capacity
from crimsonbench.spec.models import validate_spec

GIB = 2**30
LSCPU = Path(__file__).parents[1] / "fixtures" / "lscpu" / "single-socket-8-noht.json"


def spec(store: str = "memstore", count: int = 1, size: str = "8Gi", **client: Any) -> Any:
    workloads = client.pop("workloads", [{"preset": "randread4k"}])
    return validate_spec({
        "target": {"local": {"bluestoreSize": size}},
        "osd": {"flavor": "crimson" if store in ("seastore", "cyanstore") else "classic",
                "objectStore": store, "count": count, "cpuSet": "0"},
        "client": {"cpuSet": "1", **client},
        "workloads": workloads,
    })  # fmt: skip


def refused(s: Any, measured: Measured | None = None) -> InvalidSpec:
    with pytest.raises(InvalidSpec) as info:
        check_capacity(s, measured)
    return info.value


def plan_cli(tmp_path: Path, spec_doc: dict[str, Any], *args: str) -> tuple[int, str]:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "bench.crimson.ceph.io/v1alpha1",
                                    "kind": "BenchmarkRun", "metadata": {"name": "cap"},
                                    "spec": spec_doc}))  # fmt: skip
    result = CliRunner().invoke(app, ["plan", str(path), "--lscpu-json", str(LSCPU), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def test_the_default_images_into_one_default_memstore_osd_are_refused_at_plan(
    tmp_path: Path,
) -> None:
    """32 x 2Gi (the defaults) into one 8Gi memstore OSD: `plan` exits 2 naming the field,
    the sum and what to change, in one line."""
    doc = {"target": {"local": {}}, "osd": {"flavor": "classic", "objectStore": "memstore",
           "cpuSet": "0"}, "client": {"cpuSet": "1"}}  # fmt: skip
    code, out = plan_cli(tmp_path, doc)
    assert code == 2, out
    assert out.startswith("error: spec.client.images: 32 images x 2Gi = 64.0 GiB do not fit")
    assert "1 OSD(s) x 8Gi (target.local.bluestoreSize)" in out and "Traceback" not in out


def test_images_up_to_nearfull_fit_and_one_byte_more_does_not() -> None:
    room_mib = int(2 * 1024 * NEARFULL)  # 2 OSDs x 1Gi
    check_capacity(spec(count=2, size="1Gi", images=1, imageSize=f"{room_mib}Mi"))
    err = refused(spec(count=2, size="1Gi", images=1, imageSize=f"{room_mib + 1}Mi"))
    assert err.field == "spec.client.images" and "2 OSD(s) x 1Gi" in err.message


def test_an_in_memory_store_larger_than_the_ram_available_is_refused() -> None:
    """Fits its store, not this machine: 4 x 1Gi rewritten by randwrite need ~10.5 GiB."""
    s = spec(size="8Gi", images=4, imageSize="1Gi", workloads=[{"preset": "randwrite4k"}])
    err = refused(s, Measured(mem_available_bytes=8 * GIB))
    assert err.field == "spec.osd.objectStore"
    assert "memstore keeps every byte in RAM" in err.message and "8.0 GiB available" in err.message
    check_capacity(s, Measured(mem_available_bytes=11 * GIB))
    # reads only: the prefill's 1.3 x, so 8 GiB is enough
    check_capacity(spec(size="8Gi", images=4, imageSize="1Gi"), Measured(8 * GIB))


def test_file_backed_stores_need_their_bytes_on_the_disk() -> None:
    blue = spec("bluestore", size="8Gi", images=4, imageSize="1Gi")
    err = refused(blue, Measured(disk_free_bytes=4 * GIB, disk_path="/var/tmp"))
    assert err.field == "spec.target.local.workDir" and err.message.startswith("/var/tmp has 4.0")
    check_capacity(blue, Measured(disk_free_bytes=6 * GIB))
    # seastore writes its whole device at mkfs, whatever the images
    sea = spec("seastore", count=2, size="8Gi", images=1, imageSize="64Mi")
    assert "written in full at mkfs" in refused(sea, Measured(disk_free_bytes=15 * GIB)).message
    # memstore needs no disk
    check_capacity(spec(images=1, imageSize="64Mi"), Measured(disk_free_bytes=0))


@pytest.mark.parametrize(
    ("workload", "field"),
    [
        ({"name": "big", "rw": "randread", "bs": "128m"}, "spec.workloads[1].bs"),
        ({"name": "big", "rw": "write", "bs": "67108865"}, "spec.workloads[1].bs"),
    ],
    ids=["128m-into-64Mi", "one-byte-over"],
)
def test_a_block_size_larger_than_an_image_is_refused_at_plan(
    tmp_path: Path, workload: dict[str, str], field: str
) -> None:
    doc = {"target": {"local": {}}, "osd": {"flavor": "classic", "cpuSet": "0"},
           "client": {"cpuSet": "1", "images": 1, "imageSize": "64Mi"},
           "workloads": [{"preset": "randread4k"}, workload]}  # fmt: skip
    code, out = plan_cli(tmp_path, doc)
    assert code == 2, out
    assert out.startswith(f"error: {field}: {workload['bs']} is larger than an image")


def test_a_bs_equal_to_the_image_and_a_rook_run_plan() -> None:
    check_capacity(spec(images=1, imageSize="64Mi",
                        workloads=[{"name": "whole", "rw": "read", "bs": "64m"}]))  # fmt: skip
    client = {"node": "n1", "images": 64, "imageSize": "100Gi"}
    rook = validate_spec({"target": {"rook": {"clusterName": "c"}}, "client": client})
    check_capacity(rook, Measured(mem_available_bytes=1, disk_free_bytes=1))  # not ours to size


def test_every_problem_is_named_at_once() -> None:
    s = spec(size="1Gi", images=1024, imageSize="1Mi", prefillBlockSize="2m",
             workloads=[{"name": "w", "rw": "write", "bs": "2m"}])  # fmt: skip
    assert [f for f, _ in refused(s).problems] == [
        "spec.workloads[0].bs",
        "spec.client.prefillBlockSize",
        "spec.client.images",  # 1024 x 1Mi = 1 GiB > 85 % of 1Gi
    ]
