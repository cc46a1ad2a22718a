"""The Jobs of a run (fio servers and driver, probe, facts, images, ceph commands), the
driver's exec commands and report, Ceph
access and the Rook client/pool: golden files, the fields that matter, names, and the
kubernetes client's own models. The Job scripts themselves run against real fio, rbd and
a real cluster in test_job_scripts.py."""

from __future__ import annotations

import configparser
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from manifest_inputs import NODE, SEASTORE_56, XEON, bluestore_8x5, plan_of

from crimsonbench.controller.settings import Settings
from crimsonbench.errors import InvalidSpec
from crimsonbench.manifests import fio, fio_driver, maintenance
from crimsonbench.manifests.ceph_access import (
    CephAccess,
    ceph_access_env,
    ceph_access_for,
    ceph_access_volumes,
    external_access,
    rook_access,
    rook_client_access,
)
from crimsonbench.manifests.naming import dns_name, label_value
from crimsonbench.manifests.pods import PodOptions
from crimsonbench.manifests.rook_objects import ceph_client, cephblockpool
from crimsonbench.manifests.targets import kube_target
from crimsonbench.plan.build import build_plan
from crimsonbench.plan.types import BarrierAddress
from crimsonbench.spec.models import ExternalTarget, validate_spec

IMAGE = "quay.io/example/crimsonbench-fio:1.0"
OPTS = PodOptions(image=IMAGE)
RUN = "blue-8osd-5reactor-socket"
SERVERS = {NODE: "10.0.0.7:8765"}
MEET = BarrierAddress("10.0.0.9", 8766, "5eed")
UID = (
    "6b1e6d0c-3c4f-4a43-9f1e-0d3b1c2a4e5f"  # a run's metadata.uid  # the driver pod's start barrier
)


def socket_plan() -> Any:
    return plan_of(RUN, bluestore_8x5("socket"))


def two_client_plan() -> Any:
    doc = bluestore_8x5("socket")
    doc["client"] = {**doc["client"], "node": None, "nodes": ["client-a", "client-b"]}
    del doc["client"]["node"]
    return plan_of(RUN, doc)


# ---------------------------------------------------------------- golden


def test_golden_fio_server_driver_and_step(golden: Any) -> None:
    _, plan = socket_plan()
    step = plan.steps[0]
    access = rook_client_access("rook-ceph", plan.pool.user)
    osds = {fio_driver.OSDS_FILE: '{"0": "uid/0"}'}
    files = fio.client_job_files(plan, step)  # one client: no barrier
    start = fio_driver.start_command(step.id, files, SERVERS,
                                     deadline_s=plan.timing.deadline_s,
                                     extra_files=osds)  # fmt: skip
    golden(
        "job-fio-server-driver-and-step.yaml",
        [
            fio.fio_server_job(RUN, plan.clients[0], plan, access, OPTS),
            fio_driver.fio_driver_job(RUN, "rook-ceph", OPTS, node=NODE, lifetime_s=3600),
            {"startStep": start, "pollStep": fio_driver.poll_command(step.id, wait_s=3),
             "dropStep": fio_driver.end_command(step.id, stored=False)},
        ],
    )  # fmt: skip


def test_golden_maintenance_and_rook_objects(golden: Any) -> None:
    _, plan = socket_plan()
    admin, user = rook_access("rook-ceph"), rook_client_access("rook-ceph", plan.pool.user)
    golden(
        "job-maintenance-cephclient-cephblockpool.yaml",
        [
            maintenance.topology_probe_job(RUN, NODE, "crimsonbench", OPTS),
            maintenance.cluster_facts_job(RUN, admin, OPTS),
            maintenance.create_images_job(RUN, "rbd", plan.pool.images, 2**30, UID, user, OPTS),
            maintenance.ceph_commands_job(RUN, "setup", plan.ceph.commands, admin, OPTS),
            ceph_client(RUN, plan.pool, namespace="rook-ceph"),
            cephblockpool(RUN, plan.pool, namespace="rook-ceph"),
        ],
    )


# ---------------------------------------------------------------- fio servers


