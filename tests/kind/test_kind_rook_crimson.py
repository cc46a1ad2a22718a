"""Crimson on Rook for real: kind (two workers), Rook (harness.rook.ROOK_VERSION) running
our crimson Rook image (Debian's 20.2.4 daemons + our crimson-osd as the OSD:
e2e/rook/build-crimson-image.sh), one bluestore OSD per worker, which crimson serves
through its alien threads, and our operator with a fio image on the same Ceph client.

What is checked, from outside the product:
- Rook brought the OSDs up as crimson (their metadata), every pool carries the crimson
  flag, and each OSD process on the host has alien-store threads (bluestore via alien);
- a crimson BenchmarkRun (osd.0 planned on worker 1: reactor on CPU 0, alien threads on
  CPU 1; fio on worker 2) completes with every step measured, and while its steps run the
  host sees osd.0's reactor threads on CPU 0 alone and its alien/BlueStore threads on
  CPU 1 alone; the running daemon itself (`ceph tell osd.0 config get`, not the mon
  database the run wrote) holds the layout under the option names 20.2.4 knows, and says
  it runs bluestore (preflight read the same answer before the run touched anything);
- Seastar's reactor utilization of osd.0 in every step's result, equal to the mean of the
  `ceph tell` answers the driver pod logged (read from the pod, parsed here on their own),
  and in every step clearly above what the same reactor shows idle before the run;
- restore: the CephCluster spec byte for byte, the mon database as before, and osd.0
  restarted without the run's layout (its threads back on every CPU of its node).
Skipped, printing why and the command that builds it, where the crimson Ceph root is not
built (1-2 h; never inside make test).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import pytest
from crimson_osds import config_dump, daemon_config, osd_threads, utilization_now
from harness.kind_bench import BenchStack, crimson_run_manifest
from harness.kind_rook import NAMESPACE as ROOK_NS
from kind_runs import completed_run, run_child, run_status
from polling import poll_until

from crimsonbench.manifests.fio_driver import driver_job_name

# both: the crimson tier (the heaviest marker) runs it, after kind's, where crimson is built
pytestmark = [pytest.mark.kind, pytest.mark.crimson]

RUN, POOL = "kind-crimson", "bench-crimson"
ALIEN = ("alien-store-tp", "bstore_", "rocksdb:", "cfin")


def stored_reactor_logs(s: BenchStack) -> dict[str, str]:
    """step id -> the reactor.log of each step the driver pod still keeps (the last 3)."""
    script = 'for d in /results/steps/*.stored; do echo "### ${d##*/}"; cat "$d/reactor.log"; done'
    driver = driver_job_name(run_child(s, RUN))
    out = s.kind.kubectl("-n", ROOK_NS, "exec", f"job/{driver}", "--",
                         "sh", "-c", script, check=False)  # fmt: skip
    logs: dict[str, str] = {}
    for chunk in out.split("### ")[1:]:
        name, _, text = chunk.partition("\n")
        if name.endswith(".stored") and text.strip():
            logs[name.removesuffix(".stored")] = text
    return logs


def mean_utilization(log: str, osd: str) -> float:
    """The mean over rounds of OSD's mean over its reactors, from the driver's log as
    `ceph tell` wrote it (each answer follows a "# EPOCH osd.N rc=RC" line)."""
    per_round = []
    for entry in log.split("\n# "):
        header, _, answer = entry.lstrip("# ").partition("\n")
        if header.split()[1:] == [osd, "rc=0"]:
            doc = json.loads(answer)
            shards = [m["reactor_utilization"]["value"] for m in doc["metrics"]]
            per_round.append(statistics.fmean(shards))
    assert per_round, log[:2000]
    return statistics.fmean(per_round)


def test_crimson_osds_on_rook_and_a_run_on_them(kind_rook_crimson: BenchStack) -> None:
    s = kind_rook_crimson
    workers = sorted(s.kind.workers)
    osd_nodes = s.rook.osd_nodes()
    assert sorted(osd_nodes.values()) == workers, osd_nodes
    # Rook started crimson OSDs: their own metadata, the pools, the processes
    for meta in s.rook.ceph_json("osd", "metadata"):
        assert meta.get("osd_type") == "crimson", meta
        assert meta["ceph_version"].endswith("(crimson)"), meta["ceph_version"]
    pools = s.rook.ceph_json("osd", "pool", "ls", "detail")
    assert pools and all("crimson" in p["flags_names"].split(",") for p in pools), pools
    for osd_id in osd_nodes:
        threads = osd_threads(osd_id)
        assert "alien-store-tp" in threads, sorted(threads)  # bluestore through alien threads
    node_cpus = set().union(*osd_threads(0).values())  # before the run: unpinned
    # the floor a loaded reactor must clear: an idle one polls, so it is not at 0
    idle = max(utilization_now(s, "osd.0") for _ in range(5))
    before = {"spec": json.dumps(s.rook.cluster()["spec"]), "config": config_dump(s)}

    osd_node = next(n for i, n in osd_nodes.items() if i == 0)
    client_node = next(w for w in workers if w != osd_node)
    body = crimson_run_manifest(RUN, osd_node, client_node, POOL)
    s.kind.apply(body)
    seen: list[dict[str, set[int]]] = []
    daemon: dict[str, str] = {}
    reactor_logs: dict[str, str] = {}
    t0 = time.monotonic()

    def finished() -> dict[str, Any] | None:
        st = run_status(s, RUN)
        if st.get("stage") == "steps" and int(st.get("stepsDone") or 0) >= 1:
            seen.append(osd_threads(0))  # while the run's layout is in force
            if not daemon:  # the running daemon's own view, not the mon db we wrote
                for key in ("crimson_seastar_cpu_cores", "crimson_alien_thread_cpu_cores",
                            "crimson_osd_objectstore"):  # fmt: skip
                    daemon[key] = daemon_config(s, "osd.0", key)
            if len(reactor_logs) < int(st.get("stepsDone") or 0):
                reactor_logs.update(stored_reactor_logs(s))
        return st if st.get("phase") in ("Completed", "Failed") else None

    # every step measured, from the results ConfigMaps
    run = completed_run(s, RUN, finished, steps=4)
    s.timings["crimson_run_s"] = run.ended - t0
    results = run.results
    assert all(r.fio.iops > 0 and r.fio.total_ios > 0 for r in results.values()), results

    # Seastar's reactor utilization of the planned OSD, per step, as the driver saw it
    assert reactor_logs, "no step's reactor.log was read from the driver pod"
    if os.environ.get("CB_CAPTURE_DIR"):  # tests/fixtures/crimson/make_fixtures.sh
        for step_id, log in reactor_logs.items():
            Path(os.environ["CB_CAPTURE_DIR"], f"reactor-{step_id}.log").write_text(log)
    floor = max(2 * idle, idle + 1.0)  # clearly busier than idle
    for r in results.values():
        per_osd = r.resources.reactor_util_osd or {}
        assert list(per_osd) == ["osd.0"], r.resources
        assert floor < per_osd["osd.0"] <= 100, (r.step_id, idle, r.resources)
        assert "reactor_utilization_error" not in r.extra, r.extra
    for step_id, log in reactor_logs.items():
        want = mean_utilization(log, "osd.0")
        got = results[step_id].resources.reactor_util_osd or {}
        assert abs(got["osd.0"] - want) < 1e-6, (step_id, got, want)

    # the planned layout on the real threads, under the option names 20.2.4 knows
    assert daemon == {"crimson_seastar_cpu_cores": "0", "crimson_alien_thread_cpu_cores": "1",
                      "crimson_osd_objectstore": "bluestore"}  # fmt: skip
    assert seen, "osd.0's threads were never sampled while a step ran"
    for threads in seen:
        reactors = {k: v for k, v in threads.items() if k.startswith("reactor-")}
        assert reactors == {"reactor-0": {0}}, threads
        alien = set().union(*(v for k, v in threads.items() if k.startswith(ALIEN)))
        assert alien == {1}, threads

    # restored: spec, mon database, and osd.0 restarted without the run's layout
    assert json.dumps(s.rook.cluster()["spec"]) == before["spec"]
    assert config_dump(s) == before["config"]
    poll_until("osd.0 back on every CPU of its node",
               lambda: osd_threads(0).get("reactor-0") == node_cpus, 300,
               lambda: json.dumps({k: sorted(v) for k, v in osd_threads(0).items()}))  # fmt: skip
    assert not s.rook.not_ready_reason()
    assert s.rook.osd_nodes() == osd_nodes
