"""The operator's reach, on a real API server: what RBAC grants in a listed namespace (exec
into any pod, delete any pod, any Job, any NetworkPolicy) narrowed by the chart's admission
policies on the operator's ServiceAccount (templates/reachpolicy.yaml) to what the operator
makes: exec into a run's fio driver only, delete Rook's OSD pods only, Jobs only as its
builders write them, NetworkPolicies, CephBlockPools and CephClients only its runs' own.
Everything is asked as the operator's own ServiceAccount, through the operator's own code
where it has one.

Found by trying (kube-apiserver v1.36.3): a ValidatingAdmissionPolicy sees CONNECT of
pods/exec, with request.name the pod's name and `object` a PodExecOptions (its command),
and it decides before the pod is looked up (an allowed name of a pod that does not exist
answers 404, a refused one 403), so no kubelet is needed to tell the two apart.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import kubernetes.client
import pytest
from harness import ControlPlane
from kubernetes.client.exceptions import ApiException
from test_operator import (
    NODE,
    OP_NS,
    ROOK_NS,
    carried,
    chart_rbac,
    ctx_of,
    network_policies_of,
    run_body,
    undo_of,
    xeon_plan,
)

from crimsonbench.manifests.naming import child_name

pytestmark = pytest.mark.k8s
SA = "crimsonbench-operator"
MON_POD = "rook-ceph-mon-a-6d9f8c7b5-x2b4z"  # Rook's pod names: deployment, hash, random


def _wait(what: str, probe: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := probe()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)
    return value


def _exec_refusal(kube: Any, namespace: str, pod: str) -> tuple[int, str]:
    """(HTTP status, message) the API server answers an exec into pod (no kubelet here:
    an exec it lets through ends at 404, the pod does not exist)."""
    from crimsonbench.controller.kube_errors import KubeError

    try:
        kube.exec_in_pod(namespace, pod, ["true"], timeout_s=10)
    except KubeError as exc:  # Kube's own type: the handshake's status read by kube_errors
        return exc.status, exc.message
    raise AssertionError(f"exec into {namespace}/{pod} ran")


def run_ctx(name: str, api: Any, settings: Any = None) -> Any:
    """A tick's context of run NAME (uid-1) on Rook's cluster, planned: its undo record
    says where it acts (the Jobs' namespace, Rook's) and what it creates."""
    from crimsonbench.controller.settings import Settings
    from crimsonbench.spec.models import validate_spec

    spec = validate_spec(run_body(name)["spec"])
    undo = undo_of(xeon_plan(name, spec, "uid-1"))
    settings = settings or Settings(operator_namespace=OP_NS)
    return ctx_of(name, spec, api, settings, {"record": {"undo": undo}})


@pytest.fixture(scope="module")
def policies(control_plane: ControlPlane) -> Iterator[list[str]]:
    """The chart's RBAC and reach policies for the operator, in effect."""
    with control_plane.admin_api_client() as api:
        core = kubernetes.client.CoreV1Api(api)
        for ns in (OP_NS, ROOK_NS, "bench"):
            with contextlib.suppress(ApiException):
                core.create_namespace({"metadata": {"name": ns}})
        applied = control_plane.apply_yaml(chart_rbac())
        names = [d["metadata"]["name"] for d in applied
                 if d["kind"] == "ValidatingAdmissionPolicy"]  # fmt: skip
        assert len(names) == 4, names  # pods, jobs, networkpolicies, rookobjects
        token = control_plane.service_account_token(OP_NS, SA, create=False)
        from crimsonbench.controller.kube import Kube

        with control_plane.api_client(token) as op:  # policies load a moment after apply
            _wait("the pods policy", lambda: _exec_refusal(Kube(op), ROOK_NS, MON_POD)[0] == 403)
        yield names
        adm = kubernetes.client.AdmissionregistrationV1Api(api)
        for name in names:
            with contextlib.suppress(ApiException):
                adm.delete_validating_admission_policy_binding(name)
            with contextlib.suppress(ApiException):
                adm.delete_validating_admission_policy(name)


@pytest.fixture()
def op(control_plane: ControlPlane, policies: list[str]) -> Iterator[kubernetes.client.ApiClient]:
    """An API client with the operator's ServiceAccount token."""
    token = control_plane.service_account_token(OP_NS, SA, create=False)
    with control_plane.api_client(token) as api:
        yield api


