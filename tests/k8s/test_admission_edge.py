"""The spec's edge on the real kube-apiserver (issue 26): the run's name rule on the root,
the patterns of every string that reaches a job file, a ceph.conf or a shell line, the
map-key and option-format CEL rules, and the bound on the whole sweep are refused at
`kubectl apply` -- and by the Python side with the same rule (validate_spec, validate_name).
The CRD carrying all of them is accepted within the API server's CEL cost budget (else
the session fixture fails with the server's reason)."""

from __future__ import annotations

import json
from typing import Any

import kubernetes.client
import pytest
from kubernetes.client.rest import ApiException
from test_admission import RANGE_LE, Bad, create, manifest, python_view, spec, status_of

from crimsonbench.errors import InvalidSpec
from crimsonbench.spec import models
from crimsonbench.spec.models import NAME_RULE, validate_name, validate_spec

pytestmark = pytest.mark.k8s

OPT, OSDK, CK, BOUND = (
    models.OPTION_RULES,
    models.OSD_KEY_RULES,
    models.CLIENT_KEY_RULES,
    models.BOUND_RULES,
)
ROOK = {"rook": {"clusterName": "c"}}
MATCH = "should match"


@pytest.fixture(scope="module")
def crs(admin: kubernetes.client.ApiClient) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(admin)


def custom(**opts: str) -> dict[str, Any]:
    return spec(workloads=[{"name": "w", "rw": "randrw", "bs": "4k", "options": opts}])


# ------------------------------------------------------------------ names

# Names the API server's own checks let through (valid DNS-1123 subdomains of at most 253
# characters) that the run's name rule refuses: only NAME_RULE speaks.
RULE_ONLY_NAMES = {
    "dotted": "a.b",
    "fifty-one": "a" * 51,
    "253-characters": "a" * 253,
    "dots-in-labels": "run.example.com",
}
# Names the API server refuses itself too: its words, beside our rule's.
SERVER_NAMES = {
    "slash": ("a/b", "RFC 1123"),
    "dot": (".", "RFC 1123"),
    "dotdot": ("..", "RFC 1123"),
    "upper-case": ("Quick", "RFC 1123"),
    "300-characters": ("a" * 300, "must be no more than 253 characters"),
    "nul": ("a\0b", "RFC 1123"),
    "underscore": ("a_b", "RFC 1123"),
}


@pytest.mark.parametrize("key", RULE_ONLY_NAMES)
def test_a_name_only_the_run_rule_refuses(
    crs: kubernetes.client.CustomObjectsApi, namespace: str, key: str
) -> None:
    name = RULE_ONLY_NAMES[key]
    with pytest.raises(ApiException) as info:
        create(crs, namespace, manifest(name, spec()))
    status = status_of(info.value)
    assert info.value.status == 422, status
    causes = status["details"]["causes"]
    assert [c["field"] for c in causes] == ["metadata.name"], causes
    assert causes[0]["message"] == f"Invalid value: {NAME_RULE.message}"
    with pytest.raises(InvalidSpec) as py:
        validate_name(name)
    assert py.value.field == "metadata.name" and NAME_RULE.message in py.value.message


@pytest.mark.parametrize("key", SERVER_NAMES)
def test_a_name_the_api_server_refuses_python_refuses_too(
    crs: kubernetes.client.CustomObjectsApi, namespace: str, key: str
) -> None:
    name, words = SERVER_NAMES[key]
    with pytest.raises(ApiException) as info:
        create(crs, namespace, manifest(name, spec()))
    status = status_of(info.value)
    assert info.value.status == 422, status
    causes = status["details"]["causes"]
    assert {c["field"] for c in causes} == {"metadata.name"}, causes
    assert any(words in c["message"] for c in causes), causes
    assert f"Invalid value: {NAME_RULE.message}" in [c["message"] for c in causes]
    with pytest.raises(InvalidSpec) as py:
        validate_name(name)
    assert py.value.field == "metadata.name" and NAME_RULE.message in py.value.message


@pytest.mark.parametrize("name", ["a", "a" * 50, "quick-crimson-7", "0-start-with-digit"])
def test_good_names_are_accepted_by_both(
    crs: kubernetes.client.CustomObjectsApi, namespace: str, name: str
) -> None:
    stored = create(crs, namespace, manifest(name, spec()))
    assert stored["metadata"]["name"] == name == validate_name(name)


def test_generate_name_gets_the_rule_too(
    crs: kubernetes.client.CustomObjectsApi, namespace: str
) -> None:
    ok = {**manifest("x", spec()), "metadata": {"generateName": "gen-"}}
    assert create(crs, namespace, ok)["metadata"]["name"].startswith("gen-")
    long = {**manifest("x", spec()), "metadata": {"generateName": "g" * 50 + "-"}}
    with pytest.raises(ApiException) as info:
        create(crs, namespace, long)
    assert NAME_RULE.message in json.dumps(status_of(info.value))


# ------------------------------------------------------------------ the spec's strings

