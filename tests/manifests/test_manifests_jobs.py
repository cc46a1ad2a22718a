"""Jobs, job-file ConfigMaps, Ceph access and the Rook client/pool (golden files), names,
the pod's shell script (run here with stand-ins for fio and rbd) and the pod log format."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from manifest_inputs import FIXTURES, NODE, SEASTORE_56, bluestore_8x5, plan_of

from crimsonbench.errors import InvalidSpec, ParseError
from crimsonbench.manifests import jobs
from crimsonbench.manifests.jobs import (
    CEPH_CONFIG_SCRIPT,
    FIO_SCRIPT,
    IMAGES_SCRIPT,
    ceph_access_for,
    ceph_client,
    cephblockpool,
    external_access,
    fio_jobs_configmap,
    fio_step_job,
    format_step_log,
    parse_step_log,
    prefill_job,
    rook_access,
    rook_client_access,
    topology_probe_job,
)
from crimsonbench.manifests.naming import dns_name, label_value
from crimsonbench.results.fio_json import parse_fio_json
from crimsonbench.spec.models import ExternalTarget, validate_spec

RBD = FIXTURES / "fio" / "rbd"
RBD_OUTPUTS = {p.stem: p.read_text() for p in sorted(RBD.glob("*.json"))}
IMAGE = "quay.io/example/crimsonbench-fio:1.0"
RUN = "blue-8osd-5reactor-socket"


def socket_plan() -> Any:
    return plan_of(RUN, bluestore_8x5("socket"))


# ---------------------------------------------------------------- golden


def test_golden_fio_step(golden: Any) -> None:
    _, plan = socket_plan()
    step = plan.steps[0]
    access = rook_access("rook-ceph")
    golden(
        "job-fio-step.yaml",
        [
            fio_jobs_configmap(RUN, step, namespace="rook-ceph"),
            fio_step_job(RUN, step, NODE, IMAGE, access, plan.cpu.client_cpuset),
        ],
    )


def test_golden_prefill(golden: Any) -> None:
    spec, plan = socket_plan()
    access = rook_access("rook-ceph")
    golden(
        "job-prefill.yaml",
        [
            fio_jobs_configmap(RUN, plan.prefill_jobs, namespace="rook-ceph"),
            prefill_job(RUN, plan, IMAGE, access, spec=spec, node=NODE),
        ],
    )


def test_golden_probe_client_and_pool(golden: Any) -> None:
    spec, _ = socket_plan()
    golden(
        "job-probe-cephclient-cephblockpool.yaml",
        [
            topology_probe_job(RUN, NODE, IMAGE, namespace="crimsonbench"),
            ceph_client(RUN, spec.client.pool, namespace="rook-ceph"),
            cephblockpool(RUN, spec, namespace="rook-ceph"),
        ],
    )


# ---------------------------------------------------------------- the Job fields


def test_fio_job_is_guaranteed_and_bounded() -> None:
    _, plan = socket_plan()
    step = plan.steps[0]
    job = fio_step_job(RUN, step, NODE, IMAGE, rook_access(), plan.cpu.client_cpuset)
    assert job["spec"]["backoffLimit"] == 0
    assert "ttlSecondsAfterFinished" not in job["spec"]
    assert job["spec"]["activeDeadlineSeconds"] == 300 + 10 + jobs.DEFAULT_GRACE_SECONDS
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    res = container["resources"]
    assert res["requests"] == res["limits"]
    assert res["limits"]["cpu"] == "16"  # 24-27,52-55,80-83,108-111
    assert res["limits"]["memory"] == f"{128 + 256 * 8}Mi"  # 8 images, one process each
    assert {"name": "CEPH_CONF", "value": "/etc/ceph/ceph.conf"} in container["env"]
    assert container["command"][:2] == ["sh", "-c"]
    assert container["command"][4:] == [j.name for j in step.jobs]
    # the whole fio process is pinned (taskset), its job processes too (cpus_allowed)
    assert {"name": "CB_CPUS", "value": plan.cpu.client_cpuset} in container["env"]
    assert all(f"cpus_allowed={plan.cpu.client_cpuset}" in j.job_file for j in step.jobs)
    labels = job["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == "crimsonbench"
    assert labels["bench.crimson.ceph.io/run"] == RUN
    assert labels["bench.crimson.ceph.io/step"] == step.id
    assert labels["bench.crimson.ceph.io/role"] == "fio"
    assert job["spec"]["template"]["metadata"]["labels"] == labels
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert pod["automountServiceAccountToken"] is False
    assert "hostNetwork" not in pod
    assert job["metadata"]["namespace"] == "rook-ceph"  # where rook-ceph-mon can be mounted


def test_fio_job_subset_of_jobs_for_one_of_several_nodes() -> None:
    _, plan = socket_plan()
    step = plan.steps[0]
    half = step.jobs[:4]
    job = fio_step_job(
        RUN, step, "client-2", IMAGE, rook_access(), "0-3", jobs=half, host_network=True
    )
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"][0]["command"][4:] == [j.name for j in half]
    assert pod["containers"][0]["resources"]["limits"]["cpu"] == "4"
    assert pod["hostNetwork"] is True
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["client-2"]
    other = fio_step_job(RUN, step, NODE, IMAGE, rook_access(), "0-3")
    assert job["metadata"]["name"] != other["metadata"]["name"]


def test_prefill_without_prefill_jobs_only_creates_images() -> None:
    doc = bluestore_8x5("osd")
    doc["client"]["prefill"] = False
    spec, plan = plan_of(RUN, doc)
    assert plan.prefill_jobs == ()
    job = prefill_job(RUN, plan, IMAGE, rook_access(), spec=spec)
    pod = job["spec"]["template"]["spec"]
    assert "jobs" not in [v["name"] for v in pod["volumes"]]  # no ConfigMap to wait for
    assert pod["containers"][0]["command"][4:] == []
    # 8 x 10 GiB at 5 MiB/s + grace
    assert job["spec"]["activeDeadlineSeconds"] == 8 * 10 * 1024 // 5 + jobs.DEFAULT_GRACE_SECONDS
    with pytest.raises(ValueError, match="nothing to do"):
        prefill_job(RUN, plan, IMAGE, rook_access())


def test_external_access() -> None:
    target = ExternalTarget.model_validate(
        {"monHost": "10.0.0.1,10.0.0.2", "user": "bench", "keyringSecret": {"name": "kr"}}
    )
    access = external_access("bench-ns", target)
    env = {e["name"]: e.get("value") for e in jobs.ceph_access_env(access)}
    assert env == {"CEPH_CONF": "/etc/ceph/ceph.conf", "CEPH_USERNAME": "bench",
                   "CEPH_MON_HOST": "10.0.0.1,10.0.0.2"}  # fmt: skip
    volumes = jobs.ceph_access_volumes(access)
    assert volumes[1]["secret"] == {
        "secretName": "kr",
        "items": [{"key": "keyring", "path": "keyring"}],
        "defaultMode": 0o440,
    }
    assert "mon-endpoints" not in [v["name"] for v in volumes]
    with pytest.raises(InvalidSpec) as err:
        external_access("ns", ExternalTarget(mon_host="m", keyring_file="/k"))
    assert err.value.field == "spec.target.external.keyringSecret"


def test_access_for_spec() -> None:
    spec, _ = socket_plan()
    assert ceph_access_for(spec, "runs") == rook_access("rook-ceph")
    local = validate_spec({"target": {"local": {}}})
    with pytest.raises(InvalidSpec):
        ceph_access_for(local, "runs")
    client = rook_client_access("rook-ceph", RUN)
    assert client.secret_name == f"rook-ceph-client-{RUN}"
    with pytest.raises(ValueError, match="exactly one"):
        jobs.CephAccess("ns", "s", "k")


def test_probe_job() -> None:
    job = topology_probe_job("r", "node-a.example.com", IMAGE)
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"][0]["command"] == [
        "lscpu", "-e=CPU,NODE,SOCKET,CORE,ONLINE", "--json",
    ]  # fmt: skip
    assert pod["tolerations"] == [{"operator": "Exists"}]
    assert "hostNetwork" not in pod
    assert job["metadata"]["labels"]["bench.crimson.ceph.io/role"] == "probe"
    assert "namespace" not in job["metadata"]


def test_configmap_too_large_names_the_field() -> None:
    doc = bluestore_8x5("osd")
    doc["client"].update(images=1024, processesPerImage=4)
    _, plan = plan_of(RUN, doc)
    with pytest.raises(InvalidSpec) as err:
        fio_jobs_configmap(RUN, plan.steps[0])
    assert err.value.field == "spec.client.images"


def test_kubernetes_models_know_every_field() -> None:
    """Every key is a field of the kubernetes client's models (a typo would be pruned or
    rejected by the API server)."""
    k8s = pytest.importorskip("kubernetes.client")
    spec, plan = socket_plan()
    access = rook_access()
    external = ExternalTarget.model_validate({"monHost": "m", "keyringSecret": {"name": "s"}})
    objects = {
        "V1Job": [
            fio_step_job(
                RUN,
                plan.steps[0],
                NODE,
                IMAGE,
                access,
                plan.cpu.client_cpuset,
                host_network=True,
                tolerations=[{"key": "k", "operator": "Exists"}],
            ),
            prefill_job(RUN, plan, IMAGE, access, spec=spec, node=NODE),
            topology_probe_job(RUN, NODE, IMAGE, namespace="x"),
            fio_step_job(RUN, plan.steps[0], NODE, IMAGE, external_access("ns", external), "0-3"),
        ],
        "V1ConfigMap": [fio_jobs_configmap(RUN, plan.steps[0])],
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


# ---------------------------------------------------------------- names


def test_names_are_dns_labels() -> None:
    _, plan = socket_plan()
    long_run = "a" * 60
    names = {fio_step_job(long_run, s, NODE, IMAGE, rook_access(), "0")["metadata"]["name"]
             for s in plan.steps}  # fmt: skip
    assert len(names) == len(plan.steps)
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


# ---------------------------------------------------------------- the pod log


def test_parse_step_log_round_trip_with_real_rbd_outputs() -> None:
    text = format_step_log(RBD_OUTPUTS, logs={"randread4k": "fio: some warning\n"})
    parsed = parse_step_log(text, expected=RBD_OUTPUTS)
    assert set(parsed) == set(RBD_OUTPUTS)
    for name, body in parsed.items():
        assert json.loads(body) == json.loads(RBD_OUTPUTS[name])
        assert parse_fio_json(body)


def test_parse_step_log_keeps_fio_notes_before_the_json() -> None:
    noted = (FIXTURES / "fio" / "psync-note.json").read_text()
    assert noted.startswith("note:")
    parsed = parse_step_log(format_step_log({"p0": noted}))
    assert parsed["p0"].startswith("note:")
    assert parse_fio_json(parsed["p0"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no '==> <job>.json <==' delimiter"),
        ("fio: failed to connect\n", "it starts with: fio: failed"),
        ("==> a.json <==\n\n==> b.json <==\n{}\n", "no JSON for job a"),
        ("==> a.log <==\nrados_connect failed\n==> a.json <==\n\n", "fio said: rados_connect"),
        ('==> a.json <==\n{"jobs": [\n', "no JSON for job a"),
        ("==> a.log <==\nonly a log\n", "no '==> <job>.json <==' section"),
    ],
)
def test_parse_step_log_errors(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=re.escape(message)):
        parse_step_log(text)


def test_parse_step_log_expected_job_missing() -> None:
    text = format_step_log({"a": RBD_OUTPUTS["randread4k"]})
    with pytest.raises(ParseError, match="no output for job.*b"):
        parse_step_log(text, expected=["a", "b"])


# ---------------------------------------------------------------- the script, for real


def _tool(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def pod(tmp_path: Path) -> dict[str, Path]:
    """A stand-in pod filesystem; the script's absolute paths are rewritten into it."""
    dirs = {name: tmp_path / name for name in ("etc-ceph", "etc-rook", "secret", "jobs",
                                               "results", "bin")}  # fmt: skip
    for d in dirs.values():
        d.mkdir()
    return dirs


