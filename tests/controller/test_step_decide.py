"""A step's whole life on the fio driver, decided from views alone (no cluster, no API): the
driver's replies are real ones (tests/fixtures/driver: a real step of the plan's own job
file through fio-driver.sh, fio's rbd engine against a real cluster), the OSD pods and
the clock are data. Start, running, about to end, done and stored; an OSD restarted
mid-step (run again, then given up); an operator restarted mid-step; a fio client lost
past its deadline; a failed step; the prefill."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from crimsonbench.controller.decisions.fio_servers import server_addresses
from crimsonbench.controller.decisions.observed import OsdPod, PodState
from crimsonbench.controller.decisions.step_decide import (
    LOST_AFTER_S,
    MAX_STEP_RETRIES,
    WAIT_MARGIN_S,
    OsdView,
    Poll,
    Prefilled,
    ReadCpuLogs,
    ReadOsds,
    Retry,
    Sample,
    Start,
    StepView,
    Store,
    next_step_actions,
    poll,
    wait_for_end,
)
from crimsonbench.errors import ExecutionError, NotReady
from crimsonbench.manifests.fio import server_job_name
from crimsonbench.manifests.fio_driver import StepReport, end_command, parse_report, poll_command
from crimsonbench.manifests.naming import LABEL_ROLE, LABEL_RUN
from crimsonbench.plan.build import build_plan
from crimsonbench.plan.hosts import ClusterLayout
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.plan.types import RunPlan
from crimsonbench.results.attempts import is_suspect_attempt
from crimsonbench.spec.models import validate_spec
from crimsonbench.spec.status import StepSample

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DRIVER = FIXTURES / "driver"
TOPOLOGY = parse_lscpu_json((FIXTURES / "lscpu" / "single-socket-8-noht.json").read_text())
PLAN = build_plan("driver", validate_spec(json.loads((DRIVER / "spec.json").read_text())),
                  ClusterLayout({"here": TOPOLOGY}, {}, ("here",), plan_osds=False))  # fmt: skip
SERVERS = json.loads((DRIVER / "servers.json").read_text())
STEP = PLAN.steps[0]


def reply(name: str) -> StepReport:
    return parse_report((DRIVER / name).read_text())


MISSING, RUNNING, DONE, FAILED = (reply(f"{n}.txt") for n in ("missing", "running", "done",
                                                              "failed"))  # fmt: skip


def osd(uid: str = "uid-a", restarts: int = 0, **kw: Any) -> OsdPod:
    """osd.0 as the fixture's step recorded it at its start: uid-a/0."""
    return OsdPod(0, "node-a", kw.pop("ready", True), uid=uid, restarts=restarts, **kw)


AT_REST = OsdView([0], [osd()])


SAMPLE = Sample(f"{LABEL_RUN}=driver-x,{LABEL_ROLE}=fio-server", None)


def started(actions: list[Any]) -> dict[str, str]:
    """The OSD incarnations of the one Start decided (its request: rendered, tested below)."""
    (start,) = actions
    assert isinstance(start, Start) and start.request.key in (STEP.id, "prefill"), actions
    return dict(start.osds)


def view(report: StepReport | None, **kw: Any) -> StepView:
    base: dict[str, Any] = dict(plan=PLAN, step=STEP, what=f"step 1/1 {STEP.id}", report=report,
                                osds=AT_REST, servers=SERVERS, tick_s=2.0,
                                child="driver-x")  # fmt: skip
    return StepView(**{**base, **kw})


