"""kind clusters built from our own images (no registry), for the e2e tests.

    with kind_cluster() as k:     # KindUnavailable(reason) where the machine cannot
        k.kubectl("get", "nodes")
        k.load_image_archive(archive)          # `kind load image-archive` into every node
        k.exec(k.workers[0], "losetup", "-a")  # `docker exec` in a node

On entry: our dockerd (e2e/kind/dockerd.sh: state under ~/.cache/crimsonbench/docker and
/run/crimsonbench-docker, no iptables, no docker0) and the node image
(e2e/kind/build-node-image.sh: cached, seconds when warm); a docker network of our own
(fixed bridge name and subnet); `kind create cluster --wait` with e2e/kind/kind-config.yaml.
On exit: `kind delete cluster`, the network removed, dockerd stopped if we started it, and
the host compared with what it was (AssertionError on anything of ours left: containers,
networks, interfaces, iptables rules, nft tables, mounts, loop devices, cgroups, global
sysctls). CRIMSONBENCH_KEEP_DIR=1 exports the nodes' logs (`kind export logs`) into the
cluster's directory and keeps it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.builds import REPO, cache_root, environmental, run_build
from harness.host import loop_devices, mounts
from harness.kind_cpus import declared_cpu_mounts
from harness.waiting import wait_for

KIND_DIR = REPO / "e2e" / "kind"
CONFIG = KIND_DIR / "kind-config.yaml"
K8S_VERSION = "v1.36.3"
CLUSTER_NAME = "crimsonbench"
# Our own docker network for the nodes (kind uses an existing network of the name given in
# KIND_EXPERIMENTAL_DOCKER_NETWORK): a fixed bridge name and subnet, so the host check can
# tell our interfaces and rules from anybody else's.
NETWORK = "crimsonbench-kind"
BRIDGE = "cb-kind0"
SUBNET = "172.30.77.0/24"
CLUSTER_LABEL = "io.x-k8s.kind.cluster"
# Global (not per network namespace) sysctls that something in a kind node would write:
# the kubelet's kernel tunables and systemd's fs limits (the node image shields them:
# e2e/kind/base/crimsonbench-entrypoint), and what docker or kube-proxy could touch.
KUBELET_TUNABLES = (
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
)
GLOBAL_SYSCTLS = (
    *KUBELET_TUNABLES,
    "kernel.pid_max",
    "fs.file-max",
    "fs.nr_open",
    "fs.inotify.max_user_watches",
    "fs.inotify.max_user_instances",
    "net.ipv4.ip_forward",
    "net.bridge.bridge-nf-call-iptables",
    "net.netfilter.nf_conntrack_max",
)


class KindUnavailable(RuntimeError):
    """This machine cannot run kind; the message says why (for a skip)."""


def prerequisites() -> str:
    """'' when the machine can run our kind clusters, else why not (environmental only)."""
    if os.geteuid() != 0:
        return "not root: dockerd, debootstrap and privileged node containers need root"
    if shutil.which("go") is None:
        return "Go is not installed (kind, crictl, coredns and Kubernetes are built from source)"
    if not Path("/usr/sbin/dockerd").exists() and shutil.which("apt-get") is None:
        return "no dockerd and no apt-get to install Debian's docker.io"
    if len(os.sched_getaffinity(0)) < 2:
        return "needs 2 CPUs (static CPU manager: one reserved, one exclusive)"
    return ""


def _script(name: str, env: dict[str, str], timeout: float, image: bool = False) -> str:
    """Run e2e/kind/NAME; its last stdout word (builds.run_build: KindUnavailable where the
    machine is at fault, RuntimeError otherwise)."""
    out = run_build(KIND_DIR / name, KindUnavailable, timeout=timeout, image=image, env=env)
    return out.split()[-1]


def _run(
    cmd: Sequence[str],
    env: dict[str, str],
    timeout: float,
    input: str | bytes | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        list(cmd),
        capture_output=True,
        text=True,
        env=env,
        input=input if not isinstance(input, bytes) else input.decode(),
        timeout=timeout,
        check=False,
    )
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd[:6])} failed (rc={proc.returncode}):\n"
            f"{proc.stderr[-3000:]}\n{proc.stdout[-1000:]}"
        )
    return proc


@dataclass
class Dockerd:
    """Our dockerd (e2e/kind/dockerd.sh); `started` tells whether we must stop it."""

    env: dict[str, str]
    started: bool

    @classmethod
    def start(cls) -> Dockerd:
        base = {**os.environ}
        script = str(KIND_DIR / "dockerd.sh")
        status = subprocess.run([script, "status"], capture_output=True, text=True, env=base)
        started = status.returncode != 0
        proc = _run([script, "start"], base, timeout=1200)
        host = proc.stdout.split()[-1]
        bin_dir = _run([script, "bin"], base, timeout=30).stdout.split()[-1]
        env = {**base, "DOCKER_HOST": host, "PATH": f"{bin_dir}:{base.get('PATH', '')}"}
        return cls(env=env, started=started)

    def stop(self) -> None:
        if self.started:
            _run([str(KIND_DIR / "dockerd.sh"), "stop"], self.env, timeout=300)

    def docker(self, *args: str, timeout: float = 120, check: bool = True) -> str:
        return _run(["docker", *args], self.env, timeout=timeout, check=check).stdout


@dataclass
class KindCluster:
    name: str
    dir: Path
    kubeconfig: Path
    control_plane: str
    workers: list[str]
    env: dict[str, str]
    kind_bin: Path
    kubectl_bin: Path
    node_image: str
    timings: dict[str, float] = field(default_factory=dict)
    host_before: HostState | None = None

    @property
    def nodes(self) -> list[str]:
        """Node names; each is also the name of its docker container."""
        return [self.control_plane, *self.workers]

    def kubectl(
        self, *args: str, input: str | None = None, timeout: float = 120, check: bool = True
    ) -> str:
        cmd = [str(self.kubectl_bin), "--kubeconfig", str(self.kubeconfig), *args]
        return _run(cmd, self.env, timeout=timeout, input=input, check=check).stdout

    def kubectl_json(self, *args: str, timeout: float = 120) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json", timeout=timeout))

    def apply(self, manifest: str | dict[str, Any] | list[dict[str, Any]]) -> None:
        text = (
            manifest
            if isinstance(manifest, str)
            else yaml.safe_dump_all(manifest if isinstance(manifest, list) else [manifest])
        )
        self.kubectl("apply", "-f", "-", input=text)

    def exec(
        self,
        node: str,
        *cmd: str,
        input: str | None = None,
        timeout: float = 120,
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """Run CMD in a node's container (its host: systemd, kubelet, containerd, crictl)."""
        flags = ["-i"] if input is not None else []
        return _run(["docker", "exec", *flags, node, *cmd], self.env, timeout, input, check)

    def docker(self, *args: str, timeout: float = 120, check: bool = True) -> str:
        return _run(["docker", *args], self.env, timeout=timeout, check=check).stdout

    def load_image_archive(self, archive: Path, nodes: Sequence[str] | None = None) -> None:
        """A docker-archive (e.g. e2e/build-images.sh's) into the nodes' containerd; pods
        use it with imagePullPolicy: Never (or IfNotPresent and a non-latest tag)."""
        cmd = [str(self.kind_bin), "load", "image-archive", str(archive), "--name", self.name]
        if nodes:
            cmd += ["--nodes", ",".join(nodes)]
        _run(cmd, self.env, timeout=900)

    def node_ip(self, node: str) -> str:
        fmt = "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}"
        return self.docker("inspect", "-f", fmt, node).strip()

    def export_logs(self, dest: Path) -> None:
        _run(
            [str(self.kind_bin), "export", "logs", str(dest), "--name", self.name],
            self.env,
            timeout=300,
            check=False,
        )


