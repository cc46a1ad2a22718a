"""Rook's real operator runs a real Ceph cluster on kind (e2e/harness/kind_bench.py: 1 mon,
1 mgr, one bluestore OSD on a loop device of each worker), and does with the CephCluster
exactly what our operator relies on:
- `spec.cephConfig` reaches the mon's config database (`ceph config get osd.N KEY`) and the
  running OSD without restarting any OSD; a section removed from it stays in the mon;
- a `spec.resources` change makes Rook roll every OSD Deployment (new pod, new resources),
  after which the cluster is Ready again;
- RBD works on a Rook pool (what the fio servers use).
The first module on the kind stack that test_kind_rook_faults.py and test_kind_rook_run.py
use next (tests/kind/conftest.py): each test puts back what it changed. The stack's
teardown checks the host is as it was.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from harness.kind_bench import BenchStack
from harness.kind_rook import NAMESPACE as ROOK_NS
from harness.rook_facade import Rook, reconcile_lines
from harness.waiting import pod_ready, wait_for
from rook_runs import osd_resources_of, toolbox

pytestmark = pytest.mark.kind

# A runtime option the OSD reads from the mon (no restart), as the operator's cephConfig is.
# (Not osd_max_backfills / osd_recovery_sleep: under reef's mClock scheduler the mon silently
# drops the former and the OSD pins the latter to 0.)
KEY, VALUE = "osd_op_complaint_time", "45"
# Guaranteed QoS, as the operator asks of OSDs: requests == limits.
OSD_RESOURCES = {
    "requests": {"cpu": "300m", "memory": "2Gi"},
    "limits": {"cpu": "300m", "memory": "2Gi"},
}
POOL = "rbd-e2e"


def test_cluster_is_really_up(kind_rook: BenchStack) -> None:
    rook = kind_rook.rook
    status = rook.ceph_json("status")
    cluster = rook.cluster()
    assert cluster["status"]["phase"] == "Ready"
    assert status["fsid"] == cluster["status"]["ceph"]["fsid"]
    assert status["monmap"]["num_mons"] == 1
    assert status["mgrmap"]["available"]
    assert rook.osd_ids() == [0, 1]
    # every daemon runs the Ceph of our image
    assert cluster["status"]["version"]["image"] == rook.image
    versions = rook.ceph_json("versions")["overall"]
    assert versions and all(f"ceph version {rook.ceph_version} " in v for v in versions), versions
    # bluestore on exactly our loop devices: each OSD on its worker's one
    metadata = {m["id"]: m for m in rook.ceph_json("osd", "metadata")}
    assert {m["osd_objectstore"] for m in metadata.values()} == {"bluestore"}
    loops = kind_rook.rook.site.loops.by_worker  # type: ignore[attr-defined]
    on_devices = {i: metadata[i]["bluestore_bdev_dev_node"] for i in metadata}
    assert on_devices == {i: loops[w] for i, w in rook.osd_nodes().items()}, (on_devices, loops)
    # a pod network: the mon listens on its Service's ClusterIP, as in Rook's own CI
    mon_ip = rook.ceph_json("mon", "dump")["mons"][0]["public_addr"].split(":")[0]
    services = rook.core.list_namespaced_service(ROOK_NS, label_selector="app=rook-ceph-mon")
    assert mon_ip in {svc.spec.cluster_ip for svc in services.items}, mon_ip
    # the mgr's modules work (they create .mgr): nothing failed. The one check allowed is
    # the host's, not Rook's: MON_DISK_LOW, the VM's disk below mon_data_avail_warn (5 %;
    # seen in a clean-clone run at 5 % free: the mon's store is on the host's disk)
    # Tentacle (20.2.4 on): the mons still allow and create `aes` cephx keys beside the new
    # aes256k, for older clients, and say so until an admin restricts auth_allowed_ciphers
    # (Rook: security.cephx.allowedCiphers), which a test cluster does not
    allowed = {"MON_DISK_LOW"}
    if int(rook.ceph_version.split(".")[0]) >= 20:
        allowed |= {"AUTH_INSECURE_KEYS_ALLOWED", "AUTH_INSECURE_KEYS_CREATABLE"}
    checks = set(status["health"].get("checks") or {})
    assert checks <= allowed, rook.ceph("health", "detail")


def test_rbd_on_a_rook_pool(kind_rook: BenchStack) -> None:
    rook = kind_rook.rook
    rook.create_block_pool(POOL, size=1)
    rook.ceph("osd", "pool", "application", "get", POOL)  # Rook enabled rbd on it
    toolbox(kind_rook, "rbd", "create", "--size", "256", f"{POOL}/img")
    out = toolbox(kind_rook, "rbd", "bench", "--io-type", "write", "--io-size", "64K",
                  "--io-total", "32M", f"{POOL}/img")  # fmt: skip
    assert "ops: 512" in out, out
    # Rook refuses to delete a pool that holds images (PoolDeletionIsBlocked: PoolNotEmpty)
    toolbox(kind_rook, "rbd", "rm", "--no-progress", f"{POOL}/img")
    rook.delete_block_pool(POOL)
    rook.wait_ready(300)


def _config_get(rook: Rook, who: str) -> float:
    """The mon database's value of KEY for `who`, as a number ("45" and "45.000000" alike)."""
    return float(rook.ceph("config", "get", who, KEY))


