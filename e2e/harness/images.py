"""Container images for the kind nodes, without a registry.

- a minimal image (the "pause" program: a static Go binary that waits for a signal),
  packed as a docker-archive by hand (one layer, one file) — nothing to pull, nothing to
  build it with but Go (tests/kind/test_kind_cluster.py loads it into the nodes);
- our two images (fio runner, operator) from ./Dockerfile via e2e/build-images.sh.

Everything is cached outside the repository, under ~/.cache/crimsonbench/images.

A failed build of our own image files (./Dockerfile, e2e/build-images.sh, the images under
e2e/) is a failure, whatever its output says (ImageBuildFailed; a mirror we cannot reach
is no excuse: the CI machine reaches Debian's). The one exception, a skip with the reason
printed: a registry that refuses to serve a third-party image (registry_pull_refusal);
no registry is reachable on our machines.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from harness.builds import REPO, cache_root, run_build

PAUSE_IMAGE = "localhost/crimsonbench-pause:1"
FIO_IMAGE = "localhost/crimsonbench-fio:dev"
OPERATOR_IMAGE = "localhost/crimsonbench-operator:dev"
BUILD_IMAGES = REPO / "e2e" / "build-images.sh"

# Blocks until SIGTERM/SIGINT, like the upstream pause container (which also reaps zombies;
# our pods share no PID namespace, so nothing to reap).
_PAUSE_GO = """\
package main

import (
\t"os"
\t"os/signal"
\t"syscall"
)

func main() {
\tc := make(chan os.Signal, 1)
\tsignal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
\t<-c
}
"""


class ImagesUnavailable(RuntimeError):
    """An image cannot be built on this machine (the message says what is missing): a tool
    missing without root to install it, or a registry refusing a third-party image."""


class ImageBuildFailed(Exception):
    """A build of our own image files failed: the test fails. Not a RuntimeError, so no
    `except RuntimeError` + environmental() can turn it into a skip."""


def cache_dir() -> Path:
    d = cache_root() / "images"
    d.mkdir(parents=True, exist_ok=True)
    return d


def pause_archive() -> Path:
    """A docker-archive of PAUSE_IMAGE, built once with Go (static, CGO off)."""
    out = cache_dir() / "crimsonbench-pause-1.tar"
    if out.is_file():
        return out
    if shutil.which("go") is None:
        raise ImagesUnavailable("Go is not installed: cannot build the pause image")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp)
        (src / "main.go").write_text(_PAUSE_GO)
        (src / "go.mod").write_text("module crimsonbench.local/pause\n\ngo 1.21\n")
        env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
        subprocess.run(
            ["go", "build", "-trimpath", "-ldflags=-s -w", "-o", "pause", "."],
            cwd=src,
            env=env,
            check=True,
            capture_output=True,
            timeout=600,
        )
        _write_docker_archive(out, PAUSE_IMAGE, {"pause": (src / "pause").read_bytes()})
    return out


def _write_docker_archive(out: Path, ref: str, files: dict[str, bytes]) -> None:
    """The `docker save` layout: manifest.json, <config>.json, <layer>/layer.tar."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    layer_bytes = layer.getvalue()
    diff_id = "sha256:" + hashlib.sha256(layer_bytes).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": ["/pause"]},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }
    config_bytes = json.dumps(config).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    manifest = [{"Config": config_name, "RepoTags": [ref], "Layers": ["layer/layer.tar"]}]
    tmp = out.with_suffix(".tmp")
    with tarfile.open(tmp, mode="w") as tar:
        for name, data in (
            ("layer/layer.tar", layer_bytes),
            (config_name, config_bytes),
            ("manifest.json", json.dumps(manifest).encode()),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    tmp.replace(out)


def product_archives(timeout: float = 45 * 60) -> tuple[Path, Path]:
    """(fio, operator) docker-archives from ./Dockerfile, built by e2e/build-images.sh
    (cold ≈ 2-4 min; an unchanged rebuild takes seconds thanks to podman's layer cache)."""
    missing = [t for t in ("podman", "runc", "debootstrap") if shutil.which(t) is None]
    if missing and os.geteuid() != 0:
        raise ImagesUnavailable(f"{', '.join(missing)} missing and not root to install them")
    out = run_build(BUILD_IMAGES, ImagesUnavailable, failure=ImageBuildFailed, image=True,
                    timeout=timeout)  # fmt: skip
    paths = [Path(line) for line in out.split() if line.endswith(".tar")]
    if len(paths) != 2:
        raise ImageBuildFailed(f"e2e/build-images.sh printed {out!r}, not two archives")
    return paths[0], paths[1]