# --------------------------------------------------------------------------- host state
@dataclass
class HostState:
    """What our kind cluster could leave on the host, as seen from the host."""

    links: set[str]
    iptables: set[str]
    nft_tables: set[str]
    mounts: set[str]
    loops: dict[str, str]
    sysctls: dict[str, str]
    cgroups: set[str]
    dev: set[str]
    run_containerd: bool  # the shims' sockets (/run/containerd/s): a compiled-in path
    # a kubelet on the host itself (another test's node) writes KUBELET_TUNABLES too
    host_kubelet: bool = False

    @classmethod
    def snapshot(cls) -> HostState:
        return cls(
            links=_links(),
            iptables=_iptables_lines(),
            nft_tables=_nft_tables(),
            mounts=set(mounts()),
            loops=loop_devices(),
            sysctls=_sysctls(),
            cgroups=_our_cgroups(),
            dev={p.name for p in Path("/dev").iterdir()},
            run_containerd=os.path.lexists("/run/containerd"),
            host_kubelet=_host_kubelet_running(),
        )

    def leaks_since(self, before: HostState) -> list[str]:
        """Differences that are ours (anything else on this shared machine is not judged)."""
        out = []
        ours = re.compile(r"^(br-|veth|docker|" + re.escape(BRIDGE) + ")")
        new_links = sorted(n for n in self.links - before.links if ours.match(n))
        if new_links:
            out.append(f"interfaces left: {new_links}")
        marks = ("DOCKER", BRIDGE, SUBNET.rsplit(".", 1)[0] + ".")
        new_rules = sorted(r for r in self.iptables - before.iptables if any(m in r for m in marks))
        if new_rules:
            out.append(f"iptables rules left: {new_rules}")
        new_tables = sorted(
            t for t in self.nft_tables - before.nft_tables
            if "crimsonbench" in t or "kube-proxy" in t or "docker" in t.lower()
        )  # fmt: skip
        if new_tables:
            out.append(f"nft tables left: {new_tables}")
        data = str(cache_root() / "docker")
        new_mounts = sorted(
            m for m in self.mounts - before.mounts
            if m.startswith((data, "/run/crimsonbench-docker")) or "/docker/" in m
        )  # fmt: skip
        if new_mounts:
            out.append(f"mounts left: {new_mounts}")
        new_loops = {
            dev: f for dev, f in self.loops.items()
            if dev not in before.loops and (f.startswith(data) or not Path(f).exists())
        }  # fmt: skip
        if new_loops:
            out.append(f"loop devices left (backing file ours or inside a node): {new_loops}")
        changed = self.sysctls_changed_since(before)
        if changed:
            out.append(f"global sysctls changed (before, after): {changed}")
        new_cgroups = sorted(self.cgroups - before.cgroups)
        if new_cgroups:
            out.append(f"cgroups left: {new_cgroups[:20]}")
        new_dev = sorted(self.dev - before.dev)
        if new_dev:
            out.append(f"new entries in /dev: {new_dev}")
        host_containerd = self.host_kubelet or before.host_kubelet  # its shims use it too
        if self.run_containerd and not before.run_containerd and not host_containerd:
            out.append("/run/containerd left (our dockerd's containerd shims made it)")
        return out

    def sysctls_changed_since(self, before: HostState) -> dict[str, tuple[str | None, str]]:
        """Global sysctls that changed, (before, after); the kubelet's tunables are not
        judged while a kubelet runs on the host itself (it may have written them)."""
        foreign = self.host_kubelet or before.host_kubelet
        return {
            k: (before.sysctls.get(k), v)
            for k, v in self.sysctls.items()
            if before.sysctls.get(k) != v and not (foreign and k in KUBELET_TUNABLES)
        }


