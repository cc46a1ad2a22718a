"""Rook's real CRDs, fetched at test time through the Go module proxy (never committed)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

ROOK_VERSION = "v1.17.8"


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
