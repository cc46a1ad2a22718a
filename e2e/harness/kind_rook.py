"""Rook + Ceph in a kind cluster built here (e2e/harness/kind.py): Rook's operator
(harness.rook.ROOK_VERSION) from Rook's own chart, our Rook + Ceph image
(e2e/rook/build-image.sh) loaded into the nodes, a CephCluster with 1 mon, 1 mgr and one
bluestore OSD on a loop device of each worker, and a toolbox pod for `ceph` commands.

    with kind_cluster(cpu_manager=False, declared_cpus=4) as k, kind_rook(k) as rook:
        rook.ceph_json("osd", "tree")
        rook.osd_nodes()                  # {0: "crimsonbench-worker", 1: "...-worker2"}

What differs from the real-node harness (e2e/harness/rook_cluster.py), and why:
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
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.controlplane import cache_root
from harness.helm import ensure_helm
from harness.kind import KIND_DIR, KindCluster
from harness.rook import (
    CEPH_VERSION,
    CRIMSON_CEPH_VERSION,
    CRIMSON_ROOK_IMAGE,
    CRIMSON_ROOT_CLASSIC_IMAGE,
    RELEASE,
    ROOK_IMAGE,
    config_override,
    crimson_rook_image_archive,
    rook_csi_crds,
    rook_image_archive,
    rook_install_args,
)
from harness.rook_ops import ceph_ready
from harness.waiting import wait_for

NAMESPACE = "rook-ceph"
CLUSTER = "rook-ceph"
TOOLBOX = "rook-ceph-tools"
VALUES = KIND_DIR / "rook-operator-values.yaml"
CLUSTER_TEMPLATE = KIND_DIR / "cephcluster.yaml"
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
        out = {}
        for d in Path("/sys/block").glob("loop*"):
            f = d / "loop" / "backing_file"
            if f.exists():
                backing = f.read_text().strip().removesuffix(" (deleted)")
                if backing in mine:
                    out[f"/dev/{d.name}"] = backing
        return out

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
class KindRook:
    kind: KindCluster
    loops: LoopDevices
    image: str = ROOK_IMAGE
    flavor: str = "classic"  # or "crimson": every OSD a crimson-osd (CRIMSON_ROOK_IMAGE)
    # crimson's object store: bluestore (Rook's own, through alien threads) or cyanstore /
    # seastore, made by our image's ceph-osd from the mon db (e2e/rook/image/ceph-osd)
    store: str = "bluestore"
    ceph_version: str = CEPH_VERSION  # the image's
    namespace: str = NAMESPACE
    name: str = CLUSTER
    timings: dict[str, float] = field(default_factory=dict)

    # ------------------------------------------------------------------ tools
    def helm(self, *args: str, timeout: float = 900) -> str:
        """The real helm against the kind cluster (its homes in the loops' directory)."""
        home = self.loops.dir / "helm"
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kind.kubeconfig),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }
        proc = subprocess.run([str(ensure_helm()), *args], env=env, capture_output=True,
                              text=True, timeout=timeout, check=False)  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"helm {' '.join(args[:3])} failed: {proc.stderr.strip()[-3000:]}")
        return proc.stdout

    def ceph(self, *args: str, timeout: float = 90) -> str:
        """`ceph ARGS` as client.admin, in the toolbox pod."""
        return self.kind.kubectl(
            "-n", self.namespace, "exec", f"deploy/{TOOLBOX}", "--",
            "ceph", "--connect-timeout", "30", *args, timeout=timeout,
        )  # fmt: skip

    def ceph_json(self, *args: str, timeout: float = 90) -> Any:
        return json.loads(self.ceph(*args, "--format", "json", timeout=timeout))

    def cluster(self) -> dict[str, Any]:
        out: dict[str, Any] = self.kind.kubectl_json(
            "-n", self.namespace, "get", "cephcluster", self.name)  # fmt: skip
        return out

    def pods(self, selector: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.kind.kubectl_json(
            "-n", self.namespace, "get", "pods", "-l", selector)["items"]  # fmt: skip
        return items

    def osd_pods(self) -> dict[int, dict[str, Any]]:
        """OSD id -> its current pod (not terminating)."""
        pods = self.pods("app=rook-ceph-osd")
        return {int(p["metadata"]["labels"]["ceph-osd-id"]): p for p in pods
                if not p["metadata"].get("deletionTimestamp")}  # fmt: skip

    def osd_nodes(self) -> dict[int, str]:
        """OSD id -> the node its pod is bound to ('' while unscheduled)."""
        return {i: p["spec"].get("nodeName", "") for i, p in sorted(self.osd_pods().items())}

    # ------------------------------------------------------------------ readiness
    def not_ready_reason(self) -> str:
        phase = (self.cluster().get("status") or {}).get("phase")
        if phase != "Ready":
            return f"CephCluster phase {phase!r}"
        osds = len(self.loops.by_worker)
        pools = self.ceph_json("osd", "pool", "ls", "detail")
        reason = ceph_ready(self.ceph_json("status"), pools, osds)
        if reason:
            return reason
        pods = self.osd_pods()
        if len(pods) != osds or not all(_ready(p) for p in pods.values()):
            return f"OSD pods: {[(i, _ready(p)) for i, p in sorted(pods.items())]}"
        return ""

    def wait_ready(self, timeout: float) -> None:
        reason = ["not checked yet"]

        def ready() -> bool:
            reason[0] = self.not_ready_reason()
            return not reason[0]

        wait_for(ready, timeout, "Rook's CephCluster Ready",
                 lambda: f"{reason[0]}\n{self.diagnostics()}", interval=5)  # fmt: skip

    def diagnostics(self, log_lines: int = 40) -> str:
        out = []
        with contextlib.suppress(Exception):
            out.append(f"CephCluster status: {json.dumps(self.cluster().get('status'))[:1500]}")
        with contextlib.suppress(Exception):
            out.append(self.kind.kubectl("-n", self.namespace, "get", "pods", "-o", "wide"))
        with contextlib.suppress(Exception):
            out.append("--- operator log tail:\n" + self.kind.kubectl(
                "-n", self.namespace, "logs", "deploy/rook-ceph-operator",
                f"--tail={log_lines}"))  # fmt: skip
        return "\n".join(out)

    # ------------------------------------------------------------------ bring-up
    def install_operator(self, timeout: float) -> None:
        crds = rook_csi_crds()
        if crds:  # server-side: operatorconfigs' schema is too large for an annotation
            self.kind.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(crds))
        self.helm(*rook_install_args(self.loops.dir / "chart", self.namespace, VALUES, self.image))
        self.kind.kubectl("-n", self.namespace, "rollout", "status", "deploy/rook-ceph-operator",
                          f"--timeout={int(timeout)}s", timeout=timeout + 60)  # fmt: skip

    def cluster_manifest(self) -> dict[str, Any]:
        doc: dict[str, Any] = yaml.safe_load(CLUSTER_TEMPLATE.read_text())
        doc["metadata"].update(name=self.name, namespace=self.namespace)
        doc["spec"]["cephVersion"]["image"] = self.image
        doc["spec"]["storage"]["nodes"] = [
            {"name": w, "devices": [{"name": Path(dev).name}]}
            for w, dev in sorted(self.loops.by_worker.items())
        ]
        # Rook v1.17 supports reef and squid: tentacle runs there with allowUnsupported
        doc["spec"]["cephVersion"]["allowUnsupported"] = not RELEASE.allows(self.ceph_version)
        if self.flavor == "crimson":
            # crimson-osd aborts unless its reactors are given, even to mkfs; one unpinned
            # reactor until a BenchmarkRun plans them (Rook provisions bluestore: alien threads)
            doc["spec"]["cephConfig"]["osd"] = {"crimson_seastar_num_threads": "1"}
            if self.store != "bluestore":  # before any OSD exists: each starts on it
                doc["spec"]["cephConfig"]["osd"]["crimson_osd_objectstore"] = self.store
            if self.store == "seastore":  # a file in the OSD's directory (seastore stalls
                # below 4Gi: local.osds.SEASTORE_MIN_BYTES)
                doc["spec"]["cephConfig"]["osd"]["seastore_device_size"] = "4294967296"
        return doc

    def toolbox_manifest(self) -> dict[str, Any]:
        """Rook's toolbox example, running our image's toolbox.sh (admin key from the
        rook-ceph-mon Secret, mons from the rook-ceph-mon-endpoints ConfigMap)."""
        secret = {"name": "rook-ceph-mon"}
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": TOOLBOX, "namespace": self.namespace,
                         "labels": {"app": TOOLBOX}},  # fmt: skip
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": TOOLBOX}},
                "template": {
                    "metadata": {"labels": {"app": TOOLBOX}},
                    "spec": {
                        "terminationGracePeriodSeconds": 1,
                        "containers": [{
                            "name": TOOLBOX,
                            "image": self.image,
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
        }  # fmt: skip


def _ready(pod: dict[str, Any]) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


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
) -> Iterator[KindRook]:
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
    rook = KindRook(kind, loops, image=image, flavor=flavor, store=store, ceph_version=ceph,
                    timings={"rook_image_s": time.monotonic() - t0})  # fmt: skip
    try:
        t = time.monotonic()
        kind.load_image_archive(archive)
        rook.timings["rook_image_load_s"] = time.monotonic() - t
        for worker in kind.workers:
            give_worker_its_device(kind, worker, loops.attach(worker, osd_size_gib))
        t = time.monotonic()
        rook.install_operator(operator_timeout)
        rook.timings["rook_operator_s"] = time.monotonic() - t
        t = time.monotonic()
        kind.apply([config_override(rook.namespace), rook.cluster_manifest(),
                    rook.toolbox_manifest()])  # fmt: skip
        rook.wait_ready(ready_timeout)
        rook.timings["rook_cluster_ready_s"] = time.monotonic() - t
        yield rook
    finally:
        loops.detach()