def _running_value(rook: Rook, osd: int) -> float:
    """KEY as the running OSD daemon has it (`ceph tell`), not the mon's database."""
    return float(rook.ceph_json("tell", f"osd.{osd}", "config", "get", KEY)[KEY])


def test_cephconfig_reaches_the_osd_without_restarts(kind_rook: BenchStack) -> None:
    rook = kind_rook.rook
    # Rook 1.17.8 restarts every raw-mode OSD once, at the first reconcile after it made
    # them (Rook.settle_osds says why): run that reconcile first, or this test's cephConfig
    # change would be the one (seen: osd.0's pod replaced)
    rook.settle_osds(900)
    kind_rook.timings["settled_osd_restarts"] = rook.settled_osd_restarts
    pods = {i: p["metadata"]["uid"] for i, p in rook.osd_pods().items()}
    gens = {i: d["metadata"]["generation"] for i, d in rook.osd_deployments().items()}
    default = _config_get(rook, "osd.0")
    assert default != float(VALUE)
    t0 = time.monotonic()
    rook.patch_cluster({"spec": {"cephConfig": {"osd.0": {KEY: VALUE}}}})
    wait_for(lambda: _config_get(rook, "osd.0") == float(VALUE), 600,
             f"ceph config get osd.0 {KEY} == {VALUE}", rook.diagnostics)  # fmt: skip
    kind_rook.timings["cephconfig_to_mon_s"] = time.monotonic() - t0
    # the running OSD has it (a runtime option: no restart needed), osd.1 does not
    wait_for(lambda: _running_value(rook, 0) == float(VALUE), 120, "osd.0 runs with it")
    assert _config_get(rook, "osd.1") == default
    assert _running_value(rook, 1) == default
    # Rook finished the reconcile of that generation, and restarted nothing
    rook.wait_ready(600)
    assert {i: p["metadata"]["uid"] for i, p in rook.osd_pods().items()} == pods, "an OSD restarted"
    assert {i: d["metadata"]["generation"] for i, d in rook.osd_deployments().items()} == gens


def test_the_operator_log_says_when_a_reconcile_starts_and_ends(kind_rook: BenchStack) -> None:
    """Readiness after a change waits for Rook's reconcile, read from the operator's log
    (Rook.reconcile_pending): its lines changed form between v1.17 and v1.20. Unread, every
    wait_ready after a change would time out.
    (Every change above waited on it; this names the cause if that ever breaks.)"""
    log = kind_rook.rook.operator_log() or ""
    seen = {(ns, done) for _, ns, done in reconcile_lines(log)}
    assert {(ROOK_NS, False), (ROOK_NS, True)} <= seen, [
        line for line in log.splitlines() if "reconcil" in line
    ][-10:]


def test_cephconfig_removed_is_not_unset(kind_rook: BenchStack) -> None:
    """Rook never removes what it set: whoever restores a cluster must `ceph config rm`."""
    rook = kind_rook.rook
    rook.patch_cluster({"spec": {"cephConfig": {"osd.0": None}}})
    rook.wait_ready(600)
    assert "osd.0" not in rook.cluster()["spec"]["cephConfig"]
    assert _config_get(rook, "osd.0") == float(VALUE)
    rook.ceph("config", "rm", "osd.0", KEY)  # as our operator's restore does
    assert all(e["name"] != KEY for e in rook.ceph_json("config", "dump"))


def test_resources_change_rolls_the_osds(kind_rook: BenchStack) -> None:
    rook = kind_rook.rook
    spec = rook.cluster()["spec"]
    assert "resources" not in spec, "the CephCluster starts without resources"

    def roll_to(resources: dict[str, Any] | None) -> None:
        """Patch spec.resources.osd (None: remove spec.resources); every OSD pod replaced,
        Ready, with those resources; Rook's reconcile done."""
        old_pods = {i: p["metadata"]["uid"] for i, p in rook.osd_pods().items()}
        old_gen = {i: d["metadata"]["generation"] for i, d in rook.osd_deployments().items()}
        rook.patch_cluster({"spec": {"resources": {"osd": resources} if resources else None}})
        want = resources or {"requests": {}, "limits": {}}

        def rolled() -> bool:
            pods = rook.osd_pods()
            return sorted(pods) == [0, 1] and all(
                p["metadata"]["uid"] != old_pods[i] and pod_ready(p) for i, p in pods.items()
            )

        wait_for(rolled, 900, "every OSD pod replaced and Ready", rook.diagnostics)
        rook.wait_ready(900)
        for i, d in rook.osd_deployments().items():
            assert d["metadata"]["generation"] > old_gen[i]
            assert osd_resources_of(d["spec"]["template"]["spec"]) == want
        for pod in rook.osd_pods().values():
            assert osd_resources_of(pod["spec"]) == want

    t0 = time.monotonic()
    roll_to(OSD_RESOURCES)
    kind_rook.timings["resources_to_osds_rolled_s"] = time.monotonic() - t0
    roll_to(None)  # back as it was, for the modules after this one
    assert rook.cluster()["spec"] == spec
