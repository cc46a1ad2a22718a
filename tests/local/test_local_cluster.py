"""Real throwaway Ceph clusters on this machine: bring-up, prep, affinity, failure, teardown.

Every test starts real ceph-mon/ceph-mgr/ceph-osd processes (no mocks). Clusters are tiny
(1-2 OSDs, 1 GiB stores, 16 MiB images) because the machine has 2 shared cores.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

import pytest

from crimsonbench.errors import ExecutionError, InvalidSpec, NotReady
from crimsonbench.local.cluster import LocalCluster, destroy
from crimsonbench.local.osds import CRIMSON_NAMES
from crimsonbench.local.procs import thread_affinity
from crimsonbench.plan.types import CephSetup, OsdCpus
from crimsonbench.spec.models import Flavor, LocalTarget, ObjectStore, OsdSpec

needs_ceph = pytest.mark.skipif(
    any(shutil.which(b) is None for b in ("ceph-mon", "ceph-mgr", "ceph-osd", "rbd")),
    reason="Ceph daemons not installed (apt-get install ceph-mon ceph-mgr ceph-osd ceph-common)",
)
pytestmark = needs_ceph

IMAGES = ("img0", "img1")
IMAGE_BYTES = 16 * 2**20
Record = Callable[[LocalCluster], None]
Check = Callable[[Path, dict[str, int]], None]


def classic(store: str, count: int = 1) -> OsdSpec:
    return OsdSpec(flavor=Flavor.CLASSIC, object_store=ObjectStore(store), count=count)


def small(
    backing: Literal["file", "loop"] = "file", crimson_binary: str | None = None
) -> LocalTarget:
    return LocalTarget(
        bluestore_size="1Gi", bluestore_backing=backing, crimson_binary=crimson_binary
    )


def prepare_and_check_data(c: LocalCluster) -> None:
    """pool + 2 tiny images + prefill, then `rbd du` must show every byte written."""
    c.create_pool("rbd", 8)
    c.create_images(IMAGES, IMAGE_BYTES)
    took = c.prefill(IMAGES, IMAGE_BYTES)
    print(f"prefill of {len(IMAGES)} x {IMAGE_BYTES >> 20} MiB took {took:.1f} s")
    assert c.rbd_du() == {name: IMAGE_BYTES for name in IMAGES}
    assert c.cli.ceph("config", "get", "client", "rbd_cache").strip() == "false"
    assert c.cli.ceph("config", "get", "client", "rbd_io_scheduler").strip() == "none"
    flags = c.cli.ceph_json("osd", "dump")["flags"]
    assert "noscrub" in flags and "nodeep-scrub" in flags
    pool = next(p for p in c.cli.ceph_json("osd", "dump")["pools"] if p["pool_name"] == "rbd")
    assert (pool["size"], pool["pg_autoscale_mode"]) == (1, "off")
    assert c.cli.ceph_json("balancer", "status")["active"] is False


def running_config(c: LocalCluster, who: str, key: str, timeout: float = 30.0) -> str:
    """`ceph config show` (the daemon's running value) answers ENOENT until the mgr has the
    daemon's report, a few seconds after bring-up: ask again until it knows."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return c.cli.ceph("config", "show", who, key)
        except ExecutionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


# A startup-only option and a command from "the plan": both must be in place when the
# OSDs boot, without a restart.
SETUP = CephSetup(
    config={"osd": {"osd_op_num_shards": "3"}, "osd.1": {"osd_op_num_threads_per_shard": "1"}},
    commands=(("osd", "set", "noout"),),
)


@pytest.mark.ceph
def test_memstore_two_osds_pinned_prepared_fio_and_clean_teardown(
    record: Record, nothing_left: Check
) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    plan = [OsdCpus(osd_id=i, reactors=(cpus[i % len(cpus)],)) for i in range(2)]
    with LocalCluster(small(), classic("memstore", 2), plan, SETUP) as c:
        root, pids = c.layout.root, c.pids()
        assert set(c.osd_pids()) == {0, 1}
        assert c.ceph_version().startswith("16.")
        assert_plan_config_applied(c)
        prepare_and_check_data(c)
        # after I/O, so the threads made on demand exist too
        seen = {i: thread_affinity(pid) for i, pid in c.osd_pids().items()}
        for want in plan:
            threads = seen[want.osd_id]
            assert len(threads) > 10, threads  # really every thread, not just the main one
            wrong = {tid: got for tid, got in threads.items() if got != list(want.reactors)}
            assert not wrong, f"osd.{want.osd_id} threads off {want.reactors}: {wrong}"
        run_fio_against(c)
        c.health_check()
    record(c)
    nothing_left(root, pids)


def assert_plan_config_applied(c: LocalCluster) -> None:
    def running(osd: str, key: str) -> str:
        return str(c.cli.ceph_json("tell", osd, "config", "get", key)[key])

    assert running("osd.0", "osd_op_num_shards") == "3"
    assert running("osd.1", "osd_op_num_threads_per_shard") == "1"
    assert running("osd.0", "osd_op_num_threads_per_shard") != "1"
    assert "noout" in c.cli.ceph_json("osd", "dump")["flags"]
    with pytest.raises(ExecutionError, match="no_such_option_xyz"):
        c.apply_config({"osd": {"no_such_option_xyz": "1"}})


def run_fio_against(c: LocalCluster) -> None:
    """fio 3.33's rbd engine reaches the cluster with client_conf().env only."""
    conf = c.client_conf()
    argv = [
        "fio",
        "--name=t",
        "--ioengine=rbd",
        f"--clientname={conf.user}",
        "--pool=rbd",
        f"--rbdname={IMAGES[0]}",
        "--rw=randwrite",
        "--bs=4k",
        "--iodepth=2",
        "--time_based",
        "--runtime=1",
        "--output-format=json",
    ]
    env = {**os.environ, **conf.env}
    res = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["jobs"][0]["write"]["total_ios"] > 0


@pytest.mark.ceph
def test_bluestore_on_file_with_ssd_settings(record: Record, nothing_left: Check) -> None:
    with LocalCluster(small(), classic("bluestore")) as c:
        root, pids = c.layout.root, c.pids()
        assert (root / "osd.0" / "block").is_file()  # bluestore created its own file
        # force_ssd: SSD defaults although the VM disk reports rotational (hdd: 65536)
        deferred = running_config(c, "osd.0", "bluestore_prefer_deferred_size")
        assert deferred.strip() == "0"
        prepare_and_check_data(c)
    record(c)
    nothing_left(root, pids)


def loop_devices_unusable() -> str | None:
    """Why loop devices cannot be used here, or None if attaching one works."""
    if shutil.which("losetup") is None:
        return "losetup is not installed"
    probe = Path(f"/tmp/cb-loop-probe-{os.getpid()}")
    probe.write_bytes(b"\0" * 2**20)
    try:
        res = subprocess.run(
            ["losetup", "--find", "--show", str(probe)], capture_output=True, text=True, timeout=30
        )
        if res.returncode != 0:
            return f"losetup cannot attach a loop device: {res.stderr.strip()}"
        subprocess.run(["losetup", "--detach", res.stdout.strip()], check=True, timeout=30)
        return None
    finally:
        probe.unlink()


@pytest.mark.ceph
def test_bluestore_on_loop_device_detached_at_teardown(record: Record, nothing_left: Check) -> None:
    reason = loop_devices_unusable()
    if reason:
        pytest.skip(reason)
    with LocalCluster(small(backing="loop"), classic("bluestore")) as c:
        root, pids = c.layout.root, c.pids()
        meta = c.cli.ceph_json("osd", "metadata", "0")
        assert meta["bluestore_bdev_dev_node"].startswith("/dev/loop"), meta
        prepare_and_check_data(c)
    record(c)
    nothing_left(root, pids)


@pytest.mark.ceph
def test_two_clusters_at_once(record: Record, nothing_left: Check) -> None:
    a, b = (LocalCluster(small(), classic("memstore")) for _ in range(2))
    try:
        with ThreadPoolExecutor(max_workers=2) as ex:  # started together: ports must not clash
            for fut in [ex.submit(c.start) for c in (a, b)]:
                fut.result()
        assert a.layout.root != b.layout.root
        assert a.mon_port != b.mon_port
        for c in (a, b):
            assert c.cli.ceph_json("status")["fsid"] == c.fsid
        a.create_pool("only_in_a", 1)
        assert "only_in_a" not in b.cli.ceph("osd", "pool", "ls")
        roots, pids = (a.layout.root, b.layout.root), (a.pids(), b.pids())
        assert a.teardown() == []
        b.health_check()  # b is untouched by a's teardown
        b.wait_ready(timeout=30)
        assert b.teardown() == []
    finally:
        a.teardown()
        b.teardown()
    for c in (a, b):
        record(c)
    for root, p in zip(roots, pids, strict=True):
        nothing_left(root, p)


@pytest.mark.ceph
def test_sigkilled_osd_is_named_by_health_check(
    tmp_path: Path, record: Record, nothing_left: Check
) -> None:
    # A root too long for AF_UNIX sockets: they go through a short symlink in /tmp.
    root = tmp_path / ("long-" * 8) / "cluster"
    with LocalCluster(small(), classic("memstore"), root=root) as c:
        pids, alias = c.pids(), c.layout.run
        assert alias.is_symlink() and alias.resolve() == root / "run"
        asok = str(alias / "ceph-osd.0.asok")
        assert (
            "16."
            in json.loads(
                subprocess.check_output(["ceph", "--admin-daemon", asok, "version"], timeout=30)
            )["version"]
        )
        c.health_check()
        os.kill(c.osd_pids()[0], signal.SIGKILL)
        deadline = time.monotonic() + 10  # the kernel needs a moment to reap it
        with pytest.raises(ExecutionError, match=r"osd\.0 .*killed by SIGKILL"):
            while time.monotonic() < deadline:
                c.health_check()
                time.sleep(0.1)
    record(c)
    nothing_left(root, pids)
    assert not alias.is_symlink()


@pytest.mark.ceph
@pytest.mark.parametrize("exc_type", [RuntimeError, KeyboardInterrupt])
def test_exception_inside_with_tears_down(
    exc_type: type[BaseException], record: Record, nothing_left: Check
) -> None:
    cluster = LocalCluster(small(), classic("memstore"))
    with pytest.raises(exc_type), cluster as c:
        root, pids = c.layout.root, c.pids()
        raise exc_type("boom")
    record(cluster)
    nothing_left(root, pids)


@pytest.mark.ceph
def test_bring_up_deadline_names_what_is_missing_and_tears_down(nothing_left: Check) -> None:
    cluster = LocalCluster(small(), classic("memstore"), ready_timeout=0.5)
    with pytest.raises(NotReady, match="still missing: .*(mgr|osd|PG)"):
        cluster.start()
    nothing_left(cluster.layout.root, {})


def test_crimson_without_binary_fails_before_creating_anything(tmp_path: Path) -> None:
    if any(shutil.which(n) for n in CRIMSON_NAMES):
        pytest.skip("a crimson OSD binary is installed here")
    root = tmp_path / "cluster"
    osd = OsdSpec(flavor=Flavor.CRIMSON, object_store=ObjectStore.CYANSTORE)
    with pytest.raises(InvalidSpec, match="crimson-osd.*Debian") as err:
        LocalCluster(small(), osd, root=root)
    assert err.value.field == "spec.osd.flavor"
    assert not root.exists()
    with pytest.raises(InvalidSpec, match="/no/such/crimson-osd"):
        LocalCluster(small(crimson_binary="/no/such/crimson-osd"), osd, root=root)


@pytest.mark.ceph
def test_keep_cluster_leaves_it_running_until_destroy(nothing_left: Check) -> None:
    target = LocalTarget(bluestore_size="1Gi", keep_cluster=True)
    with LocalCluster(target, classic("memstore")) as c:
        root, pids = c.layout.root, c.pids()
    try:
        assert all(Path(f"/proc/{pid}").exists() for pid in pids.values())
        assert c.cli.ceph_json("status")["fsid"] == c.fsid
    finally:
        assert destroy(root) == []
    nothing_left(root, pids)