EDGE = [
    # --- fio option values: the generic charset (a pattern on every value)
    Bad("option-newline", custom(rwmixread="70\nexec_prerun=id"),
        "spec.workloads[0].options.rwmixread", MATCH, py_text="is not a fio option value"),
    Bad("option-section", custom(bssplit="4k/100\n[evil]"),
        "spec.workloads[0].options.bssplit", MATCH, py_text="is not a fio option value"),
    Bad("option-dollar", custom(size="${HOME}"),
        "spec.workloads[0].options.size", MATCH, py_text="is not a fio option value"),
    # --- fio option formats: OPTION_RULES
    Bad("option-percent", custom(rwmixread="150"), "spec.workloads[0].options", rule=OPT[0]),
    Bad("option-flag", custom(norandommap="yes"), "spec.workloads[0].options", rule=OPT[1]),
    Bad("option-count", custom(thinktime_blocks="0"), "spec.workloads[0].options", rule=OPT[2]),
    Bad("option-time", custom(thinktime="soon"), "spec.workloads[0].options", rule=OPT[3]),
    Bad("option-size", custom(buffer_compress_chunk="4q"), "spec.workloads[0].options",
        rule=OPT[4]),
    Bad("option-size-or-percent", custom(offset="101%"), "spec.workloads[0].options",
        rule=OPT[5]),
    Bad("option-rate", custom(rate="fast"), "spec.workloads[0].options", rule=OPT[6]),
    Bad("option-percentile-list", custom(percentile_list="50:99"), "spec.workloads[0].options",
        rule=models.WORKLOAD_RULES[2]),
    # --- ceph.conf
    Bad("ceph-config-key", spec(osd={"cephConfig": {"osd op\n[global]": "1"}}),
        "spec.osd.cephConfig", rule=OSDK[0]),
    Bad("ceph-config-value", spec(osd={"cephConfig": {"debug_osd": "1\n[global]"}}),
        "spec.osd.cephConfig.debug_osd", MATCH,
        py_text="is not a ceph.conf value"),
    Bad("mon-host-newline",
        {"target": {"external": {"monHost": "10.0.0.1\n[global]", "keyringFile": "/k",
                                 "user": "admin"}},
         "client": {"node": "n1"}},
        "spec.target.external.monHost", MATCH, py_text="is not a mon_host"),
    Bad("external-user", {"target": {"external": {"monHost": "m", "keyringFile": "/k",
                                                  "user": "admin\nx"}},
                          "client": {"node": "n1"}},
        "spec.target.external.user", MATCH, py_text="is not a cephx user id"),
    Bad("keyring-file-space",
        {"target": {"external": {"user": "admin", "monHost": "m", "keyringFile": "/my keyring"}},
         "client": {"node": "n1"}},
        "spec.target.external.keyringFile", MATCH, py_text="is not a path we accept"),
    Bad("client-user", spec(client={"user": "admin]"}), "spec.client.user", MATCH,
        py_text="is not a cephx user id"),
    Bad("device-relative", spec(osd={"devices": ["../etc/passwd"]}), "spec.osd.devices[0]",
        MATCH, py_text="is not a block device path"),
    Bad("work-dir-shell", {"target": {"local": {"workDir": "/tmp/$(id)"}}},
        "spec.target.local.workDir", MATCH, py_text="is not a path we accept"),
    Bad("cpuset-newline", spec(client={"cpuSet": "4-5\n"}), "spec.client.cpuSet", MATCH,
        py_text="is not a CPU list"),
    Bad("ceph-version-arabic-digits", spec(osd={"cephVersion": "\u0661\u0669.\u0662"}),
        "spec.osd.cephVersion", MATCH, py_text="String should match pattern"),
    # --- Kubernetes names and labels
    Bad("node-upper", {"target": ROOK, "client": {"node": "Node_1"}}, "spec.client.node",
        MATCH, py_text="is not a valid Kubernetes name"),
    Bad("node-selector-key", {"target": ROOK, "client": {"nodeSelector": {"a b": "x"}}},
        "spec.client.nodeSelector", rule=CK[0]),
    Bad("node-selector-value", {"target": ROOK, "client": {"nodeSelector": {"role": "a b"}}},
        "spec.client.nodeSelector.role", MATCH,
        py_text="is not a valid label value"),
    Bad("node-cpu-sets-key",
        {"target": ROOK, "client": {"node": "n1", "nodeCpuSets": {"../n1": "0"}}},
        "spec.client.nodeCpuSets", rule=CK[1]),
    Bad("rook-namespace", {"target": {"rook": {"clusterName": "c", "namespace": "a.b"}},
                           "client": {"node": "n1"}},
        "spec.target.rook.namespace", MATCH, py_text="is not a valid name"),
    Bad("secret-name", {"target": {"external": {"user": "admin", "monHost": "m",
                                                "keyringSecret": {"name": "../s"}}},
                        "client": {"node": "n1"}},
        "spec.target.external.keyringSecret.name", MATCH,
        py_text="is not a valid Kubernetes name"),
    # --- bounds
    Bad("steps-times-jobs", spec(client={"images": 1024, "processesPerImage": 64},
                                 sweep={"iodepths": list(range(1, 5))}),
        "spec", rule=BOUND[0]),
    Bad("twenty-digit-ti", spec(client={"imageSize": "9" * 20 + "Ti"}), "spec.client.imageSize",
        MATCH, py_text="is not a size"),
    Bad("latency-limit-a-year", spec(sweep={"kneeSearch": {"latencyMs": 3.2e10}}),
        "spec.sweep.kneeSearch.latencyMs", "less than or equal to", py_text=RANGE_LE),
    Bad("true-as-iodepth", spec(sweep={"iodepths": [True]}), "spec.sweep.iodepths[0]",
        "must be of type integer", py_text="valid integer, not a boolean"),
    Bad("string-as-count", spec(osd={"count": "8"}), "spec.osd.count",
        "must be of type integer", py_text="valid integer, not a string"),
]  # fmt: skip


