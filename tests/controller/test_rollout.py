"""Rook's OSD pods decided on, without a cluster: rolled out as planned, moved, at rest
before a step, restarted during one, back to the original limits."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from crimsonbench.controller.decisions.observed import OsdPod
from crimsonbench.controller.decisions.rollout import (
    osd_disturbance,
    osd_incarnations,
    osds_at_rest,
    osds_running_with,
    rollout,
    rollout_done,
)
from crimsonbench.controller.decisions.step_requests import (
    cpu_log_jobs,
    fio_server_selector,
    osd_selector,
)
from crimsonbench.errors import ExecutionError, NotReady
from crimsonbench.manifests.fio import server_job_name
from crimsonbench.manifests.naming import LABEL_ROLE, LABEL_RUN
from crimsonbench.plan.build import build_plan
from crimsonbench.plan.hosts import ClusterLayout
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.spec.models import validate_spec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ADJ = parse_lscpu_json((FIXTURES / "lscpu" / "adjacent-2s-8c-ht.json").read_text())

# ---------------------------------------------------------------- rollout


def _plan(**client: Any) -> Any:
    s = validate_spec(
        {
            "target": {"rook": {"clusterName": "c"}},
            "osd": {"flavor": "classic", "count": 2, "cpuSet": "0-3"},
            "client": {"cpuSet": "8-11", **client},
        }
    )
    nodes = client.get("nodes") or [client["node"]]
    layout = ClusterLayout({n: ADJ for n in {"a", "b", *nodes}}, {0: "a", 1: "b"}, tuple(nodes))
    return build_plan("r", s, layout)


def test_rollout_waits_for_rook_then_every_osd_with_the_planned_limits() -> None:
    plan = _plan(node="a")
    want = (str(plan.osd_resources.cpu), plan.osd_resources.memory)
    ready = {"observedGeneration": 3, "phase": "Ready"}
    old = [OsdPod(0, "a", True, "1", "1Gi"), OsdPod(1, "b", True, "1", "1Gi")]
    new = [OsdPod(0, "a", True, *want), OsdPod(1, "b", True, *want)]
    assert isinstance(rollout(plan, {0: "a", 1: "b"}, new, {"observedGeneration": 2}, 3),
                      NotReady)  # fmt: skip
    assert "not rolled out" in str(rollout(plan, {0: "a", 1: "b"}, old, ready, 3))
    starting = [OsdPod(0, "a", False, *want), new[1]]
    assert "not Ready" in str(rollout(plan, {0: "a", 1: "b"}, starting, ready, 3))
    assert rollout(plan, {0: "a", 1: "b"}, new, ready, 3) == (
        "2 OSDs Ready with the planned resources"
    )


def test_the_rollout_is_done_when_every_osd_and_the_setup_are_and_bounded_else() -> None:
    """The planned OSDs (progress), the cluster's other OSDs (Rook sizes them alike) and
    the crimson setup Job: each can hold it; the wait is bounded by rolloutTimeoutSeconds
    from when it began."""
    plan = _plan(node="a")
    want = (str(plan.osd_resources.cpu), plan.osd_resources.memory)
    placed = {0: "a"}  # osd.1 is another OSD of the cluster, not the run's
    other_old = OsdPod(1, "b", True, "1", "1Gi")
    pods = [OsdPod(0, "a", True, *want), other_old]

    def done(
        pods: list[OsdPod],
        progress: str | NotReady = "ok",
        setup: NotReady | None = None,
        waited: float = 10.0,
    ) -> Any:
        return rollout_done(plan, placed, pods, progress, setup, waited, 600.0)  # fmt: skip

    held = done(pods)  # the other OSD still has the old limits
    assert isinstance(held.outcome, NotReady) and held.condition[:2] == (False, "RollingOut")
    assert "osd.1 still has limits cpu=1" in held.condition[2] and "for 10 s" in held.condition[2]
    rolled = [pods[0], OsdPod(1, "b", True, *want)]
    assert done(rolled).outcome is None
    assert done(rolled).condition[:2] == (True, "OsdsReady")
    setup = done(rolled, setup=NotReady("crimson setup: Job r/x running"))
    assert isinstance(setup.outcome, NotReady) and "crimson setup" in setup.condition[2]
    waiting = done(rolled, progress=NotReady("osd.0 not Ready yet"))
    assert isinstance(waiting.outcome, NotReady) and "osd.0 not Ready" in str(waiting.outcome)
    late = done(pods, waited=601.0)
    assert isinstance(late.outcome, ExecutionError)
    assert "gave up (rolloutTimeoutSeconds)" in str(late.outcome)


def test_an_osd_that_moved_fails_the_run() -> None:
    plan = _plan(node="a")
    want = (str(plan.osd_resources.cpu), plan.osd_resources.memory)
    moved = [OsdPod(0, "a", True, *want), OsdPod(1, "a", True, *want)]
    with pytest.raises(ExecutionError, match="osd.1 moved from node b to a"):
        rollout(plan, {0: "a", 1: "b"}, moved, {"observedGeneration": 1, "phase": "Ready"}, 1)


# ---------------------------------------------------------------- OSDs at rest, restarts


def _pod(osd: int, **kw: object) -> OsdPod:
    base: dict[str, object] = {"osd_id": osd, "node": "n1", "ready": True, "uid": f"u{osd}"}
    return OsdPod(**{**base, **kw})  # type: ignore[arg-type]


def test_osds_at_rest_names_the_first_osd_that_is_not() -> None:
    assert osds_at_rest([0, 1], [_pod(0), _pod(1)]) is None
    going = [_pod(0), _pod(1, terminating=True), _pod(1, uid="new", ready=False)]
    assert osds_at_rest([0, 1], going) == NotReady("osd.1 has 1 running and 1 terminating pods")
    assert osds_at_rest([0, 1], [_pod(0), _pod(1, ready=False)]) == NotReady("osd.1 is not Ready")
    assert osds_at_rest([2], [_pod(0)]) == NotReady("osd.2 has 0 running and 0 terminating pods")


def test_a_restart_during_a_step_is_a_disturbance() -> None:
    pods = [_pod(0), _pod(1)]
    before = osd_incarnations([0, 1], pods)
    assert osd_disturbance(before, pods) == ""
    restarted = [_pod(0, restarts=1), _pod(1)]  # same pod, its container restarted
    assert "osd.0 restarted during the step" in osd_disturbance(before, restarted)
    replaced = [_pod(0), _pod(1, uid="u1-new")]  # a new pod
    assert "osd.1 restarted during the step" in osd_disturbance(before, replaced)
    assert "osd.1 has no pod" in osd_disturbance(before, [_pod(0)])


def test_osds_running_with_compares_quantities_not_strings() -> None:
    pods = [_pod(0, cpu_limit="2", memory_limit="4Gi"), _pod(1, cpu_limit="2000m",
                                                             memory_limit="4096Mi")]  # fmt: skip
    assert not isinstance(osds_running_with([0, 1], pods, ("2", "4Gi")), NotReady)
    late = osds_running_with([0, 1], pods, ("3", "4Gi"))
    assert isinstance(late, NotReady) and "osd.0 still has limits cpu=2" in str(late)
    none = osds_running_with([0], [_pod(0)], (None, None))  # the original had none
    assert none == "1 OSDs Ready with limits cpu=None memory=None"


def test_a_wait_is_not_ready_until_its_bound_then_gives_up_saying_where_to_look() -> None:
    from crimsonbench.controller.decisions.waits import bounded_wait

    assert bounded_wait("pool p", 600.0, 600.0) == NotReady("pool p")
    late = bounded_wait("pool p", 600.1, 600.0, "see Rook's operator log")
    assert isinstance(late, ExecutionError)
    assert str(late) == "pool p; gave up (rolloutTimeoutSeconds): see Rook's operator log"


def test_a_steps_usage_sample_selects_the_planned_osds_pods_and_the_runs_fio_servers() -> None:
    plan = _plan(node="c")
    assert osd_selector(plan) == "app=rook-ceph-osd,ceph-osd-id in (0,1)"
    assert fio_server_selector("r-1a2b") == f"{LABEL_RUN}=r-1a2b,{LABEL_ROLE}=fio-server"
    assert cpu_log_jobs(plan, "r-1a2b") == {"c": server_job_name("r-1a2b", "c")}
    assert osd_selector(replace(plan, hosts=())) is None
