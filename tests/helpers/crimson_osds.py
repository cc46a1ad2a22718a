"""Crimson OSDs of a kind stack as the host sees them (kind's nodes are containers: their
processes are the host's), what the running daemons say through the toolbox, and what
their logs say of how they stopped."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import psutil
from harness.kind_bench import BenchStack
from harness.kind_rook import NAMESPACE as ROOK_NS
from harness.waiting import pod_ready


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


# One crimson-osd process per `pidfile_write` in the OSD's log; a stop that finished logs
# `osd - stop` (after it the store is unmounted: all cyanstore writes to its directory).
_STARTED = re.compile(r"^\S+ +(\S+ \S+) .*pidfile_write", re.M)
_STOPPED = re.compile(r"\] osd - stop$", re.M)


def unfinished_stops(log: str) -> list[str]:
    """When each crimson-osd of this OSD log (one but the last: it runs) started, of those
    that ended without finishing a stop, the --mkfs run left out. crimson 20.2.4 sometimes
    never gets from `OSD::stop` to `osd - stop` (seen on kind: the map that answers its
    MOSDMarkMeDown is the last thing it logs) and is gone seconds later, without
    unmounting its store: cyanstore keeps only what its last finished stop wrote."""
    starts = list(_STARTED.finditer(log))
    out = []
    for this, after in zip(starts, starts[1:], strict=False):
        run = log[this.start() : after.start()]
        if "OSD::mkfs" not in run and not _STOPPED.search(run):
            out.append(this.group(1))
    return out


def osd_log(s: BenchStack, osd_id: int) -> str:
    """osd.N's log file, on the node running it (Rook's dataDirHostPath)."""
    node = s.rook.osd_nodes()[osd_id]
    return s.kind.exec(node, "cat", f"/var/lib/rook/{ROOK_NS}/log/ceph-osd.{osd_id}.log").stdout


def not_ready_but_for_crimson_losses(s: BenchStack) -> tuple[str, str]:
    """(why the cluster is not ready, '') as Rook.not_ready_reason says; or ('', what was
    lost) when all that is wrong is PGs stale on OSDs whose crimson-osd ended without
    finishing a stop (the PGs its store never wrote, which no primary reports again): a
    crimson 20.2.4 defect (unfinished_stops), named rather than waited out. Anything else
    (another state, a stale PG on an OSD that always stopped cleanly, an OSD pod not
    Ready) is a reason."""
    reason = s.rook.not_ready_reason()
    if not reason.startswith("PGs: "):
        return reason, ""
    brief = s.rook.ceph_json("pg", "dump", "pgs_brief")
    pgs = brief["pg_stats"] if isinstance(brief, dict) else brief
    bad = [(p["pgid"], p["state"], int(p["acting_primary"]))
           for p in pgs if p["state"] != "active+clean"]  # fmt: skip
    stops = {osd: unfinished_stops(osd_log(s, osd)) for osd in {b[2] for b in bad}}
    unexplained = [b for b in bad if b[1] != "stale+active+clean" or not stops[b[2]]]
    pods = s.rook.osd_pods()
    if unexplained or len(pods) != s.rook.osds or not all(map(pod_ready, pods.values())):
        return f"{reason}; not a crimson store loss: {unexplained}, OSD pods {list(pods)}", ""
    return "", (f"PGs {[b[0] for b in bad]} stale: their OSDs' crimson-osd ended without "
                f"finishing a stop at {stops} (crimson 20.2.4; the store lost them)")  # fmt: skip