def _run(pod: dict[str, Path], script: str, args: list[str], env: dict[str, str]) -> Any:
    if shutil.which("sh") is None or shutil.which("sed") is None:
        pytest.skip("no sh/sed")
    for old, new in (("/etc/ceph", pod["etc-ceph"]), ("/etc/rook", pod["etc-rook"]),
                     ("/var/lib/crimsonbench", pod["secret"]), ("/jobs", pod["jobs"]),
                     ("/results", pod["results"])):  # fmt: skip
        script = script.replace(old, str(new))
    full_env = {"PATH": f"{pod['bin']}:{os.environ['PATH']}", **env}
    return subprocess.run(
        ["sh", "-c", script, "crimsonbench-fio", *args],
        capture_output=True, text=True, env=full_env, timeout=60, check=False,
    )  # fmt: skip


def test_script_rook_access_writes_config_runs_fio_in_parallel_and_prints(
    pod: dict[str, Path],
) -> None:
    (pod["etc-rook"] / "mon-endpoints").write_text(
        "a=10.0.0.1:6789,b=10.0.0.2:6789,c-1=[v2:10.0.0.3:3300]"
    )
    (pod["secret"] / "secret").write_text("AQBsecretkey==")
    outputs = dict(list(RBD_OUTPUTS.items())[:3])
    for name in outputs:
        (pod["jobs"] / f"{name}.fio").write_text(f"[global]\n[{name}]\n")
    # a fio stand-in: copies the fixture named like the job file to --output
    fixtures = {name: str(RBD / f"{name}.json") for name in outputs}
    cases = "".join(f'  *{n}.fio) cp {p} "$out" ;;\n' for n, p in fixtures.items())
    _tool(
        pod["bin"] / "fio",
        f"""
for a in "$@"; do case "$a" in --output=*) out="${{a#--output=}}" ;; esac; done
echo "started $*" >&2
case "$*" in
{cases}esac
""",
    )
    result = _run(pod, CEPH_CONFIG_SCRIPT + FIO_SCRIPT, list(outputs),
                  {"CEPH_USERNAME": "client.admin"})  # fmt: skip
    assert result.returncode == 0, result.stderr
    conf = (pod["etc-ceph"] / "ceph.conf").read_text()
    assert "mon_host = 10.0.0.1:6789,10.0.0.2:6789,[v2:10.0.0.3:3300]\n" in conf
    assert f"keyring = {pod['etc-ceph']}/keyring\n" in conf
    assert "rbd_cache = false" in conf
    keyring = (pod["etc-ceph"] / "keyring").read_text()
    assert keyring == "[client.admin]\nkey = AQBsecretkey==\n"
    assert oct((pod["etc-ceph"] / "keyring").stat().st_mode & 0o777) == "0o600"
    parsed = parse_step_log(result.stdout, expected=outputs)
    assert {k: json.loads(v) for k, v in parsed.items()} == {
        k: json.loads(v) for k, v in outputs.items()
    }
    assert "==> randread4k.log <==\nstarted" in result.stdout