def test_the_api_server_type_checked_every_expression_without_a_warning(
    control_plane: ControlPlane, policies: list[str]
) -> None:
    with control_plane.admin_api_client() as api:
        adm = kubernetes.client.AdmissionregistrationV1Api(api)
        for name in policies:
            status = _wait(f"{name} type-checked",
                           lambda n=name: adm.read_validating_admission_policy(n).status
                           .type_checking)  # fmt: skip
            assert not status.expression_warnings, (name, status.expression_warnings)


def test_exec_only_into_a_runs_fio_driver(op: kubernetes.client.ApiClient) -> None:
    """The mons, Rook's operator, an OSD: refused, naming the policy, whatever RBAC grants
    in Rook's namespace; the driver of any run (the longest names too, hashed to keep the
    suffix its pods' names end with) gets through to the pod lookup. The operator's own
    exec says which policy refused it."""
    from crimsonbench.controller import driver
    from crimsonbench.controller.kube import Kube
    from crimsonbench.errors import ExecutionError
    from crimsonbench.manifests.fio_driver import driver_job_name, poll_command
    from crimsonbench.manifests.naming import JOB_NAME_KEPT_IN_PODS

    kube = Kube(op)
    for pod in (MON_POD, "rook-ceph-operator-7c9d6f5b4-qwxz2", "rook-ceph-osd-0-5f6d7c8b9-abcde",
                "fio-driver-x2b4z", "run-fio-driver-x2b4z-evil"):  # fmt: skip
        status, said = _exec_refusal(kube, ROOK_NS, pod)
        assert status == 403, (pod, said)
        assert "may exec only into the fio driver pod of a run" in said and pod in said
    for run in ("a", "quick-crimson", "r" * 46, "x" * 47, "y" * 50):
        # what the Job controller names the driver's pod: generateName "<job>-", cut to 58
        pod = f"{driver_job_name(run)}-"[: JOB_NAME_KEPT_IN_PODS + 1] + "x2b4z"
        assert _exec_refusal(kube, ROOK_NS, pod)[0] == 404, pod
    ctx: Any = SimpleNamespace(kube=kube)
    with pytest.raises(
        ExecutionError,
        match=f"exec into {ROOK_NS}/{MON_POD} was refused by "
        r"the operator's admission policy \(the chart's rbac.reachPolicy\)",
    ):
        driver.poll(ctx, ROOK_NS, MON_POD, poll_command("000-step"))


def test_attach_and_port_forward_are_refused(op: kubernetes.client.ApiClient) -> None:
    core = kubernetes.client.CoreV1Api(op)
    for call in (core.connect_post_namespaced_pod_attach,
                 core.connect_post_namespaced_pod_portforward):  # fmt: skip
        with pytest.raises(ApiException) as err:
            call("x-fio-driver-x2b4z", ROOK_NS)
        assert err.value.status == 403, err.value  # RBAC grants neither


def test_only_rook_osd_pods_are_deleted(
    admin_api: kubernetes.client.ApiClient, op: kubernetes.client.ApiClient
) -> None:
    """A crimson OSD's restart (osd_restarts.delete_osd_pods, as the restore does it)
    deletes an OSD pod; a mon's pod is refused, naming the policy."""
    from crimsonbench.controller import osd_restarts
    from crimsonbench.controller.decisions.observed import OsdPod
    from crimsonbench.errors import ExecutionError

    core = kubernetes.client.CoreV1Api(admin_api)
    pods = {"rook-ceph-osd-9-reach": "rook-ceph-osd", "rook-ceph-mon-z-reach": "rook-ceph-mon"}
    for name, app in pods.items():
        core.create_namespaced_pod(ROOK_NS, {"metadata": {"name": name, "labels": {"app": app}},
                                             "spec": {"nodeName": NODE, "containers": [
                                                 {"name": "c", "image": "x"}]}})  # fmt: skip
    try:
        ctx = run_ctx("reach", op)
        osd = OsdPod(osd_id=9, node=NODE, ready=True, name="rook-ceph-osd-9-reach")
        osd_restarts.delete_osd_pods(ctx, [osd], "after the restore")
        got = core.read_namespaced_pod("rook-ceph-osd-9-reach", ROOK_NS)
        assert got.metadata.deletion_timestamp is not None  # deleted (no kubelet: Terminating)
        mon = OsdPod(osd_id=99, node=NODE, ready=True, name="rook-ceph-mon-z-reach")
        with pytest.raises(ExecutionError, match="refused by the operator's admission policy.*"
                           "may delete only Rook OSD pods"):  # fmt: skip
            osd_restarts.delete_osd_pods(ctx, [mon], "after the restore")
        assert (
            core.read_namespaced_pod("rook-ceph-mon-z-reach", ROOK_NS).metadata.deletion_timestamp
            is None
        )
    finally:
        for name in pods:
            with contextlib.suppress(ApiException):
                core.delete_namespaced_pod(name, ROOK_NS, grace_period_seconds=0)