def test_a_step_from_its_start_to_stored() -> None:
    # not asked yet: ask the driver
    assert next_step_actions(view(None)) == [poll(STEP.id)]
    # never started, every OSD at rest: start it, the OSDs' incarnations recorded with it
    assert started(next_step_actions(view(MISSING))) == {"0": "uid-a/0"}
    # running, its end beyond this tick: one usage sample, then wait for the next tick
    early = replace(RUNNING, now=RUNNING.started + 1)
    assert next_step_actions(view(early)) == [SAMPLE, NotReady(
        f"step 1/1 {STEP.id} running (1 s)")]  # fmt: skip
    # about to end: wait for it in the pod (one exec), once per tick
    late = replace(RUNNING, now=RUNNING.started + PLAN.timing.fio_s - 0.5)
    assert next_step_actions(view(late)) == [SAMPLE, poll(STEP.id, 0.5 + WAIT_MARGIN_S)]
    assert poll(STEP.id, 0.5 + WAIT_MARGIN_S) == Poll(
        tuple(poll_command(STEP.id, wait_s=11)), 11
    )  # the driver waits whole seconds
    assert next_step_actions(view(late, waited=True)) == [NotReady(
        f"step 1/1 {STEP.id} running ({late.age_s:.0f} s)")]  # fmt: skip
    # done: the result, from fio's own JSON of every job and its IOPS logs
    samples = [StepSample(t=0, osd_cpu=50, osd_mem_mib=100, fio_cpu=20)] * 2
    (store,) = next_step_actions(view(DONE, samples=samples, metrics_source="metrics.k8s.io"))
    assert isinstance(store, Store) and store.end == tuple(end_command(STEP.id, stored=True))
    result = store.result
    assert (result.step_id, result.workload, result.iodepth) == (STEP.id, "randread4k", 4)
    assert result.fio.jobs == len(PLAN.fio.jobs) == 2 and result.fio.iops > 0
    assert result.resources.osd_cpu == 50 and result.resources.samples == 2
    assert result.extra["metrics_source"] == "metrics.k8s.io"
    assert result.extra["wall_seconds"] == pytest.approx(DONE.wall_s, abs=0.001)
    assert set(result.clients) == {"here"}


def test_a_step_waits_for_every_osd_to_rest_before_it_starts() -> None:
    going = OsdView([0], [osd(terminating=True), osd("uid-b", ready=False)])
    (wait,) = next_step_actions(view(MISSING, osds=going))
    assert wait == NotReady(f"step 1/1 {STEP.id} waits for the OSDs: osd.0 has 1 running and "
                            "1 terminating pods")  # fmt: skip
    # an external cluster: nothing to watch, nothing recorded
    assert started(next_step_actions(view(MISSING, osds=None))) == {}


@pytest.mark.parametrize(
    ("now", "why"),
    [
        ([osd(restarts=1)], "osd.0 restarted during the step (pod/restarts uid-a/0 -> uid-a/1)"),
        ([osd("uid-b")], "osd.0 restarted during the step (pod/restarts uid-a/0 -> uid-b/0)"),
        ([osd(ready=False)], "osd.0 is not Ready"),
        ([], "osd.0 has no pod (was uid-a/0)"),
    ],
)
def test_an_osd_restarted_mid_step_drops_the_attempt(now: list[OsdPod], why: str) -> None:
    """The step measured a cluster in recovery: run again, up to MAX_STEP_RETRIES times,
    then the run fails saying why each time."""
    disturbed = OsdView([0], now)
    assert next_step_actions(view(DONE, osds=disturbed)) == [Retry(
        why, tuple(end_command(STEP.id, stored=False)), "OsdRestarted",
        f"step 1/1 {STEP.id} runs again (1/{MAX_STEP_RETRIES}): {why}")]  # fmt: skip
    again = view(DONE, osds=disturbed, retries=["before"] * MAX_STEP_RETRIES)
    times = MAX_STEP_RETRIES + 1
    assert next_step_actions(again) == [
        ExecutionError(f"step 1/1 {STEP.id} failed {times} times; last: {why}")
    ]
    # the attempt that then ran undisturbed is stored with the dropped one in its verdict
    (store,) = next_step_actions(view(DONE, retries=[why]))
    assert isinstance(store, Store)
    (dropped,) = store.result.extra["validity"]["attempts"]
    assert dropped["verdict"] == "dropped" and dropped["reasons"][0]["code"] == "fault"
    assert dropped["reasons"][0]["detail"] == why


def test_a_failed_step_says_what_fio_said_and_a_disturbed_one_runs_again() -> None:
    (fail,) = next_step_actions(view(FAILED))
    assert isinstance(fail, ExecutionError) and str(fail).startswith(
        f"step 1/1 {STEP.id}: fio exited 1"
    )
    assert "output tail" in str(fail) or "fio said" in str(fail)
    # failed while an OSD restarted: the restart is why, the step runs again
    (retry,) = next_step_actions(view(FAILED, osds=OsdView([0], [osd("uid-b")])))
    assert isinstance(retry, Retry) and retry.why.startswith("osd.0 restarted during the step")
    assert f"the step failed: step 1/1 {STEP.id}: fio exited 1" in retry.why


