"""Nothing of another's is adopted, and a run that stops validating still restores (issue
36, classes 1, 5 and 8), on a real API server with the operator under the chart's RBAC.

- A CephBlockPool or CephClient that someone made under the run's own (uid-derived) name
  between preflight and creation is a refusal naming it: the run fails, restores the
  cluster, and the object is left as it was (Rook would adopt the Ceph pool behind it, and
  the run's cleanup would force-delete it with its data).
- A run whose planned spec no longer validates under this operator (an upgrade that added
  a rule) stops and restores the CephCluster from its record alone.
- A Lease is taken from its holder only when that run is gone: deleted, or deleted and
  made again under its name (another uid); never from a live run or an unknown holder.

The runs are placed mid-flight by test_run_ends.placed_run (the operator's own code under
its token), so each case starts where it bites.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import kubernetes.client
import pytest
import test_run_ends as ends
from harness import ControlPlane
from kopf.testing import KopfRunner
from kubernetes.client.exceptions import ApiException
from test_operator import OP_NS, G, V, wait_for
from test_run_ends import (
    ROOK,
    ROOK_NS,
    RUN_NS,
    conditions,
    ctx_for,
    failed,
    get_cluster,
    leases,
    placed_run,
    spec,
    status_of,
)

pytestmark = pytest.mark.k8s
# that module's fixtures: its namespaces, the chart's RBAC, a CephCluster, the operator
api, cluster, operator = ends.api, ends.cluster, ends.operator


def planned_names(api: Any, name: str) -> tuple[str, str]:
    """The run's pool and CephClient, as its undo record names them (from its uid)."""
    undo = status_of(api, name)["record"]["undo"]
    return undo["poolObject"], undo["clientObject"]


def someone_elses(plural: str, name: str) -> dict[str, Any]:
    """A Rook object of that name that is not the run's: another team's, no run label."""
    kind = {"cephblockpools": "CephBlockPool", "cephclients": "CephClient"}[plural]
    body: dict[str, Any] = {"apiVersion": "ceph.rook.io/v1", "kind": kind,
                            "metadata": {"name": name, "namespace": ROOK_NS,
                                         "labels": {"team": "theirs"}}}  # fmt: skip
    if plural == "cephblockpools":
        body["spec"] = {"replicated": {"size": 3}}
    else:
        body["spec"] = {"caps": {"mon": "profile rbd", "osd": "profile rbd pool=theirs"}}
    return body


@pytest.mark.parametrize("plural", ["cephblockpools", "cephclients"])
def test_a_rook_object_someone_made_under_the_runs_name_is_refused_and_left_alone(
    control_plane: ControlPlane, api: Any, cluster: dict[str, Any],
    operator: Callable[..., KopfRunner], plural: str,
) -> None:  # fmt: skip
    custom = kubernetes.client.CustomObjectsApi(api)
    name = f"adopt-{plural[4:8]}"
    with placed_run(control_plane, api, name, "prepare"):
        pool, user = planned_names(api, name)
        theirs = pool if plural == "cephblockpools" else user
        made = custom.create_namespaced_custom_object(*ROOK, ROOK_NS, plural,
                                                      someone_elses(plural, theirs))  # fmt: skip
        with operator():
            if plural == "cephclients":  # Rook's part: the run's own pool made Ready
                mine = _wait_listed(custom, "cephblockpools", pool)
                custom.patch_namespaced_custom_object_status(
                    *ROOK, ROOK_NS, "cephblockpools", mine, {"status": {"phase": "Ready"}}
                )
            st = failed(api, name)
        assert f"{plural}/{theirs} in {ROOK_NS} exists and is not this run's" in st["message"]
        assert conditions(st)["ClusterRestored"]["status"] == "True"
        kept = custom.get_namespaced_custom_object(*ROOK, ROOK_NS, plural, theirs)
        # left exactly as it was made: not deleted, not marked for deletion, not relabelled
        assert kept["metadata"]["uid"] == made["metadata"]["uid"]
        assert "deletionTimestamp" not in kept["metadata"]
        assert kept["metadata"]["labels"] == {"team": "theirs"}
        assert kept["spec"] == made["spec"]
        if plural == "cephclients":  # the run's own pool went at its cleanup
            names = {o["metadata"]["name"] for o in custom.list_namespaced_custom_object(
                *ROOK, ROOK_NS, "cephblockpools")["items"]}  # fmt: skip
            assert pool not in names
        assert get_cluster(api)["spec"] == cluster["spec"]
        assert leases(api) == []


def _wait_listed(custom: Any, plural: str, name: str) -> str:
    wait_for(
        f"{plural}/{name}",
        lambda: any(
            o["metadata"]["name"] == name
            for o in custom.list_namespaced_custom_object(*ROOK, ROOK_NS, plural)["items"]
        ),
    )
    return name


def test_a_run_whose_planned_spec_stops_validating_still_restores_the_cluster(
    control_plane: ControlPlane, api: Any, cluster: dict[str, Any],
    operator: Callable[..., KopfRunner],
) -> None:  # fmt: skip
    """The operator was upgraded mid-run with a rule the run's planned spec breaks (here:
    its record's plannedSpec holds a spec this operator refuses). No spec can be had, so the
    run stops, and its restore, reading only the undo record, puts the CephCluster back and
    lets the lease go. (Before the record: Failed with nothing restored, the lease held.)"""
    broken = {**spec(), "osd": {"flavor": "classic", "objectStore": "bluestore", "count": 0}}
    record = {"plannedSpec": json.dumps(broken, sort_keys=True)}
    with placed_run(control_plane, api, "upgraded", "steps", record=record):
        assert get_cluster(api)["spec"] != cluster["spec"]  # patched for the run
        with operator():
            st = failed(api, "upgraded")
        cond = conditions(st)
        assert cond["Succeeded"]["reason"] == "SpecEditRefused", cond["Succeeded"]
        assert "no longer validates under this operator" in cond["Succeeded"]["message"]
        assert cond["ClusterRestored"]["status"] == "True", cond["ClusterRestored"]
        got = get_cluster(api)
        assert got["spec"] == cluster["spec"]
        assert not {k for k in got["metadata"].get("annotations") or {} if G in k}
        assert leases(api) == []