def test_script_external_keyring_and_failed_fio(pod: dict[str, Path]) -> None:
    (pod["secret"] / "keyring").write_text("[client.bench]\nkey = AQB==\n")
    (pod["jobs"] / "a.fio").write_text("")
    (pod["jobs"] / "b.fio").write_text("")
    _tool(
        pod["bin"] / "fio",
        """
for a in "$@"; do case "$a" in --output=*) out="${a#--output=}" ;; esac; done
case "$*" in
  *a.fio) echo '{"jobs": []}' > "$out" ;;
  *b.fio) echo "fio: rbd_open failed" >&2; exit 1 ;;
esac
""",
    )
    result = _run(pod, CEPH_CONFIG_SCRIPT + FIO_SCRIPT, ["a", "b"],
                  {"CEPH_USERNAME": "bench", "CEPH_MON_HOST": "10.1.1.1"})  # fmt: skip
    assert result.returncode == 1
    conf = (pod["etc-ceph"] / "ceph.conf").read_text()
    assert "mon_host = 10.1.1.1\n" in conf
    assert f"keyring = {pod['secret']}/keyring\n" in conf
    assert not (pod["etc-ceph"] / "keyring").exists()
    with pytest.raises(ParseError, match="no JSON for job b; fio said: fio: rbd_open failed"):
        parse_step_log(result.stdout)


