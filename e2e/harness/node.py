"""A real node on this machine: containerd + kubelet joined to a ControlPlane as "localhost".

    with ControlPlane(scheduler=True) as cp, Node(cp, images=[...]) as node:
        ...  # pods with hostNetwork and imagePullPolicy Never really run

The settings that make Debian's containerd 1.6 + runc 1.1 and kubelet 1.36 work on this VM
(cgroup v1 hybrid, no CAP_SYS_RESOURCE; see shared ENVIRONMENT.md):
- containerd `restrict_oom_score_adj = true` (else every sandbox fails with "can't get final
  child's PID from pipe: EOF": raising oom_score_adj needs CAP_SYS_RESOURCE);
- kubelet `failCgroupV1: false`, `cgroupDriver: cgroupfs`, `cgroupsPerQOS: false` (so no
  node-allocatable enforcement either);
- no CNI config: only hostNetwork pods run, and the node keeps the not-ready taint, which
  the pods tolerate;
- the kubelet serves its API on 127.0.0.1 only, anonymous + AlwaysAllow (loopback test
  node; the API server reaches it for logs without client certificates).

Host state the kubelet changes is recorded first and put back at teardown: the sysctls
vm.overcommit_memory, kernel.panic, kernel.panic_on_oops, the directories it creates
(/var/lib/kubelet, /var/log/containers, /var/log/pods, /run/containerd, ...) and the
containers' cgroups (/sys/fs/cgroup/<controller>/k8s.io/...). Containers
are killed through containerd before it stops; leftover mounts under our directories are
unmounted. containerd's content store lives in the cache (imported images survive runs).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, cast

import kubernetes.client
import psutil
import yaml

from harness.builds import ensure_helm, environmental
from harness.controlplane import (
    NODE_NAME,
    BinariesUnavailable,
    Component,
    ControlPlane,
    StartStop,
    ensure_binaries,
    free_port,
    spawn,
    tail,
    wait_component,
)
from harness.host import iptables_rules, mounts, remove_kubelet_chains
from harness.images import (
    PAUSE_IMAGE,
    ImagesUnavailable,
    cache_dir,
    pause_archive,
    product_archives,
)
from harness.node_shape import (
    ADVERTISING_STATUS_UPDATE,
    CNI_BIN_DIR,
    CpuAdvertiser,
    PodNetwork,
    cni_available,
)

# containerd makes these at its first pod-network sandbox: libcni's result cache and the
# sandboxes' network namespaces (nsfs bind mounts)
POD_NETWORK_DIRS = ("/var/lib/cni", "/run/netns")
SYSCTLS = ("vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops")
# Paths the kubelet or containerd create outside the directories we give them.
HOST_PATHS = (
    "/var/lib/kubelet",
    "/var/log/containers",
    "/var/log/pods",
    "/run/containerd",
    "/var/lib/containerd",
    "/etc/cni",
    "/opt/cni",
    *POD_NETWORK_DIRS,
)
NOT_READY_TOLERATION = {"key": "node.kubernetes.io/not-ready", "operator": "Exists"}


NODE_LOCK = "/run/crimsonbench-node.lock"  # flock: one real-node stack at a time


def node_parts(unavailable: type[Exception], *, helm: bool = False,
               product_images: bool = False) -> tuple[Path, list[Path]]:  # fmt: skip
    """The control plane's and kubelet's binaries, and the images for the node: the pause
    image (and ours, product_images), built or cached; helm too if asked. `unavailable`
    where the machine cannot build them; a broken build script or package list fails."""
    try:
        bin_dir = ensure_binaries(extra=("kubelet",))
        if helm:
            ensure_helm()
        return bin_dir, [pause_archive(), *(product_archives() if product_images else ())]
    except (BinariesUnavailable, ImagesUnavailable, RuntimeError) as exc:
        if environmental(exc):
            raise unavailable(f"cannot build what the node needs here: {exc}") from exc
        raise


class NodeUnavailable(RuntimeError):
    """This machine cannot run a node (the message says what is missing)."""


def host_state() -> dict[str, object]:
    """What a node could leave changed: sysctls, paths, mounts under /var/lib/kubelet."""
    sysctls = {s: Path("/proc/sys", s).read_text().strip() for s in SYSCTLS}
    paths = {p: os.path.lexists(p) for p in HOST_PATHS}
    return {
        "sysctls": sysctls,
        "paths": paths,
        "mounts": sorted(mounts("/var/lib/kubelet")),
        "cgroups": _pod_cgroups(),
    }


def _pod_cgroups() -> list[str]:
    """cgroup v1 directories containerd creates for the k8s.io namespace's containers."""
    out = []
    for top in sorted(Path("/sys/fs/cgroup").glob("*/k8s.io")):
        out.append(str(top))
        out.extend(str(d) for d in sorted(top.iterdir()) if d.is_dir())
    return out


