"""Rook + Ceph in a kind cluster built here (e2e/harness/kind.py): Rook's operator
(harness.rook.ROOK_VERSION) from Rook's own chart, our Rook + Ceph image
(e2e/rook/build-image.sh) loaded into the nodes, a CephCluster with 1 mon, 1 mgr and one
bluestore OSD on a loop device of each worker, and a toolbox pod for `ceph` commands.

    with kind_cluster(cpu_manager=False, declared_cpus=4) as k, kind_rook(k, loops) as rook:
        rook.ceph_json("osd", "tree")     # a Rook (harness.rook_facade) on a KindSite
        rook.osd_nodes()                  # {0: "crimsonbench-worker", 1: "...-worker2"}

How, and why:
- kind has a pod network, kube-proxy and Ready nodes: Rook runs as it does in Rook's own
  CI (mons behind ClusterIP Services, OSDs on pod IPs), no host network, no NAT rule;
- each worker sees only ITS loop device: with a device visible to both workers, every
  worker's OSD prepare (`ceph-volume raw list`, which lists all devices when not on a PVC)
  would report the other worker's OSD as its own. The loop devices are attached after the
  nodes exist, and each worker's /dev keeps only its own device node (docker copied the
  host's /dev/loop* nodes into every privileged node: give_worker_its_device);
- `ceph` runs in a toolbox pod (the host cannot reach pod or Service IPs).

Teardown: the loop devices are detached lazily (the OSDs hold them open until `kind
delete cluster` ends them); `LoopDevices.release()`, called once the cluster is gone,
waits for them to go and removes their backing files.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes.config

from harness.builds import cache_root
from harness.host import loop_devices
from harness.kind import KIND_DIR, KindCluster
from harness.rook import (
    CEPH_VERSION,
    CRIMSON_CEPH_VERSION,
    CRIMSON_ROOK_IMAGE,
    CRIMSON_ROOT_CLASSIC_IMAGE,
    ROOK_IMAGE,
    crimson_rook_image_archive,
    rook_image_archive,
)
from harness.rook_facade import Rook

NAMESPACE = "rook-ceph"
CLUSTER = "rook-ceph"
TOOLBOX = "rook-ceph-tools"
GIB = 1 << 30


@dataclass
class LoopDevices:
    """One sparse backing file + loop device per worker, made on the host."""

    dir: Path
    by_worker: dict[str, str] = field(default_factory=dict)  # worker -> /dev/loopN

    def attach(self, worker: str, size_gib: int) -> str:
        backing = self.dir / f"{worker}.img"
        with open(backing, "wb") as f:
            f.truncate(size_gib * GIB)  # sparse: ceph-volume wants >= 5 GiB, uses little
        dev = subprocess.run(
            ["losetup", "--find", "--show", str(backing)],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout.strip()  # fmt: skip
        self.by_worker[worker] = dev
        return dev

    def files(self) -> set[str]:
        return {str(self.dir / f"{w}.img") for w in self.by_worker}

    def detach(self) -> None:
        """Lazy: a device still open (an OSD in a node) goes when its last user closes it."""
        for dev in self.by_worker.values():
            subprocess.run(["losetup", "--detach", dev], capture_output=True, check=False,
                           timeout=60)  # fmt: skip

    def leftover(self) -> dict[str, str]:
        """Loop devices still backed by our files (device -> file)."""
        mine = self.files()
        return {f"/dev/{d}": f for d, f in loop_devices().items() if f in mine}

    def release(self, timeout: float = 120) -> list[str]:
        """After the nodes are gone: detached and files removed; problems, if any."""
        self.detach()
        deadline = time.monotonic() + timeout
        while self.leftover() and time.monotonic() < deadline:
            time.sleep(2)
        left = self.leftover()
        shutil.rmtree(self.dir, ignore_errors=True)
        return [f"loop devices still attached: {left}"] if left else []


@dataclass
class KindSite:
    """Rook in a kind cluster (a RookSite): one loop device per worker, `ceph` in a toolbox
    pod (the host cannot reach pod or Service IPs)."""

    kind: KindCluster
    loops: LoopDevices
    template: Path = KIND_DIR / "cephcluster.yaml"
    values: Path = KIND_DIR / "rook-operator-values.yaml"

    def ceph(self, rook: Rook, args: Sequence[str], timeout: float) -> str:
        return self.kind.kubectl("-n", rook.namespace, "exec", f"deploy/{TOOLBOX}", "--", "ceph",
                                 "--connect-timeout", "30", *args, timeout=timeout)  # fmt: skip

    def spec(self, rook: Rook) -> dict[str, Any]:
        nodes = sorted(self.loops.by_worker.items())
        return {"storage": {"nodes": [{"name": w, "devices": [{"name": Path(dev).name}]}
                                      for w, dev in nodes]}}  # fmt: skip

    def extra_objects(self, rook: Rook) -> list[dict[str, Any]]:
        """Rook's toolbox example, running our image's toolbox.sh (admin key from the
        rook-ceph-mon Secret, mons from the rook-ceph-mon-endpoints ConfigMap)."""
        secret = {"name": "rook-ceph-mon"}
        return [{
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": TOOLBOX, "namespace": rook.namespace,
                         "labels": {"app": TOOLBOX}},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": TOOLBOX}},
                "template": {
                    "metadata": {"labels": {"app": TOOLBOX}},
                    "spec": {
                        "terminationGracePeriodSeconds": 1,
                        "containers": [{
                            "name": TOOLBOX,
                            "image": rook.image,
                            "imagePullPolicy": "Never",
                            "command": ["/usr/local/bin/toolbox.sh"],
                            "env": [
                                {"name": "ROOK_CEPH_USERNAME", "valueFrom": {
                                    "secretKeyRef": {**secret, "key": "ceph-username"}}},
                                {"name": "ROOK_CEPH_SECRET", "valueFrom": {
                                    "secretKeyRef": {**secret, "key": "ceph-secret"}}},
                            ],
                            "volumeMounts": [
                                {"name": "ceph-config", "mountPath": "/etc/ceph"},
                                {"name": "mon-endpoints", "mountPath": "/etc/rook"},
                            ],
                        }],
                        "volumes": [
                            {"name": "ceph-config", "emptyDir": {}},
                            {"name": "mon-endpoints", "configMap": {
                                "name": "rook-ceph-mon-endpoints",
                                "items": [{"key": "data", "path": "mon-endpoints"}]}},
                        ],
                    },
                },
            },
        }]  # fmt: skip


def give_worker_its_device(kind: KindCluster, worker: str, dev: str) -> None:
    """DEV as the only loop device in WORKER's /dev (its own tmpfs), and /run/udev there
    (OSD pods mount it) with an entry per block device, as a node running udev has: from
    Ceph 20 on, ceph-volume reads /run/udev/data/b<major>:<minor> of every device in
    /sys/block and skips them all when one is missing ("No udev data could be retrieved").

    docker copied the host's /dev/loop0..N nodes into every privileged node when it made
    it: left there, the other worker's device, once attached, shows up in this worker too,
    its OSD prepare finds both OSDs, and Rook runs both on one node (seen here)."""
    major_minor = (Path("/sys/block") / Path(dev).name / "dev").read_text().strip()
    major, minor = major_minor.split(":")
    script = (
        f'for d in /dev/loop[0-9]*; do [ "$d" = {dev} ] || rm -f "$d"; done; '
        f"[ -b {dev} ] || mknod -m 0660 {dev} b {major} {minor}; mkdir -p /run/udev/data; "
        'for b in /sys/block/*; do f=/run/udev/data/b$(cat "$b/dev"); [ -e "$f" ] || : > "$f"; '
        "done; "
        "ls /dev | grep '^loop[0-9]'"
    )
    seen = kind.exec(worker, "sh", "-c", script).stdout.split()
    if seen != [Path(dev).name]:
        raise RuntimeError(f"{worker} sees loop devices {seen}, not just {dev}")


def new_loop_devices() -> LoopDevices:
    """An empty set of loop devices with a fresh directory for their backing files."""
    (cache_root() / "kind").mkdir(parents=True, exist_ok=True)
    return LoopDevices(Path(tempfile.mkdtemp(prefix="rook-", dir=cache_root() / "kind")))


@contextlib.contextmanager
def kind_rook(
    kind: KindCluster,
    loops: LoopDevices,
    osd_size_gib: int = 6,
    operator_timeout: float = 900,
    ready_timeout: float = 2400,
    flavor: str = "classic",
    store: str = "bluestore",
    crimson_ceph: bool = False,
) -> Iterator[Rook]:
    """Rook's operator and a CephCluster with one OSD per worker (on LOOPS, attached here),
    Ready; FLAVOR crimson: every OSD a crimson-osd, on STORE (bluestore through its alien
    threads, or cyanstore / seastore set in cephConfig before the OSDs exist).
    crimson_ceph (classic): the crimson build's Ceph with the classic ceph-osd, for
    classic vs crimson on one Ceph build (else the release's Ceph).
    On exit the loop devices are detached lazily; call `loops.release()` once the nodes are
    gone (the OSDs hold them open until then)."""
    t0 = time.monotonic()
    if flavor == "crimson":
        archive, image = crimson_rook_image_archive(), CRIMSON_ROOK_IMAGE
        ceph = CRIMSON_CEPH_VERSION
    elif crimson_ceph:
        archive = crimson_rook_image_archive(osd_flavor="classic")
        image, ceph = CRIMSON_ROOT_CLASSIC_IMAGE, CRIMSON_CEPH_VERSION
    else:
        archive, image = rook_image_archive(), ROOK_IMAGE  # cached: seconds
        ceph = CEPH_VERSION
    api = kubernetes.config.new_client_from_config(config_file=str(kind.kubeconfig))
    rook = Rook(KindSite(kind, loops), api, kind.kubeconfig, loops.dir, len(kind.workers),
                image, ceph, flavor=flavor, store=store, poll_s=5,
                timings={"rook_image_s": time.monotonic() - t0})  # fmt: skip
    try:
        t = time.monotonic()
        kind.load_image_archive(archive)
        rook.timings["rook_image_load_s"] = time.monotonic() - t
        for worker in kind.workers:
            give_worker_its_device(kind, worker, loops.attach(worker, osd_size_gib))
        rook.create(operator_timeout, ready_timeout)
        yield rook
    finally:
        api.close()
        loops.detach()