def _host_kubelet_running() -> bool:
    """A kubelet process that is not in one of our node containers."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "comm").read_text().strip() != "kubelet":
                continue
            if "crimsonbench-docker" not in (proc / "cgroup").read_text():
                return True
        except OSError:
            continue
    return False


def _links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line}


def _iptables_lines() -> set[str]:
    lines: set[str] = set()
    for tool in ("iptables-save", "ip6tables-save", "iptables-legacy-save"):
        if shutil.which(tool):
            out = subprocess.run([tool], capture_output=True, text=True).stdout
            lines |= {f"{tool}: {x}" for x in out.splitlines() if x and not x.startswith("#")}
    return lines


def _nft_tables() -> set[str]:
    if shutil.which("nft") is None:
        return set()
    out = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    return {x.strip() for x in out.splitlines() if x.strip()}


def _sysctls() -> dict[str, str]:
    out = {}
    for key in GLOBAL_SYSCTLS:
        p = Path("/proc/sys", *key.split("."))
        if p.exists():
            out[key] = " ".join(p.read_text().split())
    return out


def _our_cgroups() -> set[str]:
    out: set[str] = set()
    for top in Path("/sys/fs/cgroup").glob("*/crimsonbench-docker"):
        out |= {str(d) for d in top.iterdir() if d.is_dir()}
    return out


# --------------------------------------------------------------------------- cluster
def render_config(
    node_image_labels: dict[str, str],
    workers: int,
    host_dev: bool,
    cpu_manager: bool,
    worker_mounts: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """e2e/kind/kind-config.yaml for this run: the etcd tag the node image carries, WORKERS
    workers like the file's first, host /dev in the workers (loop devices attached later
    appear in them), the static CPU manager patch dropped if not wanted, WORKER_MOUNTS
    (kind extraMounts) added to every worker."""
    cfg: dict[str, Any] = yaml.safe_load(CONFIG.read_text())
    etcd_tag = node_image_labels.get("crimsonbench.etcd-image-tag")
    if not etcd_tag:
        raise RuntimeError("node image has no crimsonbench.etcd-image-tag label")
    patches = []
    for p in cfg.get("kubeadmConfigPatches", []):
        doc = yaml.safe_load(p)
        if doc.get("kind") == "ClusterConfiguration" and "etcd" in doc:
            doc["etcd"]["local"]["imageTag"] = etcd_tag
        patches.append(yaml.safe_dump(doc))
    cfg["kubeadmConfigPatches"] = patches
    nodes = cfg["nodes"]
    control = [n for n in nodes if n["role"] == "control-plane"]
    worker = dict(next(n for n in nodes if n["role"] == "worker"))
    if not cpu_manager:
        worker.pop("kubeadmConfigPatchesJSON6902", None)
    if host_dev:
        worker["extraMounts"] = [*worker.get("extraMounts", []),
                                 {"hostPath": "/dev", "containerPath": "/dev"}]  # fmt: skip
    if worker_mounts:
        worker["extraMounts"] = [*worker.get("extraMounts", []), *map(dict, worker_mounts)]
    for m in worker.get("extraMounts", []):
        # docker would create a missing host path: never let it change the host
        if not Path(m["hostPath"]).exists():
            raise KindUnavailable(f"extraMounts: {m['hostPath']} does not exist on this host")
    cfg["nodes"] = [*control, *[copy.deepcopy(worker) for _ in range(workers)]]
    return cfg


@contextlib.contextmanager
def kind_cluster(
    workers: int = 2,
    cpu_manager: bool = True,
    host_dev: bool = False,
    name: str = CLUSTER_NAME,
    wait: str = "600s",
    declared_cpus: int | None = None,
) -> Iterator[KindCluster]:
    """A kind cluster (1 control plane + WORKERS workers, all Ready) from our node image;
    on exit deleted and the host checked. Raises KindUnavailable where the machine cannot.
    declared_cpus: the workers' kubelets report that many CPUs (e2e/harness/kind_cpus.py;
    needs cpu_manager=False)."""
    reason = prerequisites()
    if reason:
        raise KindUnavailable(reason)
    if declared_cpus is not None and cpu_manager:
        raise ValueError("declared_cpus needs cpu_manager=False (it would assign fake CPUs)")
    timings: dict[str, float] = {}
    keep = os.environ.get("CRIMSONBENCH_KEEP_DIR") == "1"
    before = HostState.snapshot()
    t0 = time.monotonic()
    try:
        dockerd = Dockerd.start()
    except RuntimeError as exc:
        if environmental(exc):  # e.g. the package mirror, to install docker.io
            raise KindUnavailable(str(exc)) from exc
        raise
    timings["dockerd_start_s"] = time.monotonic() - t0
    (cache_root() / "kind").mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=f"kind-{name}-", dir=cache_root() / "kind"))
    cluster: KindCluster | None = None
    kind_bin: Path | None = None
    volumes_before: set[str] = set()
    ok = False
    try:
        volumes_before = set(dockerd.docker("volume", "ls", "-q").split())
        t = time.monotonic()
        kind_bin = Path(_script("build-kind.sh", dockerd.env, 1200))
        timings["kind_cli_s"] = time.monotonic() - t
        t = time.monotonic()
        node_image = _script("build-node-image.sh", dockerd.env, 3 * 3600, image=True)
        timings["node_image_s"] = time.monotonic() - t
        bin_dir = Path(_script("../build-k8s-binaries.sh", dockerd.env, 3600))  # cached
        labels = json.loads(
            dockerd.docker("image", "inspect", "--format", "{{json .Config.Labels}}", node_image)
        )
        mounts = declared_cpu_mounts(workdir, declared_cpus) if declared_cpus else []
        cfg = render_config(labels, workers, host_dev, cpu_manager, mounts)
        (workdir / "kind-config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        _remove_stale_cluster(dockerd, name, kind_bin, workdir / "stale-kubeconfig")
        _ensure_network(dockerd)
        env = {**dockerd.env, "KIND_EXPERIMENTAL_DOCKER_NETWORK": NETWORK}
        cluster = KindCluster(
            name=name,
            dir=workdir,
            kubeconfig=workdir / "kubeconfig",
            control_plane=f"{name}-control-plane",
            workers=[f"{name}-worker"] + [f"{name}-worker{i}" for i in range(2, workers + 1)],
            env=env,
            kind_bin=kind_bin,
            kubectl_bin=bin_dir / "kubectl",
            node_image=node_image,
            timings=timings,
            host_before=before,
        )
        t = time.monotonic()
        proc = _run(
            [
                str(kind_bin), "create", "cluster", "--name", name, "--image", node_image,
                "--config", str(workdir / "kind-config.yaml"), "--kubeconfig",
                str(cluster.kubeconfig), "--wait", wait, "--retain",
            ],
            env,
            timeout=_seconds(wait) + 600,
            check=False,
        )  # fmt: skip
        timings["create_s"] = time.monotonic() - t
        (workdir / "kind-create.log").write_text(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            cluster.export_logs(workdir / "logs")
            keep = True
            raise RuntimeError(
                f"kind create cluster failed (rc={proc.returncode}); logs in {workdir}:\n"
                f"{proc.stderr[-4000:]}"
            )
        # `--wait` covers the control plane only: the workers and the pod network too
        t = time.monotonic()
        _wait_registered(cluster, len(cluster.nodes), _seconds(wait))
        cluster.kubectl("wait", "--for=condition=Ready", "node", "--all", f"--timeout={wait}",
                        timeout=_seconds(wait) + 60)  # fmt: skip
        system = ("daemonset/kindnet", "daemonset/kube-network-policies",
                  "daemonset/kube-proxy", "deployment/coredns")  # fmt: skip
        for obj in system:
            cluster.kubectl("-n", "kube-system", "rollout", "status", obj, f"--timeout={wait}",
                            timeout=_seconds(wait) + 60)  # fmt: skip
        timings["all_ready_s"] = time.monotonic() - t
        yield cluster
        ok = True
    finally:
        if cluster is not None and keep and not (workdir / "logs").exists():
            cluster.export_logs(workdir / "logs")
        t = time.monotonic()
        problems = _teardown(dockerd, name, kind_bin, volumes_before, workdir / "kubeconfig")
        timings["delete_s"] = time.monotonic() - t
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    after = HostState.snapshot()
    problems += after.leaks_since(before)
    if problems:
        msg = "kind teardown left the host changed:\n" + "\n".join(problems)
        if ok:
            raise AssertionError(msg)
        print(msg, file=sys.stderr)  # the test's own failure is the one to report


def _wait_registered(cluster: KindCluster, count: int, timeout: float) -> None:
    """Every node has registered (`kubectl wait node --all` passes with only some: a worker
    whose kubelet fails to start never appears). NotReadyError with the kubelet's log."""

    def names() -> list[str]:
        return cluster.kubectl("get", "nodes", "-o", "name").split()

    def kubelet_logs() -> str:
        missing = [n for n in cluster.nodes if f"node/{n}" not in names()]
        return f"nodes {missing} never registered; kubelet logs: " + str({
            n: cluster.exec(n, "journalctl", "-u", "kubelet", "--no-pager", "-n", "15",
                            check=False).stdout[-2000:] for n in missing})  # fmt: skip

    wait_for(lambda: len(names()) >= count, timeout, "every kind node registered", kubelet_logs)