def _jobs() -> list[dict[str, Any]]:
    """Every Job the operator builds, for a crimson run on Rook (the run's plan on the
    captured Xeon)."""
    from crimsonbench.manifests import fio, fio_driver, maintenance
    from crimsonbench.manifests.ceph_access import rook_access, rook_client_access
    from crimsonbench.manifests.pods import PodOptions
    from crimsonbench.spec.models import validate_spec

    child = child_name("reach", "uid-1")  # what the operator names a run's children from
    plan = xeon_plan("reach", validate_spec(run_body("reach")["spec"]), "uid-1")
    opts = PodOptions(image="crimsonbench-fio:test")
    admin, user = rook_access(ROOK_NS), rook_client_access(ROOK_NS, plan.pool.user)
    mon = [{"who": "osd.0", "key": "osd_op_num_shards", "value": "4", "before": None}]
    return [
        maintenance.topology_probe_job(child, NODE, OP_NS, opts),
        maintenance.cluster_fsid_job(child, admin, opts),
        maintenance.cluster_facts_job(child, admin, opts),
        maintenance.ceph_commands_job(child, "setup", plan.ceph.commands, admin, opts),
        maintenance.mon_restore_job(child, mon, admin, opts),
        maintenance.create_images_job(
            child, "rbd", plan.pool.images, 2**30, "uid-1", user, opts
        ),  # fmt: skip
        maintenance.remove_images_job(child, "rbd", plan.pool.images, "uid-1", user, opts),
        fio.fio_server_job(child, plan.clients[0], plan, user, opts),
        fio_driver.fio_driver_job(child, ROOK_NS, opts, node=NODE, lifetime_s=600),
        fio_driver.fio_driver_job(
            child, ROOK_NS, opts, node=NODE, lifetime_s=600, access=user
        ),  # fmt: skip
    ]


def _create_job(op: kubernetes.client.ApiClient, job: dict[str, Any]) -> str:
    """'' when the API server admits the Job (dry run), else its refusal."""
    ns = job["metadata"]["namespace"]
    try:
        kubernetes.client.BatchV1Api(op).create_namespaced_job(ns, job, dry_run="All")
    except ApiException as exc:
        assert exc.status == 403, exc.body  # not 422: a valid Job, refused by the policy
        return str(exc.body)
    return ""