def test_an_operator_restarted_mid_step_collects_it() -> None:
    """A new operator has no memory of the step: the driver's answer is the state. Its
    start finds the attempt there (Start answered "exists": asked again), and a running
    step is polled like any other."""
    assert next_step_actions(view(None)) == [poll(STEP.id)]
    assert next_step_actions(view(RUNNING))[0] == SAMPLE
    (store,) = next_step_actions(view(DONE))
    assert isinstance(store, Store)


def test_a_fio_client_lost_past_its_deadline_fails_the_step() -> None:
    lost = replace(RUNNING, now=RUNNING.started + PLAN.timing.deadline_s + LOST_AFTER_S + 1)
    (fail,) = next_step_actions(view(lost))
    assert isinstance(fail, ExecutionError) and "its fio client is gone" in str(fail)


def test_a_result_from_an_unknown_server_or_short_of_jobs_fails() -> None:
    (fail,) = next_step_actions(view(DONE, servers={"here": "10.9.9.9:8765"}))
    assert isinstance(fail, ExecutionError) and "unknown server 127.0.0.1" in str(fail)
    two = replace(PLAN, fio=replace(PLAN.fio, jobs=PLAN.fio.jobs * 2))
    (short,) = next_step_actions(view(DONE, plan=two))
    assert isinstance(short, ExecutionError) and "here: 2 of expected=4" in str(short)


def test_the_prefill_has_no_osds_to_watch_nor_samples() -> None:
    prefill = view(None, step=None, what="prefill", osds=None)
    assert next_step_actions(prefill) == [poll("prefill")]
    assert started(next_step_actions(replace(prefill, report=MISSING))) == {}
    # what a Rook step reads first is not read for the prefill
    rook = replace(prefill, report=MISSING, watch_osds=True, cpu_logs=True, osds=None)
    assert started(next_step_actions(rook)) == {}
    assert next_step_actions(replace(prefill, report=RUNNING)) == [NotReady(
        f"prefill running ({RUNNING.age_s:.0f} s)")]  # fmt: skip
    with_prefill = replace(PLAN, prefill=replace(PLAN.prefill, jobs=PLAN.fio.jobs))
    done = replace(prefill, plan=with_prefill, report=DONE)
    assert next_step_actions(done) == [Prefilled(tuple(end_command("prefill", stored=True)))]


def test_on_rook_a_step_reads_the_osd_pods_before_it_starts_and_after_it_ends() -> None:
    """What is read is decided, as what is done: the OSD pods before a start (at rest?),
    and once it ended its clients' CPU logs, then the OSD pods as they are now."""
    rook = view(MISSING, osds=None, watch_osds=True, cpu_logs=True, placed=(0,))
    assert next_step_actions(rook) == [ReadOsds()]
    assert started(next_step_actions(replace(rook, osds=OsdView.of([osd()], (0,))))) == {
        "0": "uid-a/0"
    }
    # a placed OSD without a pod is one the step waits for
    (wait,) = next_step_actions(replace(rook, osds=OsdView.of([], (0,))))
    assert isinstance(wait, NotReady) and "osd.0" in str(wait)
    (read,) = next_step_actions(replace(rook, report=DONE))
    assert read == ReadCpuLogs({"here": server_job_name("driver-x", "here")},
                               PLAN.timing.deadline_s + 30)  # fmt: skip
    logs = {"here": _client_log("cpu-sampler-quiet.log", DONE.ended)}
    assert next_step_actions(replace(rook, report=DONE, node_cpu=logs)) == [ReadOsds()]
    (store,) = next_step_actions(replace(rook, report=DONE, node_cpu=logs, osds=AT_REST))
    assert isinstance(store, Store)
    # running: the OSD pods are not read (a poll's answer makes them stale anyway); the
    # fixture's plan places no OSD, so none is sampled
    running = replace(rook, report=replace(RUNNING, now=RUNNING.started + 1))
    assert next_step_actions(running)[0] == SAMPLE