@dataclass
class Node(StartStop):
    control_plane: ControlPlane
    images: Sequence[Path] = ()
    ready_timeout: float = 120.0
    cpus: int | None = None  # advertise this many CPUs (node_shape.CpuAdvertiser)
    cni: bool = False  # a pod network (node_shape.PodNetwork): the node turns Ready
    keep_dir: bool = field(default_factory=lambda: os.environ.get("CRIMSONBENCH_KEEP_DIR") == "1")

    dir: Path = field(init=False)
    socket: Path = field(init=False)
    timings: dict[str, float] = field(init=False, default_factory=dict)
    before: dict[str, object] = field(init=False, default_factory=dict)
    before_rules: list[str] | None = field(init=False, default=None)  # iptables_rules()
    _advertiser: CpuAdvertiser | None = field(init=False, default=None)
    _network: PodNetwork | None = field(init=False, default=None)
    _components: list[Component] = field(init=False, default_factory=list)
    _lock: TextIO | None = field(init=False, default=None)
    final_host: dict[str, object] | None = field(init=False, default=None)  # at stop()
    final_rules: list[str] | None = field(init=False, default=None)  # at stop()

    # -------------------------------------------------------------- lifecycle

    def start(self) -> None:
        missing = [b for b in ("containerd", "ctr", "runc") if shutil.which(b) is None]
        if missing:
            raise NodeUnavailable(f"{', '.join(missing)} not installed (apt: containerd runc)")
        if self.cni and cni_available():
            raise NodeUnavailable(cni_available())
        if os.geteuid() != 0:
            raise NodeUnavailable("a kubelet needs root")
        kubelet = self.control_plane.bin_dir / "kubelet" if self.control_plane.bin_dir else None
        if kubelet is None or not os.access(kubelet, os.X_OK):
            raise NodeUnavailable(f"no kubelet binary at {kubelet}")
        # One real node per machine (fixed node name, kubelet ports, host network pods):
        # a second stack waits here instead of colliding with the first.
        self._lock = open(NODE_LOCK, "w")  # noqa: SIM115 - held until stop()
        t_wait = time.monotonic()
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        self.timings["waited_for_node_lock"] = time.monotonic() - t_wait
        self.before = host_state()
        self.before_rules = iptables_rules()
        t0 = time.monotonic()
        self.dir = Path(tempfile.mkdtemp(prefix="crimsonbench-node-"))
        try:
            if self.cni:
                self._start_pod_network()
            self._start_containerd()
            self.timings["containerd_ready"] = time.monotonic() - t0
            for archive in self.images:
                self.import_image(archive)
            self.timings["images_imported"] = time.monotonic() - t0
            self._start_kubelet(kubelet)
            if self.cni:  # before the advertiser: turning Ready rewrites the node's status
                self._wait_ready()
            if self.cpus is not None:
                self._advertiser = CpuAdvertiser(self.control_plane, self.cpus)
                self._advertiser.start()
            self.timings["node_ready"] = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self._advertiser is not None:
            self._advertiser.stop()
            self._advertiser = None
        kubelet = [c for c in self._components if c.name == "kubelet"]
        for c in kubelet:
            c.stop()
        # the kubelet's iptables chains outlive it (it re-creates them while it runs)
        if self.before_rules is not None:
            try:
                remove_kubelet_chains(self.before_rules)
            finally:
                self.before_rules = None
        if any(c.name == "containerd" and c.alive() for c in self._components):
            self._remove_containers()
        for c in reversed(self._components):
            c.stop()
        self._components.clear()
        self._kill_shims()
        if self._network is not None:
            self._network.stop()
            self._network = None
        for d in (getattr(self, "dir", None),):
            if d is not None:
                for target in reversed(mounts(str(d))):
                    subprocess.run(["umount", "-l", target], check=False, capture_output=True)
        self._restore_host()
        if getattr(self, "dir", None) is not None and self.dir.exists() and not self.keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        lock = getattr(self, "_lock", None)
        if lock is not None:
            # the host as this stack leaves it, read while the lock is held: a stack waiting
            # on it starts changing the host (its kubelet's chains) the moment it is released
            self.final_host, self.final_rules = host_state(), iptables_rules()
            lock.close()  # releases the node lock
            self._lock = None

    def _kill_shims(self) -> None:
        """containerd's shims daemonize (own session): any left, with the containers under
        them, would keep ports and cgroups busy after us. Killed with their children."""
        if getattr(self, "socket", None) is None:
            return
        killed: list[psutil.Process] = []
        for proc in psutil.process_iter(["cmdline"]):
            cmd = proc.info.get("cmdline") or []
            if any(str(self.socket) in part for part in cmd) and "containerd-shim" in " ".join(cmd):
                with contextlib.suppress(psutil.Error):
                    for child in proc.children(recursive=True):
                        child.kill()
                        killed.append(child)
                    proc.kill()
                    killed.append(proc)
        # gone before the host is checked: a dying shim still holds its socket
        psutil.wait_procs(killed, timeout=30)

    def _restore_host(self) -> None:
        if not self.before:
            return
        for target in reversed(mounts("/var/lib/kubelet")):
            if target not in self.before["mounts"]:  # type: ignore[operator]
                subprocess.run(["umount", "-l", target], check=False, capture_output=True)
        for name, value in self.before["sysctls"].items():  # type: ignore[attr-defined]
            with contextlib.suppress(OSError):
                Path("/proc/sys", name).write_text(value)
        # deepest first; a cgroup directory goes with rmdir once no task is left in it
        before_cgroups = set(cast(list[str], self.before["cgroups"]))
        for cg in sorted(set(_pod_cgroups()) - before_cgroups, reverse=True):
            with contextlib.suppress(OSError):
                os.rmdir(cg)
        for path, existed in self.before["paths"].items():  # type: ignore[attr-defined]
            if not existed and os.path.lexists(path):
                # a sandbox the kubelet never stopped leaves its netns mounted: rmtree
                # cannot unlink a mount point
                for target in reversed(mounts(path)):
                    subprocess.run(["umount", "-l", target], check=False, capture_output=True)
                shutil.rmtree(path, ignore_errors=True)

    def log_tail(self, component: str, lines: int = 40) -> str:
        for c in self._components:
            if c.name == component:
                return tail(c.log, lines)
        raise KeyError(component)

    # -------------------------------------------------------------- containerd

    @property
    def containerd_root(self) -> Path:
        # In the cache: imported images (hundreds of MB) survive from one run to the next.
        return cache_dir().parent / "containerd-root"

    def ctr(self, *args: str, timeout: float = 600) -> str:
        proc = subprocess.run(
            ["ctr", "--address", str(self.socket), "--namespace", "k8s.io", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"ctr {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def _start_containerd(self) -> None:
        self.socket = self.dir / "containerd.sock"
        state = self.dir / "containerd-state"
        self.containerd_root.mkdir(parents=True, exist_ok=True)
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        config = f"""\
version = 2
root = "{self.containerd_root}"
state = "{state}"
disabled_plugins = ["io.containerd.internal.v1.opt"]

[grpc]
  address = "{self.socket}"

[ttrpc]
  address = "{self.socket}.ttrpc"

[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  enable_cdi = false
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [{cri}.cni]
    bin_dir = "{CNI_BIN_DIR if self.cni else self.dir / "cni-bin"}"
    conf_dir = "{self.dir / "cni-conf"}"
"""
        cfg = self.dir / "containerd.toml"
        cfg.write_text(config)
        comp = spawn("containerd", ["containerd", "--config", str(cfg)], self.dir)
        self._components.append(comp)
        self._wait(comp, lambda: self.ctr("version", timeout=5) != "", "containerd socket")

    def _start_pod_network(self) -> None:
        with self.control_plane.admin_api_client() as api:
            svc: Any = kubernetes.client.CoreV1Api(api).read_namespaced_service(
                "kubernetes", "default")  # fmt: skip
        self._network = PodNetwork(
            self.dir, svc.spec.cluster_ip, svc.spec.ports[0].port, self.control_plane.port
        )
        self._network.write_config()
        self._network.start()

    def _wait_ready(self) -> None:
        def ready() -> bool:
            with self.control_plane.admin_api_client() as api:
                node: Any = kubernetes.client.CoreV1Api(api).read_node(NODE_NAME)
            conds = {c.type: c.status for c in node.status.conditions or []}
            return conds.get("Ready") == "True"

        kubelet = next(c for c in self._components if c.name == "kubelet")
        self._wait(kubelet, ready, f"node {NODE_NAME} Ready (pod network)")

    def import_image(self, archive: Path) -> None:
        """`ctr images import`, skipped when this exact archive was imported before."""
        digest = _file_digest(archive)
        marker = self.containerd_root / "crimsonbench-imported" / archive.name
        if marker.is_file() and marker.read_text() == digest:
            with contextlib.suppress(RuntimeError):
                names = self.ctr("images", "ls", "-q", timeout=30).split()
                refs = _archive_refs(archive)
                if refs and all(_normalized(r) in names for r in refs):
                    return
        self.ctr("images", "import", str(archive))
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(digest)

    def _remove_containers(self) -> None:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            for task in self.ctr("tasks", "ls", "-q", timeout=30).split():
                with contextlib.suppress(RuntimeError):
                    self.ctr("tasks", "kill", "-a", "-s", "SIGKILL", task, timeout=30)
                with contextlib.suppress(RuntimeError):
                    self.ctr("tasks", "rm", "-f", task, timeout=30)
            for container in self.ctr("containers", "ls", "-q", timeout=30).split():
                with contextlib.suppress(RuntimeError):
                    self.ctr("containers", "rm", container, timeout=30)

    # -------------------------------------------------------------- kubelet

    def _start_kubelet(self, binary: Path) -> None:
        cp = self.control_plane
        kubeconfig = cp.kubeconfig(
            self.dir / "kubelet.kubeconfig", token=cp.token(f"system:node:{NODE_NAME}")
        )
        self.kubelet_port, healthz = free_port(), free_port()
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupsPerQOS": False,
            "enforceNodeAllocatable": [],
            "address": "127.0.0.1",
            "port": self.kubelet_port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": healthz,
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "podLogsDir": str(self.dir / "pod-logs"),
            "failSwapOn": False,
            # a shared VM disk: never evict or garbage-collect our imported images
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
            },  # fmt: skip
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False,
            "syncFrequency": "5s",
            "nodeStatusUpdateFrequency": "5s" if self.cpus is None else ADVERTISING_STATUS_UPDATE,
            "nodeStatusReportFrequency": "5m" if self.cpus is None else ADVERTISING_STATUS_UPDATE,
            "registerNode": True,
            "resolvConf": "/etc/resolv.conf",
        }
        cfg = self.dir / "kubelet.yaml"
        cfg.write_text(yaml.safe_dump(config))
        comp = spawn(
            "kubelet",
            [
                str(binary),
                f"--config={cfg}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={self.dir / 'kubelet'}",
                # no --node-ip: the kubelet refuses a loopback one; the API server reaches
                # it by the Hostname address "localhost" instead (its preferred type)
                f"--hostname-override={NODE_NAME}",
                "--v=1",
            ],
            self.dir,
        )
        self._components.append(comp)
        with cp.admin_api_client() as api:
            core = kubernetes.client.CoreV1Api(api)
            self._wait(comp, lambda: _node_registered(core), f"node {NODE_NAME} registered")

    def _wait(self, comp: Component, probe: Callable[[], object], what: str) -> None:
        wait_component(comp, probe, what, self.ready_timeout)


def _node_registered(core: kubernetes.client.CoreV1Api) -> bool:
    node = core.read_node(NODE_NAME)
    return bool(node.status and node.status.node_info and node.status.node_info.kubelet_version)


def _file_digest(path: Path) -> str:
    st = path.stat()
    return hashlib.sha256(f"{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()


def _archive_refs(archive: Path) -> list[str]:
    import tarfile

    with tarfile.open(archive) as tar:
        member = tar.extractfile("manifest.json")
        if member is None:
            return []
        return [t for m in json.load(member) for t in m.get("RepoTags") or []]


def _normalized(ref: str) -> str:
    """How containerd names a docker-archive tag: docker.io/library/ for short names."""
    first = ref.split("/", 1)[0]
    if "/" not in ref:
        return f"docker.io/library/{ref}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{ref}"
    return ref
