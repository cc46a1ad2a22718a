"""The run's provenance, read once its cluster is up (run.json extra.provenance): kernel,
CPU frequency governor and boost of every planned CPU where readable, the fio and Ceph
versions actually run (each OSD's own answer), and every option the plan set for an OSD
read back from the daemon's admin socket (results.provenance compares them)."""

from __future__ import annotations

import json
import logging
import platform
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from crimsonbench.errors import CrimsonBenchError
from crimsonbench.local.admin_socket import asok_command
from crimsonbench.local.ceph_cli import run
from crimsonbench.local.crimson_checks import asok_path
from crimsonbench.local.userland import Userland
from crimsonbench.plan.types import RunPlan
from crimsonbench.results.provenance import option_readback, planned_osd_options

log = logging.getLogger(__name__)
CPUFREQ = Path("/sys/devices/system/cpu")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cpu_frequency(cpus: Iterable[int], root: Path = CPUFREQ) -> dict[str, Any]:
    """Governor per CPU (null: no cpufreq here, as in most VMs) and boost if exposed."""
    governors = {str(c): _read(root / f"cpu{c}" / "cpufreq" / "scaling_governor") for c in cpus}
    boost = _read(root / "cpufreq" / "boost")
    no_turbo = _read(root / "intel_pstate" / "no_turbo")
    return {"governor": governors, "boost": boost, "intel_no_turbo": no_turbo}


def _fio_version(userland: Userland) -> str:
    try:
        return run([userland.fio(), "--version"], timeout=30, userland=userland).strip()
    except CrimsonBenchError as exc:
        return f"unknown: {exc}"


def osd_readback(plan: RunPlan, run_dir: Path, osd_ids: Iterable[int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for osd_id in osd_ids:
        path = asok_path(run_dir, osd_id)
        try:
            shown = json.loads(asok_command(path, {"prefix": "config show", "format": "json"}))
            version = json.loads(asok_command(path, {"prefix": "version", "format": "json"}))
        except (CrimsonBenchError, ValueError) as exc:
            out[f"osd.{osd_id}"] = {"error": str(exc)}
            continue
        planned = planned_osd_options(plan.ceph.config, osd_id)
        out[f"osd.{osd_id}"] = {"version": version, **option_readback(planned, shown)}
    return out


def run_provenance(plan: RunPlan, run_dir: Path, osd_ids: Iterable[int], userland: Userland,
                   ceph_version: str) -> dict[str, Any]:  # fmt: skip
    cpus = sorted(plan.local_host.cpu.osd_cpus() | {c for cl in plan.clients for c in cl.cpus})
    osds = osd_readback(plan, run_dir, osd_ids)
    for name, osd in osds.items():
        if osd.get("differ"):
            log.warning("%s did not take the planned %s", name, ", ".join(osd["differ"]))
    return {
        "kernel": f"{platform.system()} {platform.release()} {platform.version()}",
        "cpus": cpu_frequency(cpus),
        "fio": _fio_version(userland),
        "ceph": ceph_version,
        "osds": osds,
    }