def test_a_start_sends_the_plans_job_files_and_meets_only_where_the_plan_says() -> None:
    meet = {"barrier": ("10.0.0.9", 8766), "token": "0123456789abcdef"}
    (start,) = next_step_actions(view(MISSING, **meet))
    assert start.request.key == STEP.id and start.request.servers == SERVERS
    assert start.request.deadline_s == PLAN.timing.deadline_s
    assert start.request.osds == {"0": "uid-a/0"}
    barrier = PLAN.timing.barrier_jobs
    assert (start.request.barrier is not None) == bool(barrier)
    argv = " ".join(start.request.argv())
    assert ("0123456789abcdef" in argv) == bool(barrier)
    (prefill,) = next_step_actions(view(MISSING, step=None, what="prefill", **meet))
    assert prefill.request.key == "prefill" and prefill.request.barrier is None
    assert prefill.request.osds is None and prefill.osds == {}
    # two clients: every job meets the others at the driver, with this attempt's token
    two = _two_clients()
    assert two.timing.barrier_jobs > 0
    servers = {"a": "10.0.0.1:8765", "c": "10.0.0.3:8765"}
    (start,) = next_step_actions(view(MISSING, plan=two, step=two.steps[0], servers=servers,
                                      **meet))  # fmt: skip
    assert start.request.barrier is not None and "0123456789abcdef" in " ".join(
        start.request.argv()
    )
    assert all(
        "0123456789abcdef" in f and "10.0.0.9" in f for f in start.request.job_files.values()
    )
    # the driver pod has no address yet: wait, never start a step its jobs cannot meet in
    (wait,) = next_step_actions(view(MISSING, plan=two, step=two.steps[0], servers=servers))
    assert isinstance(wait, NotReady) and "fio driver pod's address" in str(wait)


@pytest.mark.parametrize(
    ("state", "started", "now", "wait"),
    [
        ("running", 100.0, 101.0, 0.0),  # 13 s left of 14: the next tick polls again
        ("running", 100.0, 112.5, 1.5 + WAIT_MARGIN_S),  # ends before the next tick
        ("running", 100.0, 120.0, WAIT_MARGIN_S),  # overdue: fio is ending
        ("running", 0.0, 120.0, 0.0),  # started not yet written
        ("missing", 0.0, 120.0, 0.0),
    ],
)
def test_a_tick_waits_in_the_driver_only_for_a_step_about_to_end(
    state: str, started: float, now: float, wait: float
) -> None:
    report = StepReport(state, now, started)
    assert wait_for_end(report, expected_s=14, tick_s=2) == pytest.approx(wait)


def _two_clients() -> RunPlan:
    doc = json.loads((DRIVER / "spec.json").read_text())
    doc["client"] = {**doc["client"], "nodes": ["a", "c"], "node": None}
    del doc["client"]["node"]
    topo = ClusterLayout({"a": TOPOLOGY, "c": TOPOLOGY}, {}, ("a", "c"), plan_osds=False)
    return build_plan("s", validate_spec(doc), topo)


def test_servers_ready_on_their_nodes_give_their_addresses() -> None:
    plan = _two_clients()
    up = {"a": PodState("Running", True, "10.0.0.1", "a"), "c": PodState("Pending")}
    assert server_addresses(plan, up, 8765) == NotReady("waiting for fio servers: c (Pending)")
    up["c"] = PodState("Running", True, "10.0.0.3", "c")
    assert server_addresses(plan, up, 8765) == {"a": "10.0.0.1:8765", "c": "10.0.0.3:8765"}
    up["c"] = PodState("Failed", reason="Evicted")
    ended = server_addresses(plan, up, 8765)
    assert isinstance(ended, ExecutionError) and "fio server of c ended" in str(ended)
    up["c"] = PodState("Running", True, "10.0.0.3", "b")
    moved = server_addresses(plan, up, 8765)
    assert isinstance(moved, ExecutionError) and "fio server of c runs on b" in str(moved)


def _client_log(fixture: str, end: float) -> str:
    """A real CPU log (tests/fixtures/driver/cpu-sampler-*.log: the sampler beside a fio
    pinned to CPU 1, the plan's client's CPU here too) moved in time to end at `end`."""
    rows = [ln.split(" ", 2) for ln in (DRIVER / fixture).read_text().splitlines()]
    shift = end - float(rows[-1][1])
    return "\n".join(f"{mark} {float(t) + shift:.3f} {rest}" for mark, t, rest in rows)


