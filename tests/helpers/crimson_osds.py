"""Crimson OSDs of a kind stack as the host sees them (kind's nodes are containers: their
processes are the host's), and what the running daemons say through the toolbox."""

from __future__ import annotations

import statistics
from pathlib import Path

import psutil
from harness.kind_bench import BenchStack


def crimson_osds() -> dict[int, psutil.Process]:
    """osd id -> its crimson-osd process (mkfs runs left out)."""
    out = {}
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmd = proc.info["cmdline"] or []
        if proc.info["name"] == "crimson-osd" and "--mkfs" not in cmd:
            ids = [a.split("=", 1)[1] for a in cmd if a.startswith("--id=")]
            ids += [cmd[i + 1] for i, a in enumerate(cmd[:-1]) if a == "--id"]
            if ids:
                out[int(ids[0])] = proc
    return out


def osd_pid(osd_id: int) -> int | None:
    """One look (the process may end between two)."""
    proc = crimson_osds().get(osd_id)
    return None if proc is None else proc.pid


def threads_of(proc: psutil.Process) -> dict[str, set[int]]:
    """comm -> CPUs its threads may run on; the main thread (reactor 0) as reactor-0."""
    out: dict[str, set[int]] = {}
    for task in Path(f"/proc/{proc.pid}/task").iterdir():
        try:
            comm = (task / "comm").read_text().strip()
            status = (task / "status").read_text()
        except OSError:
            continue  # the thread ended
        allowed = next(ln.split()[1] for ln in status.splitlines()
                       if ln.startswith("Cpus_allowed_list"))  # fmt: skip
        cpus: set[int] = set()
        for part in allowed.split(","):
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
        out.setdefault("reactor-0" if int(task.name) == proc.pid else comm, set()).update(cpus)
    return out


def osd_threads(osd_id: int) -> dict[str, set[int]]:
    """threads_of the crimson-osd of OSD_ID; {} while it does not run."""
    proc = crimson_osds().get(osd_id)
    return {} if proc is None else threads_of(proc)


def config_dump(s: BenchStack) -> list[tuple[str, str, str]]:
    """The mon's configuration database, sorted."""
    return sorted((e["section"], e["name"], str(e["value"]))
                  for e in s.rook.ceph_json("config", "dump"))  # fmt: skip


def utilization_now(s: BenchStack, osd: str) -> float:
    """OSD's mean reactor utilization % now (`ceph tell OSD dump_metrics`)."""
    doc = s.rook.ceph_json("tell", osd, "dump_metrics", "reactor_utilization")
    return statistics.fmean(m["reactor_utilization"]["value"] for m in doc["metrics"])


def daemon_config(s: BenchStack, osd: str, option: str) -> str:
    """What the running daemon says of OPTION (`ceph tell OSD config get`)."""
    return str(s.rook.ceph_json("tell", osd, "config", "get", option)[option])
