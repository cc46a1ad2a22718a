"""Local mode with real crimson OSDs (Ceph 20.2.4 built from Debian's source): the whole
run from a Ceph root, each object store, reactors and alien threads where the plan put
them (read from /proc), Seastar's reactor utilization per step, classic vs crimson."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from crimsonbench.local.admin_socket import asok_command
from crimsonbench.local.cluster import LocalCluster
from crimsonbench.local.crimson_checks import asok_path, running_store
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


def idle_utilization(c: LocalCluster, samples: int = 5) -> float:
    """The busiest reactor's utilization % with no client I/O: the floor a loaded reactor
    must clear (an idle reactor is not at 0: it polls)."""
    seen = []
    for _ in range(samples):
        seen += [u for us in c.reactor_utilization().values() for u in us]
        time.sleep(0.5)
    return max(seen)


def utilization_under_load(c: LocalCluster, image: str) -> list[float]:
    """Every reactor's utilization %, read while `rbd bench` writes to IMAGE."""
    bench = subprocess.Popen(
        c.userland.wrap(["rbd", "-c", str(c.layout.conf), "bench", "--io-type", "write",
                         "--io-size", "4K", "--io-threads", "8", "--io-total", "256M",
                         "--io-pattern", "rand", f"rbd/{image}"])[0],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        time.sleep(3)
        assert bench.poll() is None, "rbd bench ended before the reactors were sampled"
        return [u for us in c.reactor_utilization().values() for u in us]
    finally:
        bench.terminate()
        bench.wait(timeout=60)


def busier_than_idle(loaded: list[float], idle: float) -> bool:
    """Loaded means clearly above what the same reactor does idle: twice it, and at least
    one percentage point more (an idle 20.2.4 reactor polls at well under 1 %)."""
    return all(max(2 * idle, idle + 1.0) < u <= 100.0 for u in loaded)


def daemon_config(c: LocalCluster, osd_id: int, option: str) -> str | None:
    """What the running daemon itself says (its admin socket), not the mon database."""
    answer = asok_command(asok_path(c.layout.run, osd_id), {"prefix": "config get", "var": option})
    return running_store(answer, option)


def test_bluestore_alien_threads_in_their_own_set(ceph_root: Path, machine_restored: None) -> None:
    """Crimson bluestore: the reactor on CPU 0, the alien (blocking) threads on CPU 1, as
    crimson_alien_thread_cpu_cores says; checked under write load."""
    with crimson_cluster(ceph_root, ObjectStore.BLUESTORE, [OsdCpus(0, (0,), (1,))]) as c:
        c.create_pool("rbd", 8)
        c.create_images(["img"], 64 * 2**20)
        c.prefill(["img"], 64 * 2**20)
        idle = idle_utilization(c)
        loaded = utilization_under_load(c, "img")
        seen, problems = c.crimson_threads()  # /proc, while the alien threads worked
        assert problems == []
        assert seen == {"osd.0": {"reactor-0": "0", "alien": "1"}}
        # the daemon's own settings (its admin socket), not the mon db we wrote
        assert daemon_config(c, 0, "crimson_alien_thread_cpu_cores") == "1"
        assert daemon_config(c, 0, "crimson_osd_objectstore") == "bluestore"
        assert busier_than_idle(loaded, idle), (idle, loaded)


def test_the_operator_s_facts_script_reads_each_crimson_osd_s_store(
    ceph_root: Path, machine_restored: None
) -> None:
    """The facts Job's osd-stores loop (manifests.maintenance), run as it is against real
    crimson OSDs: it finds them crimson from their metadata and reads the store each
    daemon runs; preflight then refuses a spec asking for another store."""
    from crimsonbench.controller.decisions.decide import ClusterFacts, preflight
    from crimsonbench.errors import InvalidSpec
    from crimsonbench.local.ceph_cli import run as run_tool
    from crimsonbench.manifests.maintenance import FACTS, OSD_STORES, OSD_STORES_SCRIPT

    cpus = [OsdCpus(0, (0,)), OsdCpus(1, (1,))]
    with crimson_cluster(ceph_root, ObjectStore.CYANSTORE, cpus) as c:
        env = {"CEPH_CONF": str(c.layout.conf), "user": "client.admin"}
        out = run_tool(["bash", "-euc", OSD_STORES_SCRIPT], timeout=300, env=env,
                       userland=c.userland)  # fmt: skip
        sections = {n: c.cli.ceph(*cmd.split(), "--format", "json") for n, cmd in FACTS.items()}
    facts = ClusterFacts.from_sections({**sections, OSD_STORES: out})
    assert {i: (m.crimson, m.store_option, m.object_store) for i, m in facts.osds.items()} == {
        0: (True, "crimson_osd_objectstore", "cyanstore"),
        1: (True, "crimson_osd_objectstore", "cyanstore"),
    }
    on_rook = {"target": {"rook": {"clusterName": "c"}}, "client": {"node": "vm", "pool": "new"}}
    ok = validate_spec({**on_rook, "osd": {"flavor": "crimson", "objectStore": "cyanstore"}})
    assert preflight(ok, facts, {0: "vm", 1: "vm"}) == "legacy"
    wrong = validate_spec({**on_rook, "osd": {"flavor": "crimson", "objectStore": "seastore"}})
    with pytest.raises(InvalidSpec, match="runs cyanstore, the spec asks for seastore"):
        preflight(wrong, facts, {0: "vm", 1: "vm"})


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


# Two NUMA nodes of one CPU each, numbered against the ids (CPU 1 on node 0): a topology
# this machine's 2 CPUs can run, on which the policies decide differently. lscpu -e JSON.
TWO_NODES = {"cpus": [
    {"cpu": 0, "node": 1, "socket": 1, "core": 1, "online": True},
    {"cpu": 1, "node": 0, "socket": 0, "core": 0, "online": True},
]}  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "count", "reactors", "planned"),
    [
        # default: units in (node, core) order, filled OSD after OSD
        ("default", 1, 2, {"osd.0": "0-1"}),
        ("default", 2, 1, {"osd.0": "1", "osd.1": "0"}),
        # socket: every OSD spread over both nodes, one reactor per node
        ("socket", 1, 2, {"osd.0": "0-1"}),
        ("socket", 2, 1, {"osd.0": "1", "osd.1": "0"}),
        # osd: each OSD's reactors within one node, OSD i on node i
        ("osd", 2, 1, {"osd.0": "1", "osd.1": "0"}),
        ("osd", 1, 2, None),  # one node cannot hold 2 reactors: refused before any daemon
    ],
)
def test_each_policy_plan_lands_on_the_reactors(
    policy: str,
    count: int,
    reactors: int,
    planned: dict[str, str] | None,
    ceph_root: Path,
    machine_restored: None,
) -> None:
    """Each CPU policy planned on a synthetic topology of this machine's two CPUs (two NUMA
    nodes numbered against the CPU ids), then the real reactors checked where that plan put
    them (/proc). What it proves: the plan, not CPU id order, places the reactors (osd.0
    lands on CPU 1, the first unit of node 0), and a policy that cannot place a layout
    refuses it before any daemon. With 2 CPUs the policies can only differ by that order
    and by refusals; their different layouts on real 2-socket machines are tested on
    captured lscpu (tests/plan/test_plan_cpu.py)."""
    from crimsonbench.errors import InvalidSpec
    from crimsonbench.plan.cpu import plan_cpus
    from crimsonbench.plan.topology import parse_lscpu_json
    from crimsonbench.spec.models import ClientSpec, CpuPolicy

    topo = parse_lscpu_json(json.dumps(TWO_NODES))
    osd = OsdSpec(flavor=Flavor.CRIMSON, object_store=ObjectStore.CYANSTORE, count=count,
                  reactors=reactors, cpu_policy=CpuPolicy(policy), cpu_set="0-1")  # fmt: skip
    if planned is None:
        with pytest.raises(InvalidSpec) as err:
            plan_cpus(topo, osd, ClientSpec(), runs_fio=False)
        assert err.value.field == "spec.osd.reactors"
        return
    # no fio here: the OSDs may take both CPUs (a node with OSDs and no client)
    plan = plan_cpus(topo, osd, ClientSpec(), runs_fio=False)
    assert {f"osd.{o.osd_id}": o.cpuset for o in plan.osds} == planned
    with crimson_cluster(ceph_root, ObjectStore.CYANSTORE, list(plan.osds)) as c:
        seen, problems = c.crimson_threads()
        assert problems == []
        for o in plan.osds:
            on = sorted(int(v) for v in seen[f"osd.{o.osd_id}"].values())
            assert on == sorted(o.reactors), seen
