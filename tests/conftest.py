"""Shared fixtures. `control_plane`: a real control plane (etcd + kube-apiserver +
kube-controller-manager) for the k8s tests (tests/k8s, tests/chart), started once per session
and only when a test asks for it, with the BenchmarkRun CRD and Rook's CRDs installed.

The first run on a machine builds the binaries from the Go module proxy (~15-20 min, cached
under ~/.cache/crimsonbench). Tests are skipped, with the reason printed, only when Go is
missing or the build cannot work on this machine (module proxy unreachable, disk full).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
from harness import (
    ROOK_VERSION,
    BinariesUnavailable,
    ControlPlane,
    ensure_binaries,
    environmental,
    rook_crds_yaml,
)

ROOT = Path(__file__).resolve().parents[1]
CRD_PATH = ROOT / "crds" / "benchmarkrun.yaml"
STUDY_CRD_PATH = ROOT / "crds" / "benchmarkstudy.yaml"


SUMMARY: dict[str, Any] = {}


def _skip(reason: str) -> None:
    print(f"\ntests/k8s skipped: {reason}", file=sys.stderr)
    pytest.skip(reason)


def wait_established(api: kubernetes.client.ApiClient, names: list[str], timeout: float) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(api)
    deadline = time.monotonic() + timeout
    pending = list(names)
    while pending:
        crd = ext.read_custom_resource_definition(pending[0])
        assert crd.status is not None
        conds = {c.type: c for c in (crd.status.conditions or [])}
        bad = conds.get("NamesAccepted")
        if bad is not None and bad.status == "False":
            raise AssertionError(f"CRD {pending[0]} names not accepted: {bad.message}")
        est = conds.get("Established")
        if est is not None and est.status == "True":
            pending.pop(0)
            continue
        if time.monotonic() > deadline:
            raise AssertionError(f"CRD {pending[0]} not Established after {timeout}s: {conds}")
        time.sleep(0.1)


def _causes(exc: kubernetes.client.ApiException) -> str:
    try:
        status = json.loads(exc.body or "")
    except (TypeError, ValueError):
        return str(exc.body)
    causes = (status.get("details") or {}).get("causes") or []
    lines = [f"- {c.get('field', '')}: {c.get('message', '')}" for c in causes]
    return "\n".join(lines) or str(status.get("message"))


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    try:
        bin_dir = ensure_binaries()
    except BinariesUnavailable as exc:
        if environmental(exc):
            _skip(f"no Kubernetes control plane on this machine: {exc}")
        raise
    t0 = time.monotonic()
    with ControlPlane(bin_dir=bin_dir) as cp:
        SUMMARY["start_s"] = time.monotonic() - t0
        SUMMARY["timings"] = dict(cp.timings)
        rook = rook_crds_yaml(ROOK_VERSION)
        t1 = time.monotonic()
        rejected = ""
        ours = []
        for path in (CRD_PATH, STUDY_CRD_PATH):
            try:
                ours += cp.apply_yaml(path)
            except kubernetes.client.ApiException as exc:
                # The real API server refused our CRD (schema, defaults, CEL cost): say why.
                rejected = f"kube-apiserver rejects {path.relative_to(ROOT)} (HTTP {exc.status}):"
                rejected += "\n" + _causes(exc)
                break
        if rejected:
            pytest.fail(rejected, pytrace=False)
        theirs = cp.apply_yaml(rook)
        with cp.admin_api_client() as api:
            names = [d["metadata"]["name"] for d in ours + theirs]
            wait_established(api, names, timeout=60)
        SUMMARY["crds_s"] = time.monotonic() - t1
        SUMMARY["crds"] = len(names)
        yield cp
        SUMMARY["rss_mib"] = {k: v / 2**20 for k, v in cp.rss().items()}
        pids = cp.pids()
    # Teardown leaves nothing behind: no process, no directory.
    assert not cp.dir.exists(), f"{cp.dir} survived teardown"
    alive = [name for name, pid in pids.items() if _alive(pid)]
    assert not alive, f"still running after teardown: {alive}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="session")
def admin(control_plane: ControlPlane) -> Iterator[kubernetes.client.ApiClient]:
    with control_plane.admin_api_client() as api:
        yield api


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not SUMMARY:
        return
    tr = terminalreporter
    tr.section("k8s control plane")
    timings = "  ".join(f"{k}={v:.1f}s" for k, v in SUMMARY.get("timings", {}).items())
    tr.write_line(f"start {SUMMARY.get('start_s', 0):.1f}s ({timings})")
    if "crds_s" in SUMMARY:
        tr.write_line(f"{SUMMARY['crds']} CRDs applied and Established in {SUMMARY['crds_s']:.1f}s")
    if "rss_mib" in SUMMARY:
        tr.write_line("RSS: " + "  ".join(f"{k}={v:.0f}MiB" for k, v in SUMMARY["rss_mib"].items()))