def test_a_server_per_client_node_pinned_guaranteed_and_ready_when_listening() -> None:
    _, plan = two_client_plan()
    access = rook_client_access("rook-ceph", plan.pool.user)
    jobs = [fio.fio_server_job(RUN, c, plan, access, OPTS, port=9000) for c in plan.clients]
    assert len({j["metadata"]["name"] for j in jobs}) == 2
    for client, job in zip(plan.clients, jobs, strict=True):
        pod = job["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["CB_CPUS"] == client.cpuset and env["CB_PORT"] == "9000"
        assert 'taskset -c "$CB_CPUS" fio --server' in container["command"][2]
        res = container["resources"]
        assert res["requests"] == res["limits"]
        assert res["limits"]["cpu"] == str(len(client.cpus))
        assert res["limits"]["memory"] == f"{128 + 256 * len(client.images)}Mi"
        assert container["readinessProbe"]["tcpSocket"] == {"port": 9000}
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [client.node]
        # the run's own cephx user (its Secret), never Rook's admin key
        secret = next(v for v in pod["volumes"] if v["name"] == "ceph-secret")
        assert secret["secret"]["secretName"] == f"rook-ceph-client-{plan.pool.user}"
        # it lives as long as the whole run may
        assert job["spec"]["activeDeadlineSeconds"] == fio.run_deadline_s(plan)
    # the images are spread over the two clients, each client's job file pinned to it
    assert [len(c.images) for c in plan.clients] == [4, 4]
    for client, text in fio.client_job_files(plan, plan.steps[0], MEET).items():
        assert f"cpus_allowed={plan.client(client).cpuset}" in text


def test_a_local_client_has_no_server() -> None:
    spec = validate_spec(
        {"target": {"local": {}}, "osd": {"flavor": "classic"}, "client": {"cpuSet": "1"}}
    )
    plan = build_plan("l", spec, XEON)
    with pytest.raises(ValueError, match="no node"):
        fio.fio_server_job("l", plan.clients[0], plan, rook_access(), OPTS)


# ---------------------------------------------------------------- the fio driver


def test_the_driver_holds_no_secret_and_outlives_the_run() -> None:
    _, plan = two_client_plan()
    job = fio_driver.fio_driver_job(RUN, "rook-ceph", OPTS, node="client-a",
                                    lifetime_s=fio.run_deadline_s(plan))  # fmt: skip
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    # no Ceph user or key; the sha256 of the operator's driver script (which copy runs)
    assert {e["name"] for e in container["env"]} == {"CB_LIFETIME", "CB_DRIVER_SHA256"}
    assert {v["name"] for v in pod["volumes"]} == {"results"}
    assert job["spec"]["activeDeadlineSeconds"] == fio.run_deadline_s(plan)
    assert job["metadata"]["labels"]["bench.crimson.ceph.io/role"] == "fio-driver"
    term = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["client-a"]


def test_a_crimson_driver_holds_the_fio_user_to_sample_reactors() -> None:
    _, plan = two_client_plan()
    access = rook_client_access("rook-ceph", plan.pool.user)
    job = fio_driver.fio_driver_job(RUN, "rook-ceph", OPTS, node="client-a", lifetime_s=60,
                                    access=access)  # fmt: skip
    (container,) = job["spec"]["template"]["spec"]["containers"]
    secrets = [v["secret"]["secretName"] for v in job["spec"]["template"]["spec"]["volumes"]
               if "secret" in v]  # fmt: skip
    assert secrets == [f"rook-ceph-client-{plan.pool.user}"]  # the run's user, not admin
    assert container["resources"]["limits"]["cpu"] == fio_driver.SAMPLER_CPU
    assert "cat > /etc/ceph/ceph.conf" in container["command"][2]
    assert container["command"][2].endswith(fio_driver.DRIVER_SCRIPT)


def test_a_step_start_sends_each_server_one_job_file_with_every_job_of_it() -> None:
    _, plan = two_client_plan()
    step = plan.steps[0]
    servers = {"client-a": "10.0.0.1:8765", "client-b": "10.0.0.2:8765"}
    job_files = fio.client_job_files(plan, step, MEET)
    extra = {"osds.json": "{}", **fio_driver.barrier_files(plan, MEET)}
    argv = fio_driver.start_command(step.id, job_files, servers, deadline_s=99,
                                    extra_files=extra)  # fmt: skip
    assert argv[: len(fio_driver.IN_POD)] == list(fio_driver.IN_POD)
    cmd, root, key, deadline, n = argv[4:9]
    assert (cmd, root, key, deadline, int(n)) == ("start", "/results/steps", step.id, "99", 5)
    files = dict(zip(argv[9 : 9 + 2 * int(n) : 2], argv[10 : 10 + 2 * int(n) : 2], strict=True))
    assert files["osds.json"] == "{}"
    # every job of both servers meets the others at the driver pod's start barrier
    t = plan.timing
    assert (
        files[fio_driver.BARRIER_ARGS]
        == f"{t.barrier_jobs} {t.start_barrier_cap_s:g} 8766 5eed 10.0.0.9\n"
    )
    assert t.barrier_jobs == 8 * plan.fio_numjobs
    assert files[fio_driver.BARRIER_PROGRAM] == fio_driver.barrier_program()
    for client in ("client-a", "client-b"):
        text = files[f"{client}.fio"]
        # the servers hold the key of the run's own user (Rook): named in every file
        assert f"clientname={plan.pool.user}" in text and plan.pool.user == f"{RUN}-fio"
        # one section per job of this client; no stonewall: they all start together
        parsed = configparser.ConfigParser(interpolation=None)
        parsed.read_string(text)
        assert parsed.sections()[0] == "global"
        images = [parsed[s]["rbdname"] for s in parsed.sections()[1:]]
        assert images == [j.image for j in plan.fio.jobs_of(client)] and len(images) == 4
        assert "stonewall" not in text and "new_group" not in text and "wait_for" not in text
        assert "create_connection(('10.0.0.9', 8766)" in parsed["global"]["exec_prerun"]
    args = argv[9 + 2 * int(n) :]
    assert args == ["--client=ip:10.0.0.1,8765", "./client-a.fio",
                    "--client=ip:10.0.0.2,8765", "./client-b.fio"]  # fmt: skip


def test_step_files_too_large_for_one_exec_are_refused_when_planned() -> None:
    doc = bluestore_8x5("socket")
    nodes = ["client-a", "client-b", "client-c", "client-d"]
    doc["client"] = {**doc["client"], "nodes": nodes, "images": 1024, "processesPerImage": 8}
    del doc["client"]["node"]
    _, plan = plan_of(RUN, doc)  # 4 x 2048 jobs: each fio within its limit
    with pytest.raises(InvalidSpec) as err:
        fio_driver.check_fits_one_exec(plan)
    assert err.value.field == "spec.client.images"
    assert "more than one exec carries" in str(err.value)
    _, small = two_client_plan()
    fio_driver.check_fits_one_exec(small)  # the usual shape fits


def test_more_jobs_than_one_fio_runs_is_refused_by_the_planner() -> None:
    doc = bluestore_8x5("osd")
    doc["client"].update(images=1024, processesPerImage=4, numJobs=2)
    with pytest.raises(InvalidSpec) as err:
        plan_of(RUN, doc)
    assert err.value.field == "spec.client.processesPerImage"
    assert "would run 8,192 jobs in one fio" in str(err.value)


def test_seastore_reference_plan_server() -> None:
    _, plan = plan_of("seastore-1osd-56reactor", SEASTORE_56)
    job = fio.fio_server_job("s", plan.clients[0], plan, rook_access(), OPTS)
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "56"
    assert len(plan.fio.jobs) == 32


# ---------------------------------------------------------------- access


def test_external_access() -> None:
    target = ExternalTarget.model_validate(
        {"monHost": "10.0.0.1,10.0.0.2", "user": "bench", "keyringSecret": {"name": "kr"}}
    )
    access = external_access("bench-ns", target)
    env = {e["name"]: e.get("value") for e in ceph_access_env(access)}
    assert env == {"CEPH_CONF": "/etc/ceph/ceph.conf", "CEPH_USERNAME": "bench",
                   "CEPH_MON_HOST": "10.0.0.1,10.0.0.2"}  # fmt: skip
    volumes = ceph_access_volumes(access)
    assert volumes[1]["secret"] == {
        "secretName": "kr",
        "items": [{"key": "keyring", "path": "keyring"}],
        "defaultMode": 0o440,
    }
    assert "mon-endpoints" not in [v["name"] for v in volumes]
    with pytest.raises(InvalidSpec) as err:
        external_access("ns", ExternalTarget(mon_host="m", user="u", keyring_file="/k"))
    assert err.value.field == "spec.target.external.keyringSecret"


def test_access_for_spec() -> None:
    spec, plan = socket_plan()
    assert ceph_access_for(kube_target(spec, "runs")) == rook_access("rook-ceph")
    local = validate_spec({"target": {"local": {}}})
    with pytest.raises(InvalidSpec) as err:
        ceph_access_for(kube_target(local, "runs"))
    assert err.value.field == "spec.target" and "crimsonbench run" in str(err.value)
    ext = validate_spec(
        {
            "target": {
                "external": {
                    "monHost": "10.0.0.1",
                    "user": "admin",
                    "keyringSecret": {"name": "kr", "key": "keyring"},
                }
            },
            "client": {"node": "n1", "pool": "bench"},
        }
    )
    access = ceph_access_for(kube_target(ext, "runs"))  # the Secret beside the run
    assert (access.namespace, access.secret_name, access.mon_host) == ("runs", "kr", "10.0.0.1")
    assert plan.pool.user == f"{RUN}-fio"  # on Rook fio runs as the run's own CephClient
    assert rook_client_access("rook-ceph", plan.pool.user).secret_name == (
        f"rook-ceph-client-{RUN}-fio"
    )
    with pytest.raises(ValueError, match="exactly one"):
        CephAccess("ns", "s", "k")


def test_a_pod_must_run_where_its_secret_is() -> None:
    _, plan = socket_plan()
    body = maintenance.create_images_job(
        RUN, "rbd", plan.pool.images, 1, UID, rook_access("rook-ceph"), OPTS
    )
    assert body["metadata"]["namespace"] == "rook-ceph"


# ---------------------------------------------------------------- small Jobs


def test_probe_job() -> None:
    job = maintenance.topology_probe_job("r", "node-a.example.com", "ops", OPTS)
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"][0]["command"] == [
        "lscpu", "-e=CPU,NODE,SOCKET,CORE,ONLINE", "--json",
    ]  # fmt: skip
    assert pod["tolerations"] == [{"operator": "Exists"}]
    assert job["metadata"]["namespace"] == "ops"
    assert job["metadata"]["labels"]["bench.crimson.ceph.io/role"] == "probe"


