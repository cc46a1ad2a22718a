"""Rook from the Go module proxy (never committed): its real CRDs and operator chart, read
from the module at test time; its operator binary and a Rook + Ceph image built locally
(e2e/build-rook.sh, e2e/rook/build-image.sh; cached outside the repository)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from harness.controlplane import ENVIRONMENTAL, REPO
from harness.images import registry_pull_refusal

ROOK_VERSION = "v1.17.8"
# Ceph in the image e2e/rook/build-image.sh builds: reef from Debian trixie (Rook v1.17
# needs Ceph >= 18.2; bookworm's pacific is too old).
CEPH_VERSION = "18.2.7"
ROOK_IMAGE = f"localhost/rook-ceph:{ROOK_VERSION}-{CEPH_VERSION}"
BUILD_ROOK = REPO / "e2e" / "build-rook.sh"
BUILD_ROOK_IMAGE = REPO / "e2e" / "rook" / "build-image.sh"
# The crimson flavour: Debian sid's 20.2.4 daemons + our crimson-osd as the OSD
# (e2e/rook/build-crimson-image.sh, on the Ceph root of e2e/crimson/build-ceph-root.sh).
CRIMSON_CEPH_VERSION = "20.2.4"
CRIMSON_ROOK_IMAGE = f"localhost/rook-ceph:{ROOK_VERSION}-{CRIMSON_CEPH_VERSION}-crimson"
BUILD_CRIMSON_ROOK_IMAGE = REPO / "e2e" / "rook" / "build-crimson-image.sh"
# our fio runner on the same Ceph (20.2's aes256k cephx keys need a 20.2 client), built with it
CRIMSON_FIO_IMAGE = f"localhost/crimsonbench-fio:dev-ceph{CRIMSON_CEPH_VERSION}"
BUILD_CRIMSON_ROOT = (f"e2e/build-crimson.sh {CRIMSON_CEPH_VERSION} && "
                      f"e2e/crimson/build-ceph-root.sh {CRIMSON_CEPH_VERSION}")  # fmt: skip

# Build failures caused by the machine, on top of the harness's ENVIRONMENTAL markers:
# apt and pip without a mirror. Callers skip on these and fail on anything else.
ENVIRONMENTAL_BUILD = (*ENVIRONMENTAL, "Failed to fetch", "Max retries exceeded",
                       "Network is unreachable")  # fmt: skip


class RookUnavailable(RuntimeError):
    """Rook's manifests cannot be fetched here (no Go, or the module proxy failed)."""