def _bent(job: dict[str, Any], change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    import copy

    out = copy.deepcopy(job)
    change(out["spec"]["template"]["spec"])
    return out


def test_jobs_only_as_the_operator_builds_them(op: kubernetes.client.ApiClient) -> None:
    """Every Job the builders make is admitted; the same Job bent to reach further (Rook's
    ServiceAccount, a host path, privilege, the host's PID namespace or network, root, any
    other Secret of Rook's namespace, or without a run's labels) is refused, saying why."""
    jobs = _jobs()
    for job in jobs:
        assert _create_job(op, job) == "", job["metadata"]["name"]
    facts, server = jobs[2], jobs[7]  # the admin key's Job, the run user's Job

    bends: list[tuple[str, dict[str, Any], str]] = [
        ("rook's ServiceAccount", _bent(facts, lambda p: p.update(
            serviceAccountName="rook-ceph-system", automountServiceAccountToken=True)),
         "default ServiceAccount without its token"),
        ("a host path", _bent(facts, lambda p: p["volumes"].append(
            {"name": "root", "hostPath": {"path": "/"}})), "no host path"),
        ("the host's PID namespace", _bent(facts, lambda p: p.update(hostPID=True)),
         "no host path, host PID or IPC"),
        ("the host's network", _bent(server, lambda p: p.update(hostNetwork=True)),
         "no host network (chart value jobs.hostNetwork)"),
        ("privileged", _bent(facts, lambda p: p["containers"][0]["securityContext"].update(
            privileged=True, allowPrivilegeEscalation=True)), "unprivileged"),
        ("root", _bent(facts, lambda p: p["securityContext"].update(runAsNonRoot=False)),
         "run non-root"),
        ("the mon. key", _bent(facts, lambda p: p["volumes"][1]["secret"]["items"].append(
            {"key": "mon-secret", "path": "mon"})), "read no Secret but the admin key"),
        ("another Secret", _bent(server, lambda p: p["volumes"].append(
            {"name": "k", "secret": {"secretName": "rook-ceph-admin-keyring"}})),
         "read no Secret but the admin key"),
        ("an env from a Secret", _bent(server, lambda p: p["containers"][0]["env"].append(
            {"name": "K", "valueFrom": {"secretKeyRef": {"name": "rook-csi-rbd-provisioner",
                                                          "key": "userKey"}}})),
         "read no Secret but the admin key"),
    ]  # fmt: skip
    unlabelled = _bent(server, lambda p: None)
    unlabelled["metadata"]["labels"] = {}  # a Job without labels takes its pods' ones
    unlabelled["spec"]["template"]["metadata"]["labels"] = {"app": "anything"}
    bends.append(("no run's labels", unlabelled, "only Jobs labelled as a run's"))
    for what, job, words in bends:
        said = _create_job(op, job)
        assert words in said, (what, said)


def test_network_policies_only_the_runs_own(
    admin_api: kubernetes.client.ApiClient, op: kubernetes.client.ApiClient
) -> None:
    """The run's two policies are created and deleted by the operator's own calls; one
    that would select Rook's mons is refused, and so is deleting a policy not the
    operator's."""
    from crimsonbench.controller.kube import Kube
    from crimsonbench.controller.kube_errors import Forbidden
    from crimsonbench.manifests.network import fio_network_policies

    kube = Kube(op)
    mine = fio_network_policies("reach", ROOK_NS, fio_port=8765, barrier_port=8766)
    net_admin = kubernetes.client.NetworkingV1Api(admin_api)
    theirs = {"metadata": {"name": "protect-mons"},
              "spec": {"podSelector": {"matchLabels": {"app": "rook-ceph-mon"}},
                       "policyTypes": ["Ingress"]}}  # fmt: skip
    net_admin.create_namespaced_network_policy(ROOK_NS, theirs)
    try:
        for body in mine:
            kube.ensure_network_policy(ROOK_NS, body)
        selector = "bench.crimson.ceph.io/run=reach"
        names = {p.metadata.name for p in net_admin.list_namespaced_network_policy(
            ROOK_NS, label_selector=selector).items}  # fmt: skip
        assert names == {b["metadata"]["name"] for b in mine}
        bent = {**mine[0], "metadata": {**mine[0]["metadata"], "name": "reach-mons"},
                "spec": {**mine[0]["spec"], "podSelector": {"matchLabels": {
                    "app": "rook-ceph-mon"}}}}  # fmt: skip
        with pytest.raises(Forbidden) as err:  # Kube's own type: no status codes
            kube.ensure_network_policy(ROOK_NS, bent)
        assert err.value.by_policy
        assert "selects that run's fio servers or driver only" in err.value.message
        with pytest.raises(Forbidden) as err:
            kube.net.delete_namespaced_network_policy("protect-mons", ROOK_NS)
        assert "only the NetworkPolicies of its runs" in err.value.message
        assert kube.delete_network_policies(ROOK_NS, selector) == 2
        assert (
            net_admin.list_namespaced_network_policy(ROOK_NS, label_selector=selector).items == []
        )
    finally:
        net_admin.delete_namespaced_network_policy("protect-mons", ROOK_NS)


@pytest.fixture()
def admin_api(control_plane: ControlPlane) -> Iterator[kubernetes.client.ApiClient]:
    with control_plane.admin_api_client() as api:
        yield api


def test_host_network_runs_say_no_network_policy_protects_them(
    admin_api: kubernetes.client.ApiClient, op: kubernetes.client.ApiClient
) -> None:
    """With jobs.hostNetwork the fio pods share their nodes' addresses, beyond any
    NetworkPolicy: none is made, and the run's NetworkIsolated condition says what stays
    open and what to do; without it the run's policies are made, once."""
    from crimsonbench.controller.fio_setup import isolate_fio_pods
    from crimsonbench.controller.settings import Settings

    ctx = run_ctx("hostnet", op, Settings(host_network=True, operator_namespace=OP_NS))
    isolate_fio_pods(ctx)
    cond = ctx.record.conditions()["NetworkIsolated"]
    assert cond.status == "False" and cond.reason == "HostNetwork", cond
    assert "no NetworkPolicy can protect" in cond.message and "TCP 8765" in cond.message
    assert "firewall those ports on the nodes" in cond.message
    assert network_policies_of(admin_api, ctx.child) == []

    ctx = run_ctx("podnet", op)
    try:
        isolate_fio_pods(ctx)
        isolate_fio_pods(ctx)  # the condition set: nothing asked again
        cond = ctx.record.conditions()["NetworkIsolated"]
        assert cond.status == "True" and cond.reason == "NetworkPolicy", cond
        assert network_policies_of(admin_api, ctx.child) == [
            f"{ctx.child}-fio-driver-in", f"{ctx.child}-fio-server-in"]  # fmt: skip
    finally:
        from crimsonbench.controller.kube import Kube

        Kube(admin_api).delete_network_policies(ROOK_NS, ctx.selector)


def test_preflight_refuses_a_node_without_room_for_the_resized_osd_pods(
    admin_api: kubernetes.client.ApiClient, op: kubernetes.client.ApiClient
) -> None:
    """Through the operator's own reads and RBAC (nodes, and every pod on a node in any
    namespace): an OSD pod of the cluster on a node another workload fills would grow to
    the run's 56 CPUs and 60 GiB; refused naming that node and the sizes. With room, the
    same run passes."""
    from crimsonbench.controller.room import check_room
    from crimsonbench.errors import InvalidSpec

    core = kubernetes.client.CoreV1Api(admin_api)
    node, shop = "node-room", "shop"

    def allocatable(cpu: str, memory: str) -> None:
        core.patch_node_status(node, {"status": {"allocatable": {"cpu": cpu, "memory": memory,
                                                                 "pods": "110"}}})  # fmt: skip

    def pod(ns: str, name: str, labels: dict[str, str], cpu: str, memory: str) -> None:
        res = {"requests": {"cpu": cpu, "memory": memory}}
        core.create_namespaced_pod(ns, {"metadata": {"name": name, "labels": labels},
            "spec": {"nodeName": node, "containers": [{"name": "osd", "image": "x",
                                                       "resources": res}]}})  # fmt: skip

    with contextlib.suppress(ApiException):
        core.create_namespace({"metadata": {"name": shop}})
    _wait("shop's default ServiceAccount", lambda: [
        sa for sa in core.list_namespaced_service_account(shop).items
        if sa.metadata.name == "default"])  # fmt: skip
    core.create_node({"metadata": {"name": node}})
    try:
        allocatable("64", "96Gi")
        pod(ROOK_NS, "rook-ceph-osd-5-room", {"app": "rook-ceph-osd", "ceph-osd-id": "5"},
            "1", "2Gi")  # fmt: skip
        pod(shop, "db-0", {"app": "db"}, "16", "24Gi")
        ctx = run_ctx("room", op)
        ctx.plan = plan = xeon_plan("room", ctx.spec, "uid-1")
        assert (plan.osd_resources.cpu, plan.osd_resources.memory) == (56, "60Gi")
        with pytest.raises(InvalidSpec) as err:
            check_room(ctx, plan)
        assert err.value.field == "spec.osd.reactors"
        said = str(err.value)
        assert "node node-room has cpu 47, memory 70 GiB free (allocatable cpu 64, memory " \
            "96 GiB minus cpu 17, memory 26 GiB requested by its 2 pods)" in said, said  # fmt: skip
        assert "OSD pod rook-ceph-osd-5-room +cpu 55, memory 58 GiB" in said
        allocatable("128", "256Gi")
        check_room(ctx, plan)  # room enough: nothing raised
    finally:
        for ns, name in ((ROOK_NS, "rook-ceph-osd-5-room"), (shop, "db-0")):
            with contextlib.suppress(ApiException):
                core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
        core.delete_node(node)


def test_rook_pools_and_cephx_users_only_the_runs_own(
    admin_api: kubernetes.client.ApiClient, op: kubernetes.client.ApiClient
) -> None:
    """RBAC lets the operator create and delete any CephBlockPool and CephClient of Rook's
    namespace; the policy, only its runs' (the builders' labels), and a CephClient only
    with the run's pool-limited caps. Through the operator's own calls (rook_pool's)."""
    from crimsonbench.controller.kube import Kube
    from crimsonbench.controller.kube_errors import Forbidden
    from crimsonbench.manifests.rook_objects import ceph_client, cephblockpool
    from crimsonbench.spec.models import validate_spec

    plan = xeon_plan("reach", validate_spec(run_body("reach")["spec"]), "uid-1")
    kube, admin = Kube(op), kubernetes.client.CustomObjectsApi(admin_api)
    g, v = "ceph.rook.io", "v1"
    theirs = {"apiVersion": f"{g}/{v}", "kind": "CephBlockPool",
              "metadata": {"name": "replicapool"}, "spec": {"replicated": {"size": 3}}}  # fmt: skip
    admin.create_namespaced_custom_object(g, v, ROOK_NS, "cephblockpools", theirs)
    child = child_name("reach", "uid-1")
    mine = [cephblockpool(child, plan.pool, namespace=ROOK_NS),
            ceph_client(child, plan.pool, namespace=ROOK_NS)]  # fmt: skip
    try:
        for body, plural in zip(mine, ("cephblockpools", "cephclients"), strict=True):
            kube.ensure_custom(ROOK_NS, plural, body)
            kube.delete_custom(ROOK_NS, plural, body["metadata"]["name"])
        with pytest.raises(Forbidden) as err:  # Kube's own type (kube_errors)
            kube.delete_custom(ROOK_NS, "cephblockpools", "replicapool")
        assert err.value.by_policy and "only the cephblockpools of its runs" in err.value.message
        admin_client = {**mine[1], "metadata": {**mine[1]["metadata"], "name": "reach-admin"},
                        "spec": {"caps": {"mon": "allow *", "osd": "allow *"}}}  # fmt: skip
        with pytest.raises(Forbidden) as err:
            kube.ensure_custom(ROOK_NS, "cephclients", admin_client)
        assert "RBD images of one pool only" in err.value.message
    finally:
        admin.delete_namespaced_custom_object(g, v, ROOK_NS, "cephblockpools", "replicapool")


def test_a_runs_network_policies_come_with_its_fio_servers_and_go_at_cleanup(
    admin_api: kubernetes.client.ApiClient, op: kubernetes.client.ApiClient
) -> None:
    """Under the operator's RBAC and policies: asking for the fio servers makes the run's
    two NetworkPolicies first (and the server Job, whose pod never runs here); cleanup,
    once the run's pods are gone, deletes them (each tick's record carried to the next)."""
    from crimsonbench.controller import stages
    from crimsonbench.controller.fio_setup import ensure_servers
    from crimsonbench.errors import NotReady

    ctx = run_ctx("fenced", op)
    plan = xeon_plan("fenced", ctx.spec, "uid-1")
    with pytest.raises(NotReady, match="fio servers"):
        ensure_servers(ctx, plan)
    assert network_policies_of(admin_api, ctx.child) == [
        f"{ctx.child}-fio-driver-in", f"{ctx.child}-fio-server-in"]  # fmt: skip
    batch = kubernetes.client.BatchV1Api(admin_api)
    jobs = batch.list_namespaced_job(ROOK_NS, label_selector=ctx.selector).items
    assert [j.metadata.name for j in jobs] == [f"{ctx.child}-fio-server-{NODE}"]
    status = {"stage": "restore", "imagesCreated": False, "record": {"undo": undo_of(plan)}}
    deadline = time.monotonic() + 120
    while True:  # cleanup's ticks, until the server's pod is gone and it is over
        tick = ctx_of("fenced", ctx.spec, op, ctx.settings, status)
        try:
            stages.cleanup(tick)
            break
        except NotReady as exc:
            assert time.monotonic() < deadline, f"cleanup never ended: {exc}"
            time.sleep(0.5)
        finally:
            status = carried(status, tick)
    assert network_policies_of(admin_api, ctx.child) == []
    assert batch.list_namespaced_job(ROOK_NS, label_selector=ctx.selector).items == []
