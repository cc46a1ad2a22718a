"""The e2e our user asked for: crimson cyanstore OSDs under Rook in kind, and a cyanstore
BenchmarkRun applied with `kubectl apply -f e2e/kind/benchmarkrun-cyanstore.yaml`, run end
to end by our operator.

The CephCluster says `crimson_osd_objectstore: cyanstore` before any OSD exists; Rook
provisions its bluestore as always and our crimson image's ceph-osd reads the store from
the mon db, makes cyanstore once in the OSD's own directory and runs crimson-osd on it
(e2e/rook/image/ceph-osd). What is checked, from outside the product:
- every OSD process on the host is crimson-osd on cyanstore in its crimsonbench-cyanstore
  directory, with no alien (BlueStore) threads, and each daemon says cyanstore
  (`ceph tell osd.N config get crimson_osd_objectstore`);
- the run from the example file completes with every step measured; while its steps run
  the host sees the planned OSD's one reactor on CPU 0 alone; Seastar's reactor utilization in every
  step is clearly above what the same reactor shows idle before the run;
- restore: the CephCluster spec byte for byte, the mon database as before, the OSDs back
  (still cyanstore, Ready) and on their nodes;
- an OSD pod deleted: the OSD comes back on the same cyanstore (not made again).
Needs the crimson Ceph root (1-2 h build): skipped with the command printed where missing.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from harness.controlplane import REPO
from harness.kind_bench import BenchStack
from harness.kind_rook import NAMESPACE as ROOK_NS
from kind_runs import completed_run, run_status
from polling import poll_until

pytestmark = [pytest.mark.kind, pytest.mark.crimson]

EXAMPLE = REPO / "e2e" / "kind" / "benchmarkrun-cyanstore.yaml"
RUN = "kind-cyanstore"
ALIEN = ("alien-store-tp", "bstore_", "rocksdb:")


def crimson_osds() -> dict[int, psutil.Process]:
    """osd id -> its crimson-osd process, as the host sees it (kind's nodes are containers)."""
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
            continue
        allowed = next(ln.split()[1] for ln in status.splitlines()
                       if ln.startswith("Cpus_allowed_list"))  # fmt: skip
        cpus: set[int] = set()
        for part in allowed.split(","):
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
        out.setdefault("reactor-0" if int(task.name) == proc.pid else comm, set()).update(cpus)
    return out


def utilization(s: BenchStack, osd: str) -> float:
    doc = s.rook.ceph_json("tell", osd, "dump_metrics", "reactor_utilization")
    return statistics.fmean(m["reactor_utilization"]["value"] for m in doc["metrics"])


def daemon_store(s: BenchStack, osd_id: int) -> str:
    answer = s.rook.ceph_json("tell", f"osd.{osd_id}", "config", "get", "crimson_osd_objectstore")
    return str(answer["crimson_osd_objectstore"])


def config_dump(s: BenchStack) -> list[tuple[str, str, str]]:
    return sorted((e["section"], e["name"], str(e["value"]))
                  for e in s.rook.ceph_json("config", "dump"))  # fmt: skip


def test_cyanstore_osds_under_rook_and_the_example_run(cyanstore_stack: BenchStack) -> None:
    s = cyanstore_stack
    osd_nodes = s.rook.osd_nodes()
    assert sorted(osd_nodes.values()) == sorted(s.kind.workers), osd_nodes
    procs = crimson_osds()
    assert sorted(procs) == sorted(osd_nodes), (procs, osd_nodes)
    for osd_id, proc in procs.items():
        cmd = proc.cmdline()
        assert "--crimson_osd_objectstore=cyanstore" in cmd, cmd
        data = cmd[cmd.index("--osd-data") + 1]
        assert data == f"/var/lib/ceph/osd/ceph-{osd_id}/crimsonbench-cyanstore", cmd
        assert not [t for t in threads_of(proc) if t.startswith(ALIEN)], threads_of(proc)
        assert daemon_store(s, osd_id) == "cyanstore"
    before = {"spec": json.dumps(s.rook.cluster()["spec"]), "config": config_dump(s)}
    # the example plans the OSD of crimsonbench-worker (Rook numbers OSDs as it finds them)
    planned = next(i for i, node in osd_nodes.items() if node == "crimsonbench-worker")
    osd = f"osd.{planned}"
    idle = max(utilization(s, osd) for _ in range(5))

    # the user's file, applied as it is
    s.kind.kubectl("apply", "-f", str(EXAMPLE))
    seen: list[dict[str, set[int]]] = []
    t0 = time.monotonic()

    def finished() -> dict[str, Any] | None:
        st = run_status(s, RUN)
        if st.get("stage") == "steps" and int(st.get("stepsDone") or 0) >= 1:
            proc = crimson_osds().get(planned)
            if proc is not None:
                seen.append(threads_of(proc))
        return st if st.get("phase") in ("Completed", "Failed") else None

    run = completed_run(s, RUN, finished, steps=4)
    s.timings["cyanstore_run_s"] = run.ended - t0
    results = run.results
    floor = max(2 * idle, idle + 1.0)
    for r in results.values():
        assert r.fio.iops > 0 and r.fio.errors == 0, r.step_id
        util = (r.resources.reactor_util_osd or {}).get(osd)
        assert util is not None and floor < util <= 100, (r.step_id, idle, r.resources)
    assert seen, f"{osd}'s threads were never sampled while a step ran"
    for threads in seen:
        reactors = {k: v for k, v in threads.items() if k.startswith("reactor-")}
        assert reactors == {"reactor-0": {0}}, threads

    # restored: spec and mon db as before, the OSDs on cyanstore again, Ready, in place
    assert json.dumps(s.rook.cluster()["spec"]) == before["spec"]
    assert config_dump(s) == before["config"]
    poll_until("every OSD back on cyanstore",
               lambda: sorted(crimson_osds()) == sorted(osd_nodes)
               and all(daemon_store(s, i) == "cyanstore" for i in osd_nodes), 600,
               lambda: s.rook.diagnostics())  # fmt: skip
    assert not s.rook.not_ready_reason()
    assert s.rook.osd_nodes() == osd_nodes


def test_an_osd_pod_restart_keeps_its_cyanstore(cyanstore_stack: BenchStack) -> None:
    """Rook's OSD directory is a hostPath: the pod's successor mounts the cyanstore the
    first one made (its marker unchanged), instead of making a new empty one."""
    s = cyanstore_stack
    marker = "/var/lib/ceph/osd/ceph-1/crimsonbench-cyanstore/.crimsonbench-provisioned"
    pod = "deploy/rook-ceph-osd-1"
    made = s.kind.kubectl("-n", ROOK_NS, "exec", pod, "-c", "osd", "--", "cat", marker)
    old = crimson_osds()[1].pid
    s.kind.kubectl("-n", ROOK_NS, "delete", "pod", "-l", "ceph-osd-id=1", "--wait=false")
    # one sample per probe: the old process can vanish between two looks (CI once saw it)
    poll_until("osd.1 restarted", lambda: osd_pid(1) not in (None, old),
               600, lambda: s.rook.diagnostics())  # fmt: skip
    poll_until("the cluster Ready again", lambda: not s.rook.not_ready_reason(), 900,
               lambda: s.rook.diagnostics())  # fmt: skip
    assert s.kind.kubectl("-n", ROOK_NS, "exec", pod, "-c", "osd", "--", "cat", marker) == made
    assert daemon_store(s, 1) == "cyanstore"
