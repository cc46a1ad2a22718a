"""Helpers of the chart tests. helm is built from the Go module proxy by e2e/build-helm.sh
(cold ≈ 2 min, cached under ~/.cache/crimsonbench/helm/<version>); the tests are skipped,
with the reason printed, only when Go is missing or the proxy cannot be reached."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FULL_VALUES = Path(__file__).with_name("values-full.yaml")
PROMETHEUS_OPERATOR_VERSION = "v0.85.0"

Render = Callable[..., list[dict[str, Any]]]


def _skip(reason: str) -> None:
    print(f"\ntests/chart skipped: {reason}", file=sys.stderr)
    pytest.skip(reason)


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(helm), *args], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, f"helm {' '.join(args)} failed:\n{proc.stderr}"
    return proc


def prometheus_operator_crds(version: str = PROMETHEUS_OPERATOR_VERSION) -> list[Path]:
    """example/prometheus-operator-crd/*.yaml of the real prometheus-operator module, from the
    Go module proxy (Go's module cache, outside the repository; never committed)."""
    if shutil.which("go") is None:
        raise RuntimeError("Go is not installed; it fetches the prometheus-operator CRDs")
    env = {**os.environ, "GOSUMDB": "off", "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    module = f"github.com/prometheus-operator/prometheus-operator@{version}"
    with tempfile.TemporaryDirectory(prefix="promop-dl-") as cwd:
        proc = subprocess.run(
            ["go", "mod", "download", "-json", module],
            env=env, cwd=cwd, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
    try:
        info = json.loads(proc.stdout)
    except json.JSONDecodeError:
        info = {}
    if proc.returncode != 0 or "Dir" not in info:
        raise RuntimeError(f"go mod download {module} failed: {info.get('Error') or proc.stderr}")
    return sorted((Path(info["Dir"]) / "example" / "prometheus-operator-crd").glob("*.yaml"))