def test_script_creates_only_missing_images(pod: dict[str, Path]) -> None:
    (pod["secret"] / "secret").write_text("AQB==")
    calls = pod["results"] / "rbd-calls"
    _tool(
        pod["bin"] / "rbd",
        f"""
echo "$*" >> {calls}
case "$*" in *"info rbd/fio_test_1") exit 0 ;; *info*) exit 2 ;; esac
""",
    )
    result = _run(pod, CEPH_CONFIG_SCRIPT + IMAGES_SCRIPT + FIO_SCRIPT, [],
                  {"CEPH_USERNAME": "userid", "CEPH_MON_HOST": "m", "CB_POOL": "rbd",
                   "CB_IMAGES": "fio_test_0 fio_test_1", "CB_IMAGE_BYTES": "1024"})  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert calls.read_text().splitlines() == [
        "--name client.userid info rbd/fio_test_0",
        "--name client.userid create --size 1024B rbd/fio_test_0",
        "--name client.userid info rbd/fio_test_1",
    ]


# ---------------------------------------------------------------- Rook client and pool


def test_ceph_client_caps_limited_to_the_pool() -> None:
    client = ceph_client(RUN, "bench_pool")
    assert client["metadata"]["name"] == RUN  # cephx user client.<run>
    assert client["spec"]["caps"] == {"mon": "profile rbd", "osd": "profile rbd pool=bench_pool"}