def test_a_lease_is_taken_only_from_a_run_that_is_gone(
    control_plane: ControlPlane, api: Any, cluster: dict[str, Any],
) -> None:  # fmt: skip
    """Four holders of the cluster's Lease: a run deleted (no such run), a run deleted and
    made again under its name (another uid), a live run, and a holder that is not a run's.
    The first two give way to a new run; the last two never do."""
    from crimsonbench.controller import lease

    custom = kubernetes.client.CustomObjectsApi(api)
    coord = kubernetes.client.CoordinationV1Api(api)
    body = {"apiVersion": f"{G}/{V}", "kind": "BenchmarkRun",
            "metadata": {"name": "alive", "namespace": RUN_NS}, "spec": spec()}  # fmt: skip
    alive = custom.create_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", body)
    alive_uid = alive["metadata"]["uid"]
    token = control_plane.service_account_token(OP_NS, "crimsonbench-operator", create=False)
    cases = {
        f"{RUN_NS}/ghost/6d1c8a3e-0000-4000-8000-000000000001": True,  # deleted
        f"{RUN_NS}/alive/6d1c8a3e-0000-4000-8000-000000000002": True,  # made again
        f"{RUN_NS}/alive/{alive_uid}": False,  # live
        "kubectl-by-hand": False,  # not a run's: never taken
    }
    try:
        with control_plane.api_client(token) as op:
            for holder, freed in cases.items():
                ctx = ctx_for("newcomer", "6d1c8a3e-0000-4000-8000-0000000000ff", op)
                lease.record_target(ctx)
                ns, name = ctx.lease
                coord.create_namespaced_lease(ns, {"metadata": {"name": name},
                                                   "spec": {"holderIdentity": holder}})  # fmt: skip
                try:
                    got = lease.take(ctx)
                    now = coord.read_namespaced_lease(name, ns).spec.holder_identity
                    if freed:
                        assert got == ctx.holder == now, holder
                    else:
                        assert got == holder == now, holder
                finally:
                    coord.delete_namespaced_lease(name, ns)
    finally:
        with contextlib.suppress(ApiException):
            custom.delete_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", "alive")


def test_results_of_an_earlier_run_of_the_same_name_are_never_read_as_its_own(
    control_plane: ControlPlane, api: Any, cluster: dict[str, Any],
) -> None:  # fmt: skip
    """A run deleted with its ConfigMaps orphaned, or before the garbage collector came,
    and made again under its name: the new run finds step results labelled with its name.
    They are not its steps: neither the operator (resume) nor `crimsonbench fetch` reads
    them as its results, and its run ConfigMap is not overwritten. (Before: the earlier
    run's steps counted as done, their figures reported as the new run's.)"""
    from test_run_ends import NODE, _big_step

    from crimsonbench.controller import stages
    from crimsonbench.controller.fetch import fetch_run
    from crimsonbench.controller.plans import plan_for
    from crimsonbench.controller.stored_results import read_all, store_results
    from crimsonbench.errors import ExecutionError
    from crimsonbench.manifests.results import run_configmap_name, step_configmaps

    core = kubernetes.client.CoreV1Api(api)
    # Orphaned (`kubectl delete --cascade=orphan`: the garbage collector takes the earlier
    # run's ownerReferences off and leaves them), so they stay: none is this run's.
    theirs, ours = _big_step(2), replace(_big_step(3), step_id="randread4k-qd002-r1",
                                         iodepth=2)  # fmt: skip
    left = step_configmaps("again", theirs, namespace=RUN_NS)
    run_cm = {"metadata": {"name": run_configmap_name("again"), "namespace": RUN_NS},
              "data": {"earlier": "yes"}}  # fmt: skip
    placed = {"clientNodes": [NODE], "osdPlacement": {"0": NODE}}
    with placed_run(control_plane, api, "again", "steps", patched=False) as uid:
        for cm in [*left, run_cm]:
            core.create_namespaced_config_map(RUN_NS, cm)
        try:
            token = control_plane.service_account_token(OP_NS, "crimsonbench-operator",
                                                        create=False)  # fmt: skip
            with control_plane.api_client(token) as op:
                ctx = ctx_for("again", uid, op, placed)
                store_results(ctx, plan_for(ctx), {ours.key: ours})  # the run's own step
                fresh = ctx_for("again", uid, op, placed)  # an operator started anew
                assert list(read_all(fresh).results) == [ours.key]
                with pytest.raises(ExecutionError, match="exists and is not this run's"):
                    stages._record_run_info(fresh, plan_for(fresh))  # the run ConfigMap
            assert core.read_namespaced_config_map(run_cm["metadata"]["name"],
                                                   RUN_NS).data == {"earlier": "yes"}  # fmt: skip
            fetched = fetch_run(api, RUN_NS, "again")
            assert [r.key for r in fetched.results] == [ours.key]
            assert any("not its own" in u for u in fetched.unreadable), fetched.unreadable
        finally:
            for cm in [*left, run_cm]:
                with contextlib.suppress(ApiException):
                    core.delete_namespaced_config_map(cm["metadata"]["name"], RUN_NS)