def _remove_stale_cluster(dockerd: Dockerd, name: str, kind_bin: Path, kubeconfig: Path) -> None:
    """A cluster of this name left in our dockerd by a run that was killed before its
    teardown (a machine restarted mid-test keeps the data root under the cache): ours, since
    the dockerd and its data root are ours alone, so it is deleted, saying so, rather than
    failing every later run. Raises if it cannot be deleted."""
    stale = _node_containers(dockerd, name, check=True)
    if not stale:
        return
    print(f"kind: deleting cluster {name} left by an interrupted run (containers {stale})",
          file=sys.stderr)  # fmt: skip
    _delete_cluster(dockerd, name, kind_bin, kubeconfig, check=True)
    kubeconfig.unlink(missing_ok=True)


def _node_containers(dockerd: Dockerd, name: str, *, check: bool) -> list[str]:
    """Every container kind made for cluster `name`, running or not."""
    return dockerd.docker(
        "ps", "-aq", "--filter", f"label={CLUSTER_LABEL}={name}", check=check
    ).split()


def _delete_cluster(
    dockerd: Dockerd, name: str, kind_bin: Path | None, kubeconfig: Path, *, check: bool
) -> list[str]:
    """`kind delete cluster`, then `docker rm -f -v` of any node container it left; what it
    had to clean up after kind. With check, a container that cannot be removed raises."""
    problems: list[str] = []
    if kind_bin is not None:
        # --kubeconfig: kind would otherwise edit ~/.kube/config
        cmd = [str(kind_bin), "delete", "cluster", "--name", name, "--kubeconfig", str(kubeconfig)]
        proc = _run(cmd, dockerd.env, 600, check=False)
        if proc.returncode != 0:
            problems.append(f"kind delete cluster failed: {proc.stderr[-1000:]}")
    left = _node_containers(dockerd, name, check=check)
    if left:
        problems.append(f"node containers left: {left}")
        dockerd.docker("rm", "-f", "-v", *left, check=check)
    return problems


