"""helm, built once per machine from the Go module proxy by e2e/build-helm.sh (cached in
~/.cache/crimsonbench/helm/<version>, outside the repository)."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

from harness.controlplane import REPO, cache_root


def ensure_helm(timeout: float = 30 * 60) -> Path:
    """The helm binary (one build at a time); RuntimeError says why there is none."""
    cache = cache_root()
    if shutil.which("go") is None and not any(cache.glob("helm/*/bin/helm")):
        raise RuntimeError("Go is not installed, so helm cannot be built (e2e/build-helm.sh)")
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "helm-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.run(
            ["bash", str(REPO / "e2e" / "build-helm.sh")],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"e2e/build-helm.sh failed (rc={proc.returncode}): {proc.stderr}")
    return Path(proc.stdout.strip().splitlines()[-1])