def test_facts_job_only_reads() -> None:
    job = maintenance.cluster_facts_job("r", rook_access(), OPTS)
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    commands = [line for line in script.splitlines() if line.startswith("ceph ")]
    assert [c.split('"$user" ')[1] for c in commands] == [
        "config ls --format json",
        "config dump --format json",
        "fsid --format json",
        "osd metadata --format json",
        "osd pool ls --format json",
        "versions --format json",
    ]


def test_remove_images_job_outlives_the_run_and_names_its_images() -> None:
    job = maintenance.remove_images_job("r", "bench", ["img-0", "img-1"], UID, rook_access(),
                                        OPTS)  # fmt: skip
    assert job["metadata"]["labels"]["bench.crimson.ceph.io/role"] == maintenance.ROLE_RBD_CLEANUP
    assert job["spec"]["ttlSecondsAfterFinished"] == 3600
    env = {
        e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["CB_POOL"] == "bench" and env["CB_IMAGES"] == "img-0 img-1"
    assert env["CB_RUN_UID"] == UID  # only images tagged with it are removed
    with pytest.raises(ValueError, match="not a valid"):
        maintenance.remove_images_job("r", "bench", ["bad name"], UID, rook_access(), OPTS)


def test_every_job_builder_takes_the_operators_pod_options() -> None:
    """CRIMSONBENCH_HOST_NETWORK / _JOB_TOLERATIONS / _IMAGE_PULL_POLICY reach every pod the
    operator creates (a Ceph only the host reaches must be reachable from all of them)."""
    opts = Settings(
        host_network=True,
        job_tolerations=[{"key": "storage", "operator": "Exists", "effect": "NoSchedule"}],
        image_pull_policy="Never",
    ).pod_options()
    _, plan = socket_plan()
    access = rook_access()
    built = {
        "server": fio.fio_server_job(RUN, plan.clients[0], plan, access, opts),
        "driver": fio_driver.fio_driver_job(RUN, "ns", opts, node=NODE, lifetime_s=1),
        "ceph": maintenance.ceph_commands_job(RUN, "setup", [["status"]], access, opts),
        "facts": maintenance.cluster_facts_job(RUN, access, opts),
        "images": maintenance.create_images_job(RUN, "p", ["i"], 1, UID, access, opts),
        "probe": maintenance.topology_probe_job(RUN, NODE, "ns", opts),
    }
    for what, job in built.items():
        pod = job["spec"]["template"]["spec"]
        assert pod["hostNetwork"] is True, what
        assert pod["dnsPolicy"] == "ClusterFirstWithHostNet", what
        assert pod["containers"][0]["imagePullPolicy"] == "Never", what
        assert pod["containers"][0]["image"] == opts.image, what
        want = [{"operator": "Exists"}] if what == "probe" else list(opts.tolerations)
        assert pod["tolerations"] == want, what
        assert pod["securityContext"]["runAsNonRoot"] is True, what
        assert pod["automountServiceAccountToken"] is False, what
        assert job["spec"]["backoffLimit"] == 0, what


# ---------------------------------------------------------------- Rook objects


def test_ceph_client_caps_limited_to_the_pool() -> None:
    _, plan = socket_plan()
    client = ceph_client(RUN, plan.pool)
    assert client["metadata"]["name"] == plan.pool.user  # cephx user client.<name>
    assert client["spec"]["caps"] == {"mon": "profile rbd", "osd": "profile rbd pool=rbd"}


def test_cephblockpool_size_one() -> None:
    _, plan = socket_plan()
    pool = cephblockpool(RUN, plan.pool)
    assert pool["metadata"]["name"] == "rbd"  # Rook names the Ceph pool after the CR
    assert "name" not in pool["spec"]  # only .mgr, .nfs and .rgw.root may differ
    assert pool["metadata"]["labels"]["bench.crimson.ceph.io/run"] == RUN
    assert pool["spec"]["replicated"] == {"size": 1, "requireSafeReplicaSize": False}
    assert pool["spec"]["parameters"]["pg_num"] == "128"
    assert pool["metadata"]["annotations"] == {"rook.io/force-deletion": "true"}
    _, kept = plan_of(RUN, {**bluestore_8x5("osd"), "keepImages": True})
    assert "annotations" not in cephblockpool(RUN, kept.pool)["metadata"]


def test_cephblockpool_needs_an_object_name() -> None:
    doc = bluestore_8x5("osd")
    doc["client"]["pool"] = "bench_Pool"
    _, plan = plan_of(RUN, doc)
    with pytest.raises(InvalidSpec) as err:
        cephblockpool(RUN, plan.pool)
    assert err.value.field == "spec.client.pool"


def test_rook_objects_are_valid_for_rook() -> None:
    from test_manifests_cephcluster import validate_against

    _, plan = socket_plan()
    validate_against("CephClient", ceph_client(RUN, plan.pool, namespace="rook-ceph"))
    validate_against("CephBlockPool", cephblockpool(RUN, plan.pool, namespace="rook-ceph"))


# ---------------------------------------------------------------- names and models


def test_names_are_dns_labels() -> None:
    _, plan = two_client_plan()
    long_run = "a" * 60
    names = {fio.server_job_name(long_run, c.name) for c in plan.clients}
    names.add(fio_driver.driver_job_name(long_run))
    assert len(names) == len(plan.clients) + 1
    for name in names:
        assert len(name) <= 63 and re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", name)
    assert dns_name("run", "000-randread4k-qd001-r1") == "run-000-randread4k-qd001-r1"
    assert dns_name("My.Run") != dns_name("my-run")


@given(st.lists(st.text(min_size=0, max_size=90), min_size=1, max_size=4))
def test_dns_name_always_valid(parts: list[str]) -> None:
    name = dns_name(*parts)
    assert 1 <= len(name) <= 63
    assert re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", name), name


@given(st.text(max_size=100))
def test_label_value_always_valid(value: str) -> None:
    out = label_value(value)
    assert len(out) <= 63
    assert out == "" or re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", out), out


def test_kubernetes_models_know_every_field() -> None:
    """Every key is a field of the kubernetes client's models (a typo would be pruned or
    rejected by the API server)."""
    k8s = pytest.importorskip("kubernetes.client")
    _, plan = two_client_plan()
    external = ExternalTarget.model_validate(
        {"monHost": "m", "user": "u", "keyringSecret": {"name": "s"}}
    )
    access = external_access("ns", external)
    objects = {
        "V1Job": [
            fio.fio_server_job(RUN, plan.clients[0], plan, access, OPTS),
            fio_driver.fio_driver_job(RUN, "ns", OPTS, node=NODE, lifetime_s=1),
            maintenance.topology_probe_job(RUN, NODE, "x", OPTS),
            maintenance.cluster_facts_job(RUN, access, OPTS),
            maintenance.remove_images_job(RUN, "p", ["i"], UID, access, OPTS),
        ],
    }
    for model, docs in objects.items():
        for doc in docs:
            assert _unknown(k8s, model, doc) == [], model


def _unknown(k8s: Any, model: str, value: Any, path: str = "") -> list[str]:
    if model.startswith("list["):
        return [
            u for i, v in enumerate(value) for u in _unknown(k8s, model[5:-1], v, f"{path}[{i}]")
        ]
    if model.startswith("dict("):
        inner = model[model.index(",") + 1 : -1].strip()
        return [u for k, v in value.items() for u in _unknown(k8s, inner, v, f"{path}.{k}")]
    cls = getattr(k8s, model, None)
    if cls is None:  # str, int, bool, object
        return []
    by_json = {json_key: attr for attr, json_key in cls.attribute_map.items()}
    out = []
    for key, v in value.items():
        if key not in by_json:
            out.append(f"{path}.{key}")
        else:
            out += _unknown(k8s, cls.openapi_types[by_json[key]], v, f"{path}.{key}")
    return out