def test_cephblockpool_size_one() -> None:
    spec, _ = socket_plan()
    pool = cephblockpool(RUN, spec)
    assert pool["metadata"]["name"] == "rbd"  # Rook names the Ceph pool after the CR
    assert "name" not in pool["spec"]  # only .mgr, .nfs and .rgw.root may differ
    assert pool["metadata"]["labels"]["bench.crimson.ceph.io/run"] == RUN
    assert pool["spec"]["replicated"] == {"size": 1, "requireSafeReplicaSize": False}
    assert pool["spec"]["parameters"]["pg_num"] == "128"
    assert pool["metadata"]["annotations"] == {"rook.io/force-deletion": "true"}
    kept = validate_spec({**bluestore_8x5("osd"), "keepImages": True})
    assert "annotations" not in cephblockpool(RUN, kept)["metadata"]


def test_rook_objects_are_valid_for_rook() -> None:
    from test_manifests_cephcluster import validate_against

    spec, _ = socket_plan()
    validate_against("CephClient", ceph_client(RUN, "rbd", namespace="rook-ceph"))
    validate_against("CephBlockPool", cephblockpool(RUN, spec, namespace="rook-ceph"))


def test_seastore_reference_plan_jobs() -> None:
    spec, plan = plan_of("seastore-1osd-56reactor", SEASTORE_56)
    job = fio_step_job("seastore-1osd-56reactor", plan.steps[-1], NODE, IMAGE, rook_access(),
                       plan.cpu.client_cpuset)  # fmt: skip
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "56"
    assert len(plan.steps[-1].jobs) == 32


def test_cephblockpool_needs_an_object_name() -> None:
    doc = bluestore_8x5("osd")
    doc["client"]["pool"] = "bench_Pool"
    with pytest.raises(InvalidSpec) as err:
        cephblockpool(RUN, validate_spec(doc))
    assert err.value.field == "spec.client.pool"


def test_every_job_builder_takes_the_operators_job_options() -> None:
    """CRIMSONBENCH_HOST_NETWORK / _JOB_TOLERATIONS / _IMAGE_PULL_POLICY reach every pod the
    operator creates (a Ceph only the host reaches must be reachable from all of them)."""
    from crimsonbench.controller.settings import Settings

    opts = Settings(
        host_network=True,
        job_tolerations=[{"key": "storage", "operator": "Exists", "effect": "NoSchedule"}],
        image_pull_policy="Never",
    ).job_options()
    _, plan = socket_plan()
    access = rook_access()
    built = {
        "fio": fio_step_job(RUN, plan.steps[0], NODE, IMAGE, access, "0-3", **opts),
        "prefill": prefill_job(RUN, plan, IMAGE, access, node=NODE, **opts),
        "ceph": jobs.ceph_commands_job(RUN, "setup", [["status"]], IMAGE, access, **opts),
        "probe": topology_probe_job(RUN, NODE, IMAGE, **opts),
    }
    for what, job in built.items():
        pod = job["spec"]["template"]["spec"]
        assert pod["hostNetwork"] is True, what
        assert pod["dnsPolicy"] == "ClusterFirstWithHostNet", what
        assert pod["containers"][0]["imagePullPolicy"] == "Never", what
        want = [{"operator": "Exists"}] if what == "probe" else opts["tolerations"]
        assert pod["tolerations"] == want, what


def test_remove_images_job_outlives_the_run_and_names_its_images() -> None:
    job = jobs.remove_images_job(RUN, "bench", ["img-0", "img-1"], IMAGE, rook_access())
    assert job["metadata"]["labels"]["bench.crimson.ceph.io/role"] == jobs.ROLE_RBD_CLEANUP
    assert job["spec"]["ttlSecondsAfterFinished"] == 3600
    env = {
        e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["CB_POOL"] == "bench" and env["CB_IMAGES"] == "img-0 img-1"
    with pytest.raises(ValueError, match="not a valid"):
        jobs.remove_images_job(RUN, "bench", ["bad name"], IMAGE, rook_access())
