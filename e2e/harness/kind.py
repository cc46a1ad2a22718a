"""kind clusters built from our own images (no registry), for the e2e tests.

    with kind_cluster() as k:     # KindUnavailable(reason) where the machine cannot
        k.kubectl("get", "nodes")
        k.load_image_archive(archive)          # `kind load image-archive` into every node
        k.exec(k.workers[0], "losetup", "-a")  # `docker exec` in a node

On entry: our dockerd (dockerd.py) and the node image (e2e/kind/build-node-image.sh:
cached, seconds when warm); a docker network of our own (fixed bridge name and subnet);
`kind create cluster --wait` with e2e/kind/kind-config.yaml. On exit: `kind delete
cluster`, the network removed, dockerd stopped if we started it, and the host compared with
what it was (host.HostState: AssertionError on anything of ours left; containers and
volumes too). CRIMSONBENCH_KEEP_DIR=1 exports the nodes' logs (`kind export logs`) into
the cluster's directory and keeps it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import yaml

from harness.builds import REPO, cache_root, environmental, run_build
from harness.dockerd import NETWORK, Dockerd
from harness.host import HostState
from harness.kind_config import MissingHostPath, render_config
from harness.kind_cpus import declared_cpu_mounts
from harness.processes import run
from harness.waiting import wait_for

KIND_DIR = REPO / "e2e" / "kind"
K8S_VERSION = "v1.36.3"
CLUSTER_NAME = "crimsonbench"
CLUSTER_LABEL = "io.x-k8s.kind.cluster"


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
        return run(cmd, self.env, timeout=timeout, input=input, check=check).stdout

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
        return run(["docker", "exec", *flags, node, *cmd], self.env, timeout, input, check)

    def docker(self, *args: str, timeout: float = 120, check: bool = True) -> str:
        return run(["docker", *args], self.env, timeout=timeout, check=check).stdout

    def load_image_archive(self, archive: Path, nodes: Sequence[str] | None = None) -> None:
        """A docker-archive (e.g. e2e/build-images.sh's) into the nodes' containerd; pods
        use it with imagePullPolicy: Never (or IfNotPresent and a non-latest tag)."""
        cmd = [str(self.kind_bin), "load", "image-archive", str(archive), "--name", self.name]
        if nodes:
            cmd += ["--nodes", ",".join(nodes)]
        run(cmd, self.env, timeout=900)

    def node_ip(self, node: str) -> str:
        fmt = "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}"
        return self.docker("inspect", "-f", fmt, node).strip()

    def export_logs(self, dest: Path) -> None:
        run(
            [str(self.kind_bin), "export", "logs", str(dest), "--name", self.name],
            self.env,
            timeout=300,
            check=False,
        )


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
    if declared_cpus is not None and cpu_manager:
        raise ValueError("declared_cpus needs cpu_manager=False (it would assign fake CPUs)")
    if reason := prerequisites():
        raise KindUnavailable(reason)
    timings: dict[str, float] = {}
    keep, ok = os.environ.get("CRIMSONBENCH_KEEP_DIR") == "1", False
    before = HostState.snapshot()
    dockerd = _timed(timings, "dockerd_start_s", _start_dockerd)
    (cache_root() / "kind").mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=f"kind-{name}-", dir=cache_root() / "kind"))
    cluster: KindCluster | None = None
    kind_bin: Path | None = None
    volumes_before: set[str] = set()
    try:
        volumes_before = set(dockerd.docker("volume", "ls", "-q").split())
        kind_bin = Path(_timed(timings, "kind_cli_s", _script, "build-kind.sh", dockerd.env, 1200))
        mounts = declared_cpu_mounts(workdir, declared_cpus) if declared_cpus else []
        node_image, bin_dir = _node_config(dockerd, workdir, workers, host_dev, cpu_manager,
                                           mounts, timings)  # fmt: skip
        _remove_stale_cluster(dockerd, name, kind_bin, workdir / "stale-kubeconfig")
        dockerd.ensure_network()
        workers_named = [f"{name}-worker"] + [f"{name}-worker{i}" for i in range(2, workers + 1)]
        cluster = KindCluster(
            name=name, dir=workdir, kubeconfig=workdir / "kubeconfig",
            control_plane=f"{name}-control-plane", workers=workers_named,
            env={**dockerd.env, "KIND_EXPERIMENTAL_DOCKER_NETWORK": NETWORK},
            kind_bin=kind_bin, kubectl_bin=bin_dir / "kubectl", node_image=node_image,
            timings=timings, host_before=before,
        )  # fmt: skip
        try:
            _timed(timings, "create_s", _create, cluster, wait)
        except _CreateFailed:
            keep = True  # its logs are in the directory
            raise
        _timed(timings, "all_ready_s", _wait_ready, cluster, wait)
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
    _judge_host(problems + HostState.snapshot().leaks_since(before), ok)


T = TypeVar("T")


def _timed(timings: dict[str, float], key: str, call: Callable[..., T], *args: Any) -> T:
    t = time.monotonic()
    try:
        return call(*args)
    finally:
        timings[key] = time.monotonic() - t


def _start_dockerd() -> Dockerd:
    try:
        return Dockerd.start()
    except RuntimeError as exc:
        if environmental(exc):  # e.g. the package mirror, to install docker.io
            raise KindUnavailable(str(exc)) from exc
        raise


def _node_config(
    dockerd: Dockerd, workdir: Path, workers: int, host_dev: bool, cpu_manager: bool,
    mounts: Sequence[dict[str, Any]], timings: dict[str, float],
) -> tuple[str, Path]:  # fmt: skip
    """The node image (built, or cached) and the Kubernetes binaries' directory (kubectl);
    the cluster's kind-config.yaml written into workdir."""
    build_image = partial(_script, image=True)  # our image: any failure is ours, not a skip
    node_image = _timed(timings, "node_image_s", build_image, "build-node-image.sh", dockerd.env,
                        3 * 3600)  # fmt: skip
    bin_dir = Path(_script("../build-k8s-binaries.sh", dockerd.env, 3600))  # cached
    labels = json.loads(
        dockerd.docker("image", "inspect", "--format", "{{json .Config.Labels}}", node_image)
    )
    try:
        cfg = render_config(labels, workers, host_dev, cpu_manager, mounts)
    except MissingHostPath as exc:  # this machine's, not ours
        raise KindUnavailable(str(exc)) from exc
    (workdir / "kind-config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return node_image, bin_dir


class _CreateFailed(RuntimeError):
    pass


def _create(cluster: KindCluster, wait: str) -> None:
    """`kind create cluster`; _CreateFailed (the nodes' logs exported) when it fails."""
    argv = [str(cluster.kind_bin), "create", "cluster", "--name", cluster.name,
            "--image", cluster.node_image, "--config", str(cluster.dir / "kind-config.yaml"),
            "--kubeconfig", str(cluster.kubeconfig), "--wait", wait, "--retain"]  # fmt: skip
    proc = run(argv, cluster.env, timeout=_seconds(wait) + 600, check=False)
    (cluster.dir / "kind-create.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        cluster.export_logs(cluster.dir / "logs")
        raise _CreateFailed(f"kind create cluster failed (rc={proc.returncode}); logs in "
                            f"{cluster.dir}:\n{proc.stderr[-4000:]}")  # fmt: skip


def _wait_ready(cluster: KindCluster, wait: str) -> None:
    """`--wait` covers the control plane only: the workers and the pod network too."""
    _wait_registered(cluster, len(cluster.nodes), _seconds(wait))
    cluster.kubectl("wait", "--for=condition=Ready", "node", "--all", f"--timeout={wait}",
                    timeout=_seconds(wait) + 60)  # fmt: skip
    system = ("daemonset/kindnet", "daemonset/kube-network-policies",
              "daemonset/kube-proxy", "deployment/coredns")  # fmt: skip
    for obj in system:
        cluster.kubectl("-n", "kube-system", "rollout", "status", obj, f"--timeout={wait}",
                        timeout=_seconds(wait) + 60)  # fmt: skip


def _judge_host(problems: list[str], ok: bool) -> None:
    """What the teardown left: AssertionError after a passing test; printed after a failing
    one (the test's own failure is the one to report)."""
    if not problems:
        return
    msg = "kind teardown left the host changed:\n" + "\n".join(problems)
    if ok:
        raise AssertionError(msg)
    print(msg, file=sys.stderr)


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
        proc = run(cmd, dockerd.env, 600, check=False)
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


def _teardown(
    dockerd: Dockerd, name: str, kind_bin: Path | None, volumes_before: set[str], kubeconfig: Path
) -> list[str]:
    """Delete the cluster and our network, stop dockerd if we started it; what is left."""
    problems = _delete_cluster(dockerd, name, kind_bin, kubeconfig, check=False)
    volumes = set(dockerd.docker("volume", "ls", "-q", check=False).split()) - volumes_before
    if volumes:  # the nodes' /var: `kind delete` removes them with the containers
        problems.append(f"docker volumes left: {sorted(volumes)}")
        dockerd.docker("volume", "rm", "-f", *volumes, check=False)
    if gone := dockerd.remove_network():
        problems.append(gone)
    dockerd.stop()
    return problems
