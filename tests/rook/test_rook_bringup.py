"""Rook's real operator runs a real Ceph reef cluster on the real node, and does with the
CephCluster exactly what our operator relies on:
- `spec.cephConfig` reaches the mon's config database (`ceph config get osd.N KEY`) and the
  running OSD without restarting any OSD; a section removed from it stays in the mon;
- a `spec.resources` change makes Rook roll every OSD Deployment (new pod, new resources),
  after which the cluster is Ready again;
- RBD works on a Rook pool (what the fio Jobs use);
- teardown leaves the host as it was (host_state(), iptables-save).
Tests run in file order on one session cluster; the last one tears it down.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from harness.rook import CEPH_VERSION, ROOK_IMAGE
from harness.rook_cluster import RookStack
from harness.waiting import pod_ready, wait_for

pytestmark = pytest.mark.rook

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


def _resources(r: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {"requests": dict(r.get("requests") or {}), "limits": dict(r.get("limits") or {})}


def _osd_container(pod_spec: dict[str, Any]) -> Any:
    return next(c for c in pod_spec["containers"] if c["name"] == "osd")


def test_cluster_is_really_up(rook_stack: RookStack) -> None:
    rook = rook_stack.rook
    status = rook.ceph_json("status")
    cluster = rook.cluster()
    assert cluster["status"]["phase"] == "Ready"
    assert status["fsid"] == cluster["status"]["ceph"]["fsid"]
    assert status["monmap"]["num_mons"] == 1
    assert status["mgrmap"]["available"]
    assert rook.osd_ids() == [0, 1]
    # every daemon runs the Ceph of our image
    assert cluster["status"]["version"]["image"] == ROOK_IMAGE
    versions = rook.ceph_json("versions")["overall"]
    assert versions and all(f"ceph version {CEPH_VERSION} " in v for v in versions), versions
    # bluestore on exactly our loop devices, one OSD each
    metadata = rook.ceph_json("osd", "metadata")
    assert {m["osd_objectstore"] for m in metadata} == {"bluestore"}
    assert {m["bluestore_bdev_dev_node"] for m in metadata} == set(rook_stack.site.loops)
    # host network: the mon listens on the node's address (there is no CNI)
    node: Any = rook.core.read_node("localhost")
    node_ips = {a.address for a in node.status.addresses if a.type == "InternalIP"}
    mon_ip = rook.ceph_json("mon", "dump")["mons"][0]["public_addr"].split(":")[0]
    assert mon_ip in node_ips, (mon_ip, node_ips)
    # the mgr's modules work (they create .mgr): nothing failed
    assert status["health"]["status"] == "HEALTH_OK", rook.ceph("health", "detail")


def test_rbd_on_a_rook_pool(rook_stack: RookStack) -> None:
    rook = rook_stack.rook
    rook.create_block_pool(POOL, size=1)
    conf = str(rook_stack.site.dir / "ceph.conf")
    rook.ceph("osd", "pool", "application", "get", POOL)  # Rook enabled rbd on it
    subprocess.run(["rbd", "--conf", conf, "create", "--size", "256", f"{POOL}/img"],
                   check=True, timeout=120)  # fmt: skip
    out = subprocess.run(
        ["rbd", "--conf", conf, "bench", "--io-type", "write", "--io-size", "64K",
         "--io-total", "32M", f"{POOL}/img"],
        capture_output=True, text=True, check=True, timeout=300,
    ).stdout  # fmt: skip
    assert "ops: 512" in out, out
    rook.wait_ready(300)


def _config_get(rook: Any, who: str) -> float:
    """The mon database's value of KEY for `who`, as a number ("45" and "45.000000" alike)."""
    return float(rook.ceph("config", "get", who, KEY))


def _running_value(rook: Any, osd: int) -> float:
    """KEY as the running OSD daemon has it (`ceph tell`), not the mon's database."""
    return float(rook.ceph_json("tell", f"osd.{osd}", "config", "get", KEY)[KEY])