@pytest.mark.parametrize("bad", EDGE, ids=[b.id for b in EDGE])
def test_an_edge_violation_is_refused_by_api_and_python(
    crs: kubernetes.client.CustomObjectsApi, namespace: str, bad: Bad
) -> None:
    with pytest.raises(ApiException) as info:
        create(crs, namespace, manifest("edge", bad.spec))
    status = status_of(info.value)
    assert info.value.status == 422, status
    causes = status["details"]["causes"]
    assert any(
        c.get("field") == bad.field and bad.api_words in c.get("message", "") for c in causes
    ), f"expected {bad.field}: ...{bad.api_words}... in {json.dumps(causes, indent=1)}"
    broken = [c for c in causes if "evaluating rule" in c.get("message", "")]
    assert not broken, f"a CEL rule errored instead of deciding: {broken}"
    with pytest.raises(InvalidSpec) as py:
        validate_spec(bad.spec)
    problems = dict(py.value.problems)
    field = bad.py_field or bad.field
    assert field in problems, py.value
    assert bad.py_words in problems[field], py.value
    if bad.rule is not None:
        assert bad.rule.message == problems[field]
        assert any(bad.rule.message in c["message"] for c in causes)


def test_every_edge_rule_has_a_bad_spec() -> None:
    covered = {b.rule for b in EDGE if b.rule is not None} | {NAME_RULE}
    missing = [r.message for r in models.EDGE_RULES if r not in covered]
    assert not missing, missing


GOOD = {
    "every-option-format": custom(
        rwmixread="70", rwmixwrite="30", norandommap="1", randrepeat="0",
        random_distribution="zipf:1.2", zero_buffers="0", refill_buffers="1",
        buffer_compress_percentage="50", buffer_compress_chunk="4k", dedupe_percentage="0",
        bssplit="4k/10:64k/50:32k/40", offset="10%", size="1g", io_size="512m",
        thinktime="100", thinktime_blocks="8", busy_poll="0", rbd_background_processing="1",
        rate="100m,50m", rate_iops="5k",
    ),
    "ceph-config-as-ceph-writes-it": spec(
        osd={"cephConfig": {"osd_op_num_shards": "8", "debug_osd": "20/20",
                            "bluestore_rocksdb_options": "compression=kNoCompression,a=1",
                            "osd_memory_target": "4 G"}}
    ),
    "mon-host-forms": {
        "target": {"external": {"monHost": "[v2:10.0.0.1:3300,v1:10.0.0.1:6789],"
                                           "[v2:[2001:db8::1]:3300] mon3.example.com",
                                "keyringSecret": {"name": "ceph.keyring", "key": "client.x"},
                                "user": "rbd.bench"}},
        "client": {"nodes": ["worker-1.example.com"], "pool": "bench"},
    },
    "labels-and-nodes": {
        "target": {"rook": {"clusterName": "rook-ceph", "namespace": "rook-ceph",
                            "osdNodes": ["ceph-node-1"]}},
        "client": {"nodeSelector": {"node-role.kubernetes.io/fio": "", "rack": "R_1.a"},
                   "nodeCpuSets": {"worker-1.example.com": "0-3"}},
    },
    "paths-and-devices": {
        "target": {"local": {"workDir": "/var/tmp/cb-1", "cephRoot": "/srv/ceph-root"}},
        "osd": {"objectStore": "seastore", "devices": ["/dev/disk/by-id/nvme-S4EW_1:0"]},
    },
    "large-sweep": spec(  # 4 x 1 x 7 x 1024 x 32 = 917,504 job runs: under the bound
        client={"images": 1024, "processesPerImage": 32},
        sweep={"iodepths": list(range(1, 8))},
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", GOOD)
def test_good_edge_specs_are_accepted_by_both(
    crs: kubernetes.client.CustomObjectsApi, namespace: str, name: str
) -> None:
    stored = create(crs, namespace, manifest(f"good-{name}", GOOD[name]))["spec"]
    assert stored == python_view(GOOD[name])
