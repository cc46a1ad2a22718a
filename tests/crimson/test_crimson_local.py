"""Local mode with real crimson OSDs (Ceph 20.2.4 built from Debian's source): the whole
run from a Ceph root, each object store, reactors and alien threads where the plan put
them (read from /proc), Seastar's reactor utilization per step, classic vs crimson."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from crimsonbench.local.cluster import LocalCluster
from crimsonbench.local.runner import LocalRun
from crimsonbench.plan.ceph_options import ceph_setup
from crimsonbench.plan.types import CpuPlan, OsdCpus
from crimsonbench.progress import QuietEvents
from crimsonbench.results.store import ResultStore
from crimsonbench.spec.models import Flavor, LocalTarget, ObjectStore, OsdSpec, validate_spec
from crimsonbench.spec.status import Phase

pytestmark = [pytest.mark.ceph, pytest.mark.crimson]


def spec(root: Path, flavor: str, store: str, **local: Any) -> dict[str, Any]:
    osd: dict[str, Any] = {"flavor": flavor, "objectStore": store, "count": 1, "cpuSet": "0"}
    if flavor == "crimson":
        osd["reactors"] = 1
    return {
        "target": {"local": {"cephRoot": str(root), "bluestoreSize": "4Gi", **local}},
        "osd": osd,
        "client": {"cpuSet": "1", "images": 2, "imageSize": "128Mi"},
        "workloads": [{"preset": "randread4k"}, {"preset": "randwrite4k"}],
        "sweep": {
            "iodepths": [1, 8],
            "runtimeSeconds": 3,
            "rampSeconds": 1,
            "earlyExit": {"enabled": False},
        },  # fmt: skip
    }


def run(name: str, data: dict[str, Any], results: Path) -> list[Any]:
    outcome = LocalRun(name, validate_spec(data), results, QuietEvents()).execute()
    assert outcome.phase == Phase.COMPLETED, outcome.message
    return sorted(outcome.results, key=lambda r: r.step_id)


@pytest.mark.parametrize("store", ["cyanstore", "seastore"])
def test_crimson_sweep_from_the_ceph_root(
    store: str, ceph_root: Path, machine_restored: None, tmp_path: Path
) -> None:
    results = run(f"crimson-{store}", spec(ceph_root, "crimson", store), tmp_path / "r")
    assert len(results) == 4
    info = json.loads((tmp_path / "r" / "run.json").read_text())
    assert info["info"]["ceph_version"] == "20.2.4"
    store_files = ResultStore(tmp_path / "r")
    for r in results:
        assert r.fio.iops > 0 and r.fio.errors == 0, r.step_id
        # Seastar's own figure, sampled from the admin socket while fio ran
        util, busiest = r.resources.reactor_util, r.resources.reactor_util_max
        assert util is not None and busiest is not None, r.step_id
        assert 0.0 < util <= busiest <= 100.0, (r.step_id, util, busiest)
        assert r.resources.reactor_util_osd == {"osd.0": pytest.approx(util)}
        # the reactor ran alone on the planned CPU, read from /proc during the step
        affinity = json.loads((store_files.step_dir(r.step_id) / "affinity.json").read_text())
        assert affinity["crimson"] == {"osd.0": {"reactor-0": "0"}}, affinity
        assert affinity["violations"] == []
    # iodepth 8 keeps the reactor busier than iodepth 1
    by = {(r.workload, r.iodepth): r for r in results}
    assert by["randread4k", 8].fio.iops > by["randread4k", 1].fio.iops


def crimson_cluster(root: Path, store: ObjectStore, cpus: list[OsdCpus]) -> LocalCluster:
    reactors = len(cpus[0].reactors)
    osd = OsdSpec(flavor=Flavor.CRIMSON, object_store=store, count=len(cpus), reactors=reactors)
    alien = 2 if cpus[0].alien else 0
    plan = CpuPlan("default", "off", tuple(cpus), (), alien)
    target = LocalTarget(ceph_root=str(root), bluestore_size="4Gi")
    return LocalCluster(target, osd, cpus, ceph_setup(plan, osd, "legacy"))


def test_bluestore_alien_threads_in_their_own_set(ceph_root: Path, machine_restored: None) -> None:
    """Crimson bluestore: the reactor on CPU 0, the alien (blocking) threads on CPU 1, as
    crimson_alien_thread_cpu_cores says; checked under write load."""
    with crimson_cluster(ceph_root, ObjectStore.BLUESTORE, [OsdCpus(0, (0,), (1,))]) as c:
        c.create_pool("rbd", 8)
        c.create_images(["img"], 64 * 2**20)
        c.prefill(["img"], 64 * 2**20)
        seen, problems = c.crimson_threads()
        assert problems == []
        assert seen == {"osd.0": {"reactor-0": "0", "alien": "1"}}
        assert c.cli.ceph("config", "get", "osd.0", "crimson_alien_thread_cpu_cores").strip() == "1"
        util = c.reactor_utilization()
        assert list(util) == [0] and all(0 <= u <= 100 for u in util[0])


@pytest.mark.parametrize(
    "cpus",
    [[OsdCpus(0, (0, 1))], [OsdCpus(0, (0,)), OsdCpus(1, (1,))]],
    ids=["1osd-2reactors", "2osds-1reactor"],
)
def test_reactors_one_per_planned_cpu(
    cpus: list[OsdCpus], ceph_root: Path, machine_restored: None
) -> None:
    """Every reactor alone on one CPU of its OSD's set, one reactor per CPU (bring-up
    refuses anything else: LocalCluster.verify_crimson)."""
    with crimson_cluster(ceph_root, ObjectStore.CYANSTORE, cpus) as c:
        seen, problems = c.crimson_threads()
        assert problems == []
        for o in cpus:
            on = sorted(int(v) for v in seen[f"osd.{o.osd_id}"].values())
            assert on == sorted(o.reactors), seen
        util = c.reactor_utilization()
        assert {i: len(v) for i, v in util.items()} == {o.osd_id: len(o.reactors) for o in cpus}


def test_classic_and_crimson_compared(
    ceph_root: Path, machine_restored: None, tmp_path: Path
) -> None:
    """The seeds' comparison in miniature: classic memstore and crimson cyanstore of the
    same Ceph build, same sweep, side by side with `crimsonbench compare`."""
    run("classic-memstore", spec(ceph_root, "classic", "memstore"), tmp_path / "classic")
    run("crimson-cyanstore", spec(ceph_root, "crimson", "cyanstore"), tmp_path / "crimson")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "crimsonbench.cli",
            "compare",
            "--threshold",
            "1000",
            "--allow-untested",  # 3 s steps: too few per-second IOPS values to test
            "--out",
            str(tmp_path / "cmp"),
            str(tmp_path / "classic"),
            str(tmp_path / "crimson"),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    written = "".join(p.read_text() for p in sorted((tmp_path / "cmp").glob("*.md")))
    for name in ("classic-memstore", "crimson-cyanstore", "randread4k", "randwrite4k"):
        assert name in written, written
    print(written)  # the comparison, for the log


@pytest.mark.parametrize("policy", ["default", "osd", "socket"])
def test_each_policy_plan_lands_on_the_reactors(
    policy: str, ceph_root: Path, machine_restored: None
) -> None:
    """Each CPU policy planned on this machine's real topology (lscpu), then the reactors
    checked where that plan put them. This VM has one socket and no hyper-threads, so the
    three plans coincide here; their differences are tested on captured 2-socket lscpu."""
    from crimsonbench.local.topology_probe import local_topology
    from crimsonbench.plan.cpu import plan_cpus
    from crimsonbench.spec.models import ClientSpec, CpuPolicy

    osd = OsdSpec(
        flavor=Flavor.CRIMSON,
        object_store=ObjectStore.CYANSTORE,
        reactors=1,
        cpu_policy=CpuPolicy(policy),
    )
    plan = plan_cpus(local_topology(), osd, ClientSpec(cpu_set="1"))  # fio keeps CPU 1
    with crimson_cluster(ceph_root, ObjectStore.CYANSTORE, list(plan.osds)) as c:
        seen, problems = c.crimson_threads()
        assert problems == []
        assert seen["osd.0"] == {"reactor-0": plan.osds[0].cpuset}