def rook_module_dir(version: str = ROOK_VERSION) -> Path:
    """The extracted github.com/rook/rook@version module (in Go's module cache)."""
    if shutil.which("go") is None:
        raise RookUnavailable("Go is not installed; it fetches Rook through the module proxy")
    env = {
        **os.environ,
        "GOSUMDB": "off",  # the checksum database is not reachable from every machine
        "GOFLAGS": "-mod=mod",
        "GOTOOLCHAIN": "local",
    }
    # Outside any module, so a go.mod in the working directory cannot interfere.
    with tempfile.TemporaryDirectory(prefix="rook-dl-") as cwd:
        proc = subprocess.run(
            ["go", "mod", "download", "-json", f"github.com/rook/rook@{version}"],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    try:
        info = json.loads(proc.stdout)
    except json.JSONDecodeError:
        info = {}
    if proc.returncode != 0 or "Dir" not in info:
        raise RookUnavailable(
            f"go mod download github.com/rook/rook@{version} failed (rc={proc.returncode}): "
            f"{info.get('Error') or proc.stderr.strip()}"
        )
    return Path(info["Dir"])


def rook_crds_yaml(version: str = ROOK_VERSION) -> Path:
    """deploy/examples/crds.yaml of Rook `version`: CephCluster, CephBlockPool, CephClient..."""
    path = rook_module_dir(version) / "deploy" / "examples" / "crds.yaml"
    if not path.is_file():
        raise RookUnavailable(f"github.com/rook/rook@{version} has no {path.name} at {path}")
    return path


def rook_chart(dest: Path, version: str = ROOK_VERSION) -> Path:
    """Rook's own operator chart (deploy/charts/rook-ceph) copied to dest/rook-ceph with its
    `library` dependency in charts/ (helm refuses a chart whose dependency is missing, and
    the module cache is read-only). Returns the chart directory."""
    charts = rook_module_dir(version) / "deploy" / "charts"
    chart = dest / "rook-ceph"
    shutil.copytree(charts / "rook-ceph", chart)
    shutil.copytree(charts / "library", chart / "charts" / "library")
    for path in (chart, *chart.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)  # the module cache's files are 0444
    return chart


def rook_install_args(dest: Path, namespace: str, values: Path, image: str) -> list[str]:
    """`helm install` arguments for Rook's own operator chart (copied under DEST) into
    NAMESPACE with VALUES, running IMAGE (repository:tag, loaded into the nodes)."""
    repo, tag = image.rsplit(":", 1)
    return [
        "install", "rook-ceph", str(rook_chart(dest)), "--namespace", namespace,
        "--create-namespace", "-f", str(values),
        "--set", f"image.repository={repo}", "--set", f"image.tag={tag}",
    ]  # fmt: skip


def crimson_rook_image_archive(timeout: float = 30 * 60) -> Path:
    """A docker-archive of CRIMSON_ROOK_IMAGE (e2e/rook/build-crimson-image.sh; ~1 min once
    the Ceph root is built). RookUnavailable, naming the command that builds it, where the
    crimson Ceph root is not built: that build takes 1-2 h and never runs inside a test."""
    if os.geteuid() != 0:
        raise RookUnavailable("building the Rook image needs root (debootstrap, rootful podman)")
    cache = Path(os.environ.get("CRIMSONBENCH_CACHE", Path.home() / ".cache" / "crimsonbench"))
    root = cache / "ceph-root" / CRIMSON_CEPH_VERSION
    if not (root / ".done-crimson").exists():
        raise RookUnavailable(
            f"no crimson Ceph root at {root} (no Debian package ships crimson-osd); build it "
            f"once with `{BUILD_CRIMSON_ROOT}` (~2 h cold on 2 cores; it can run in the "
            "background)"
        )
    return _run_build(BUILD_CRIMSON_ROOK_IMAGE, "building the crimson Rook image", timeout,
                      image=True)  # fmt: skip


def crimson_fio_archive(timeout: float = 30 * 60) -> Path:
    """A docker-archive of CRIMSON_FIO_IMAGE (built by e2e/rook/build-crimson-image.sh with
    the crimson Rook image: see crimson_rook_image_archive)."""
    rook = crimson_rook_image_archive(timeout)
    archive = rook.parent / f"crimsonbench-fio-dev-ceph{CRIMSON_CEPH_VERSION}.tar"
    if not archive.is_file():
        raise RuntimeError(f"{BUILD_CRIMSON_ROOK_IMAGE.name} left no {archive}")
    return archive


def _run_build(script: Path, what: str, timeout: float, image: bool = False) -> Path:
    """Run a build script that prints its result path last; RookUnavailable for failures the
    machine causes, RuntimeError (a real failure) for anything else. image: it builds one
    of our images (files of ours): a failure whatever its output says, unless a registry
    refused a third-party image (harness.images.registry_pull_refusal)."""
    try:
        proc = subprocess.run(
            ["bash", str(script)], capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise RookUnavailable(f"{what} took over {timeout:.0f}s on this machine") from exc
    if proc.returncode != 0:
        msg = f"{script.relative_to(REPO)} failed (rc={proc.returncode}):\n{proc.stderr[-4000:]}"
        if image:
            refused = registry_pull_refusal(proc.stderr)
            if refused:
                raise RookUnavailable(f"{refused}\n{msg}")
            raise RuntimeError(msg)
        if any(m in proc.stderr for m in ENVIRONMENTAL_BUILD):
            raise RookUnavailable(msg)
        raise RuntimeError(msg)
    return Path(proc.stdout.strip().splitlines()[-1])


def rook_binary(timeout: float = 60 * 60) -> Path:
    """The `rook` binary of ROOK_VERSION (e2e/build-rook.sh; cold several minutes, then cached)."""
    return _run_build(BUILD_ROOK, "building rook", timeout)


def rook_image_archive(timeout: float = 90 * 60) -> Path:
    """A docker-archive of ROOK_IMAGE (e2e/rook/build-image.sh: debootstrap trixie + podman;
    cold ≈ 10 min, unchanged → seconds)."""
    if os.geteuid() != 0:
        raise RookUnavailable("building the Rook image needs root (debootstrap, rootful podman)")
    return _run_build(BUILD_ROOK_IMAGE, "building the Rook image", timeout, image=True)