def test_a_step_is_judged_on_its_client_nodes_cpu_logs() -> None:
    # a hog on the client's CPU during the step's window: suspect, the client named
    # (the hog ran from 2.7 s to 5.7 s of a 7.2 s log: that is the step's last 3 s)
    logs = {"here": _client_log("cpu-sampler-hog.log", DONE.ended + 1.5)}
    (store,) = next_step_actions(view(DONE, node_cpu=logs))
    assert isinstance(store, Store)
    validity = store.result.extra["validity"]
    found = [r for r in validity["reasons"] if r["code"] == "interference"]
    assert found and "client here (CPU 1)" in found[0]["detail"], validity
    assert any("OSD nodes" in n for n in validity["unjudged"])
    # the same node quiet: no interference reason, the load kept as evidence
    logs = {"here": _client_log("cpu-sampler-quiet.log", DONE.ended)}
    (store,) = next_step_actions(view(DONE, node_cpu=logs))
    validity = store.result.extra["validity"]
    assert "interference" not in {r["code"] for r in validity["reasons"]}, validity
    assert validity["interference"][0]["name"] == "client here"


def test_a_client_log_that_cannot_be_read_is_said_not_judged_valid() -> None:
    for logs, said in (({"here": None}, "could not be read"), ({"here": ""}, "fewer than two"),
                       (None, "were not read")):  # fmt: skip
        (store,) = next_step_actions(view(DONE, node_cpu=logs))
        validity = store.result.extra["validity"]
        assert validity["interference"] is None
        assert any(said in n for n in validity["unjudged"]), validity


RERUN = replace(PLAN, sweep=PLAN.sweep.model_copy(update={"rerun_suspect": 1}))


def test_a_suspect_step_runs_again_once_and_every_attempt_is_recorded() -> None:
    """sweep.rerunSuspect on Kubernetes: the suspect attempt is dropped, its figure and
    reasons kept in the run's record (one bounded line), and the attempt after it is
    stored with it, suspect or not (the hog stayed here)."""
    hogged = {"here": _client_log("cpu-sampler-hog.log", DONE.ended + 1.5)}
    (retry,) = next_step_actions(view(DONE, plan=RERUN, node_cpu=hogged))
    assert isinstance(retry, Retry) and is_suspect_attempt(retry.why) and len(retry.why) < 1000
    assert retry.cause == "Suspect" and retry.end == tuple(end_command(STEP.id, stored=False))
    assert retry.message.startswith(f"step 1/1 {STEP.id} runs again (1/1): suspect (")
    assert "interference" in retry.message and retry.message.endswith("; sweep.rerunSuspect)")
    (store,) = next_step_actions(view(DONE, plan=RERUN, node_cpu=hogged, retries=[retry.why]))
    assert isinstance(store, Store)
    v = store.result.extra["validity"]
    (earlier,) = v["attempts"]
    assert earlier["verdict"] == "suspect" and earlier["iops"] == round(store.result.fio.iops, 1)
    assert [r["code"] for r in earlier["reasons"]] == [r["code"] for r in v["reasons"]]
    # an OSD restart before it: both attempts recorded in the order they ran
    fault = "osd.0 restarted during the step (pod/restarts uid-a/0 -> uid-b/0)"
    (store,) = next_step_actions(view(DONE, plan=RERUN, node_cpu=hogged,
                                      retries=[fault, retry.why]))  # fmt: skip
    assert isinstance(store, Store)
    attempts = store.result.extra["validity"]["attempts"]
    assert [a["verdict"] for a in attempts] == ["dropped", "suspect"], attempts
    # suspect reruns do not count against the OSD restarts a step may take
    disturbed = OsdView([0], [osd("uid-b")])
    assert isinstance(next_step_actions(view(DONE, plan=RERUN, osds=disturbed,
                                             retries=[retry.why, fault]))[0], Retry)  # fmt: skip
    # without rerunSuspect: stored at once, suspect
    (store,) = next_step_actions(view(DONE, node_cpu=hogged))
    assert isinstance(store, Store) and store.result.extra["validity"]["verdict"] == "suspect"