def _seconds(duration: str) -> float:
    m = re.fullmatch(r"(\d+)([sm])", duration)
    if not m:
        raise ValueError(f"duration {duration!r}: use e.g. 300s or 10m")
    return int(m.group(1)) * (60 if m.group(2) == "m" else 1)


def _ensure_network(dockerd: Dockerd) -> None:
    if dockerd.docker("network", "ls", "-q", "--filter", f"name=^{NETWORK}$").strip():
        return
    dockerd.docker(
        "network", "create", "--driver", "bridge", "--subnet", SUBNET,
        "-o", f"com.docker.network.bridge.name={BRIDGE}",
        "-o", "com.docker.network.bridge.enable_ip_masquerade=false",
        "-o", "com.docker.network.driver.mtu=1500",
        NETWORK,
    )  # fmt: skip


def _teardown(
    dockerd: Dockerd, name: str, kind_bin: Path | None, volumes_before: set[str], kubeconfig: Path
) -> list[str]:
    """Delete the cluster and our network, stop dockerd if we started it; what is left."""
    problems = _delete_cluster(dockerd, name, kind_bin, kubeconfig, check=False)
    volumes = set(dockerd.docker("volume", "ls", "-q", check=False).split()) - volumes_before
    if volumes:  # the nodes' /var: `kind delete` removes them with the containers
        problems.append(f"docker volumes left: {sorted(volumes)}")
        dockerd.docker("volume", "rm", "-f", *volumes, check=False)
    if dockerd.docker("network", "ls", "-q", "--filter", f"name=^{NETWORK}$", check=False).strip():
        proc = _run(["docker", "network", "rm", NETWORK], dockerd.env, 120, check=False)
        if proc.returncode != 0:
            problems.append(f"docker network rm {NETWORK}: {proc.stderr.strip()}")
    dockerd.stop()
    return problems