def test_cephconfig_reaches_the_osd_without_restarts(rook_stack: RookStack) -> None:
    rook = rook_stack.rook
    pods = {i: p["metadata"]["uid"] for i, p in rook.osd_pods().items()}
    gens = {i: d["metadata"]["generation"] for i, d in rook.osd_deployments().items()}
    default = _config_get(rook, "osd.0")
    assert default != float(VALUE)
    t0 = time.monotonic()
    rook.patch_cluster({"spec": {"cephConfig": {"osd.0": {KEY: VALUE}}}})
    wait_for(lambda: _config_get(rook, "osd.0") == float(VALUE), 600,
             f"ceph config get osd.0 {KEY} == {VALUE}", rook.diagnostics)  # fmt: skip
    rook_stack.timings["cephconfig_to_mon_s"] = time.monotonic() - t0
    # the running OSD has it (a runtime option: no restart needed), osd.1 does not
    wait_for(lambda: _running_value(rook, 0) == float(VALUE), 120, "osd.0 runs with it")
    assert _config_get(rook, "osd.1") == default
    assert _running_value(rook, 1) == default
    # Rook finished the reconcile of that generation, and restarted nothing
    rook.wait_ready(600)
    assert {i: p["metadata"]["uid"] for i, p in rook.osd_pods().items()} == pods, "an OSD restarted"
    assert {i: d["metadata"]["generation"] for i, d in rook.osd_deployments().items()} == gens


def test_cephconfig_removed_is_not_unset(rook_stack: RookStack) -> None:
    """Rook never removes what it set: whoever restores a cluster must `ceph config rm`."""
    rook = rook_stack.rook
    rook.patch_cluster({"spec": {"cephConfig": {"osd.0": None}}})
    rook.wait_ready(600)
    assert "osd.0" not in rook.cluster()["spec"]["cephConfig"]
    assert _config_get(rook, "osd.0") == float(VALUE)


def test_resources_change_rolls_the_osds(rook_stack: RookStack) -> None:
    rook = rook_stack.rook
    old_pods = {i: p["metadata"]["uid"] for i, p in rook.osd_pods().items()}
    old_gen = {i: d["metadata"]["generation"] for i, d in rook.osd_deployments().items()}
    assert sorted(old_pods) == [0, 1]
    t0 = time.monotonic()
    rook.patch_cluster({"spec": {"resources": {"osd": OSD_RESOURCES}}})

    def rolled() -> bool:
        pods = rook.osd_pods()
        return sorted(pods) == [0, 1] and all(
            p["metadata"]["uid"] != old_pods[i] and pod_ready(p) for i, p in pods.items()
        )

    wait_for(rolled, 900, "every OSD pod replaced and Ready", rook.diagnostics)
    rook.wait_ready(900)
    rook_stack.timings["resources_to_osds_rolled_s"] = time.monotonic() - t0
    for i, d in rook.osd_deployments().items():
        assert d["metadata"]["generation"] > old_gen[i]
        pod_spec = d["spec"]["template"]["spec"]
        assert _resources(_osd_container(pod_spec)["resources"]) == OSD_RESOURCES
    for pod in rook.osd_pods().values():
        assert _resources(_osd_container(pod["spec"])["resources"]) == OSD_RESOURCES
    # the setting of the earlier tests survived the restarts (it lives in the mon)
    assert _running_value(rook, 0) == float(VALUE)


def test_teardown_leaves_the_host_clean(rook_stack: RookStack) -> None:
    site = rook_stack.site
    loops = [Path(d).name for d in site.loops]
    rook_stack.close()  # raises when host_state() or iptables-save differ from before
    assert not site.teardown_problems
    assert not site.dir.exists()
    for loop in loops:
        assert not Path(f"/sys/block/{loop}/loop/backing_file").exists(), f"{loop} attached"
