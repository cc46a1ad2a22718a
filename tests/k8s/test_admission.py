"""The real kube-apiserver accepts the generated CRD, fills in the defaults the Python models
use, and rejects bad BenchmarkRuns with HTTP 422 naming the field -- and for every bad spec
the Python side (`validate_spec`, used by the CLI and the operator) rejects it too, with the
same words where the rule is a shared `Rule`."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import kubernetes.client
import pytest
import yaml
from harness import ControlPlane, NotReadyError
from kubernetes.client.rest import ApiException

from crimsonbench.errors import InvalidSpec
from crimsonbench.spec import models
from crimsonbench.spec.crd import GROUP, PLURAL, VERSION, frozen_spec_rule
from crimsonbench.spec.models import DEFAULT_IODEPTHS, FIO_OPTION_ALLOWLIST, PRESETS, validate_spec
from crimsonbench.spec.rules import Rule

pytestmark = pytest.mark.k8s

CRD_NAME = f"{PLURAL}.{GROUP}"
ROOK_CRDS = ("cephclusters.ceph.rook.io", "cephblockpools.ceph.rook.io", "cephclients.ceph.rook.io")
EXAMPLES = sorted((Path(models.__file__).parents[1] / "examples").glob("*.yaml"))
# the kind e2e's files, applied as they are by tests/kind (crimson tier, where it runs)
KIND_EXAMPLES = sorted((Path(__file__).parents[2] / "e2e" / "kind").glob("benchmarkrun-*.yaml"))
ALL_RULES = (
    *models.TARGET_RULES,
    *models.EXTERNAL_RULES,
    *models.LOCAL_RULES,
    *models.OSD_RULES,
    *models.CLIENT_RULES,
    *models.SWEEP_RULES,
    *models.WORKLOAD_RULES,
    *models.RUN_RULES,
    *models.EDGE_RULES,  # names, map keys, option formats, bounds: test_admission_edge.py
)


def spec(**parts: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"target": {"local": {}}}
    base.update(parts)
    return base


def manifest(name: str, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "BenchmarkRun",
        "metadata": {"name": name},
        "spec": body,
    }


@pytest.fixture(scope="module")
def crs(admin: kubernetes.client.ApiClient) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(admin)


def create(
    crs: kubernetes.client.CustomObjectsApi, namespace: str, doc: dict[str, Any]
) -> dict[str, Any]:
    # Strict: an unknown field is an error, not a warning and a silently pruned field.
    out = crs.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, doc, field_validation="Strict"
    )
    return as_dict(out)


def as_dict(obj: object) -> dict[str, Any]:
    """CustomObjectsApi returns plain JSON objects typed as `object`."""
    assert isinstance(obj, dict), obj
    return cast(dict[str, Any], obj)


def status_of(exc: ApiException) -> dict[str, Any]:
    """The Status object of a failed request."""
    return cast(dict[str, Any], json.loads(exc.body or "{}"))


def conditions(crd: kubernetes.client.V1CustomResourceDefinition) -> dict[str, Any]:
    assert crd.status is not None
    return {c.type: c for c in crd.status.conditions or []}


def compact(node: Any) -> Any:
    """Drop empty lists/maps: the API server omits them where Python has [] or {}."""
    if isinstance(node, dict):
        kept = {k: compact(v) for k, v in node.items()}
        return {k: v for k, v in kept.items() if v not in ({}, [])}
    if isinstance(node, list):
        return [compact(v) for v in node]
    return node


def python_view(data: dict[str, Any]) -> Any:
    """The spec as the Python models complete it: what the API server should store too,
    but client.pool, which the CRD leaves unset (no default pool for an external cluster;
    Python's `rbd` is for local runs only)."""
    out = validate_spec(data).model_dump(by_alias=True, exclude_none=True, mode="json")
    if "pool" not in (data.get("client") or {}):
        del out["client"]["pool"]
    return compact(out)


# ------------------------------------------------------------------ (a) the CRD


def test_crd_is_accepted_structural_and_established(
    control_plane: ControlPlane, admin: kubernetes.client.ApiClient
) -> None:
    crd = kubernetes.client.ApiextensionsV1Api(admin).read_custom_resource_definition(CRD_NAME)
    conds = {k: (c.status, c.message) for k, c in conditions(crd).items()}
    assert conds["Established"][0] == "True", conds
    assert conds["NamesAccepted"][0] == "True", conds
    assert "NonStructuralSchema" not in conds, conds
    assert not [w for w in control_plane.apply_warnings if CRD_NAME in w or "BenchmarkRun" in w]
    # every CEL rule survived, verbatim, into the stored schema
    stored = admin.sanitize_for_serialization(crd)
    rules = {
        (r["rule"], r["message"])
        for node in _walk(stored["spec"]["versions"][0]["schema"])
        for r in node.get("x-kubernetes-validations", [])
    }
    frozen = frozen_spec_rule()
    assert rules == {(r.cel, r.message) for r in ALL_RULES} | {(frozen["rule"], frozen["message"])}


def test_rook_crds_are_established(admin: kubernetes.client.ApiClient) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(admin)
    for name in ROOK_CRDS:
        crd = ext.read_custom_resource_definition(name)
        conds = {k: c.status for k, c in conditions(crd).items()}
        assert conds.get("Established") == "True", (name, conds)


def test_rook_objects_validate_against_rooks_schema(
    admin: kubernetes.client.ApiClient, namespace: str
) -> None:
    crs = kubernetes.client.CustomObjectsApi(admin)
    cluster = {
        "apiVersion": "ceph.rook.io/v1",
        "kind": "CephCluster",
        "metadata": {"name": "rook-ceph"},
        "spec": {
            "cephVersion": {"image": "quay.io/ceph/ceph:v19"},
            "dataDirHostPath": "/var/lib/rook",
            "mon": {"count": 1},
            "cephConfig": {"global": {"osd_pool_default_size": "1"}},
            "storage": {"useAllNodes": True, "useAllDevices": False},
        },
    }
    out = as_dict(
        crs.create_namespaced_custom_object(
            "ceph.rook.io", "v1", namespace, "cephclusters", cluster
        )
    )
    assert out["spec"]["cephConfig"]["global"]["osd_pool_default_size"] == "1"
    pool = {
        "apiVersion": "ceph.rook.io/v1",
        "kind": "CephBlockPool",
        "metadata": {"name": "rbd"},
        "spec": {"replicated": {"size": 1, "requireSafeReplicaSize": False}},
    }
    crs.create_namespaced_custom_object("ceph.rook.io", "v1", namespace, "cephblockpools", pool)
    bad = {**pool, "metadata": {"name": "bad"}, "spec": {"failureDomain": 7}}
    with pytest.raises(ApiException) as info:
        crs.create_namespaced_custom_object("ceph.rook.io", "v1", namespace, "cephblockpools", bad)
    assert info.value.status == 422


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


# ------------------------------------------------------------------ (b) good specs


def test_minimal_spec_gets_the_python_defaults(
    crs: kubernetes.client.CustomObjectsApi, namespace: str
) -> None:
    stored = create(crs, namespace, manifest("minimal", spec()))["spec"]
    assert stored["sweep"]["iodepths"] == list(DEFAULT_IODEPTHS)
    assert stored["osd"]["flavor"] == "crimson"
    assert stored["osd"]["objectStore"] == "bluestore"
    assert stored["workloads"] == [{"preset": p} for p in PRESETS]
    assert stored["sweep"]["earlyExit"] == {"enabled": False, "clatCvLimit": 0.5}
    assert stored["target"]["local"]["bluestoreSize"] == "8Gi"
    assert stored["client"]["imageSize"] == "2Gi"
    # ...and every default the API server fills in is the one the Python models use
    assert stored == python_view(spec())
    # a read after the write shows the same (defaults are also applied when reading)
    again = as_dict(crs.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "minimal"))
    assert again["spec"] == stored


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_examples_are_accepted_with_defaults(
    crs: kubernetes.client.CustomObjectsApi, namespace: str, path: Path
) -> None:
    doc = yaml.safe_load(path.read_text())
    stored = create(crs, namespace, doc)["spec"]
    assert stored == python_view(doc["spec"])
    assert stored["sweep"]["repeats"] == 1
    # no pool in the CRD's defaults (an external cluster's must be named); a local run's is rbd
    assert "pool" not in stored["client"] and validate_spec(stored).client.pool == "rbd"


@pytest.mark.parametrize("path", KIND_EXAMPLES, ids=[p.stem for p in KIND_EXAMPLES])
def test_kind_examples_are_accepted(
    crs: kubernetes.client.CustomObjectsApi, namespace: str, path: Path
) -> None:
    """The API server takes each as it is (schema and CEL), and so does the operator."""
    doc = yaml.safe_load(path.read_text())
    doc["metadata"]["namespace"] = namespace
    stored = create(crs, namespace, doc)["spec"]
    assert stored == python_view(doc["spec"])  # the operator's models take it too


GOOD = {
    "external-secret": {
        "target": {
            "external": {"user": "admin", "monHost": "10.0.0.1", "keyringSecret": {"name": "ceph"}}
        },
        "client": {"node": "n1", "pool": "bench"},
    },
    "rook-many-clients": {
        "target": {"rook": {"clusterName": "c", "osdNodes": ["s1", "s2"], "osdIds": [0, 3]}},
        "client": {"nodeSelector": {"role": "fio"}, "count": 2, "nodeCpuSets": {"w1": "0-3"}},
    },
    "local-two-clients": spec(client={"count": 2, "cpuSet": "2-3"}, osd={"cpuSet": "0-1"}),
    "knee-search-and-steady-state": spec(
        sweep={
            "kneeSearch": {"latencyMs": 1.5, "metric": "p99.9", "minGainPct": 3},
            "steadyState": {"criterion": "iops", "limit": 2, "durationSeconds": 20},
            "runtimeSeconds": 60,
        }
    ),
    "classic-bluestore-cpus": spec(
        osd={"flavor": "classic", "objectStore": "bluestore", "count": 3, "cpusPerOsd": 2}
    ),
    "crimson-bluestore-alien": spec(
        osd={"reactors": 4, "alienThreads": 16, "alienCpuSet": "8-11", "cpuSet": "0-7"},
        client={"cpuSet": "12-15"},
    ),
    "custom-workload": spec(
        workloads=[
            {"preset": "randread4k"},
            {"name": "mix70", "rw": "randrw", "bs": "16k", "options": {"rwmixread": "70"}},
        ],
        sweep={"iodepths": [64, 1], "latencyTarget": {"percentile": 99.9, "latencyMs": 2}},
    ),
    "every-option": spec(
        workloads=[
            {
                "name": "all",
                "rw": "read",
                "bs": "1m",
                "options": dict.fromkeys(FIO_OPTION_ALLOWLIST, "1"),
            }
        ]
    ),
    "cpuset-with-spaces": spec(osd={"cpuSet": " 0 - 3 , 8 "}, client={"cpuSet": "4"}),
}


@pytest.mark.parametrize("name", GOOD)
def test_good_specs_are_accepted(
    crs: kubernetes.client.CustomObjectsApi, namespace: str, name: str
) -> None:
    stored = create(crs, namespace, manifest(name, GOOD[name]))["spec"]
    assert stored == python_view(GOOD[name])


# ------------------------------------------------------------------ (c) bad specs


@dataclass(frozen=True)
class Bad:
    id: str
    spec: dict[str, Any]
    field: str  # the field the API server names
    api_text: str = ""  # words in the server's message (default: the rule's message)
    rule: Rule | None = None  # a shared Rule: both sides must say rule.message
    py_field: str | None = None  # the field validate_spec names (default: field)
    py_text: str | None = None  # words in validate_spec's message (default: api_text)

    @property
    def api_words(self) -> str:
        return self.api_text or (self.rule.message if self.rule else "")

    @property
    def py_words(self) -> str:
        return self.py_text if self.py_text is not None else self.api_words


T, E, OSD, C, S, W, R = (
    models.TARGET_RULES,
    models.EXTERNAL_RULES,
    models.OSD_RULES,
    models.CLIENT_RULES,
    models.SWEEP_RULES,
    models.WORKLOAD_RULES,
    models.RUN_RULES,
)
LOCAL_NO_NODES, NEEDS_NODES, EXTERNAL_POOL, UNIQUE_WORKLOADS = R
ROOK = {"rook": {"clusterName": "c"}}
RANGE_GE = "greater than or equal to"
RANGE_LE = "less than or equal to"

BAD = [
    # --- TARGET_RULES: exactly one target
    Bad("target-none", {"target": {}}, "spec.target", rule=T[0]),
    Bad(
        "target-two",
        {"target": {"local": {}, "rook": {"clusterName": "c"}}},
        "spec.target",
        rule=T[0],
    ),
    Bad(
        "target-three",
        {
            "target": {
                "local": {},
                "rook": {"clusterName": "c"},
                "external": {"user": "admin", "monHost": "m", "keyringFile": "/k"},
            }
        },
        "spec.target",
        rule=T[0],
    ),
    # --- EXTERNAL_RULES: a keyring
    Bad(
        "external-no-keyring",
        {"target": {"external": {"user": "admin", "monHost": "v2:10.0.0.1:3300"}}},
        "spec.target.external.keyringSecret",
        rule=E[0],
    ),
    # --- LOCAL_RULES: programs from one place
    Bad(
        "local-root-and-bin-dir",
        {"target": {"local": {"cephRoot": "/r", "cephBinDir": "/b"}}},
        "spec.target.local.cephBinDir",
        rule=models.LOCAL_RULES[0],
    ),
    # --- OSD_RULES
    Bad(
        "classic-cyanstore",
        spec(osd={"flavor": "classic", "objectStore": "cyanstore"}),
        "spec.osd.objectStore",
        rule=OSD[0],
    ),
    Bad(
        "classic-seastore",
        spec(osd={"flavor": "classic", "objectStore": "seastore"}),
        "spec.osd.objectStore",
        rule=OSD[0],
    ),
    Bad(
        "crimson-memstore",
        spec(osd={"flavor": "crimson", "objectStore": "memstore"}),
        "spec.osd.objectStore",
        rule=OSD[1],
    ),
    Bad(
        "default-flavor-memstore",  # flavor defaults to crimson on both sides
        spec(osd={"objectStore": "memstore"}),
        "spec.osd.objectStore",
        rule=OSD[1],
    ),
    Bad(
        "classic-reactors",
        spec(osd={"flavor": "classic", "objectStore": "memstore", "reactors": 2}),
        "spec.osd.reactors",
        rule=OSD[2],
    ),
    Bad("crimson-cpus-per-osd", spec(osd={"cpusPerOsd": 2}), "spec.osd.cpusPerOsd", rule=OSD[3]),
    Bad(
        "seastore-alien-threads",
        spec(osd={"objectStore": "seastore", "alienThreads": 8}),
        "spec.osd.alienThreads",
        rule=OSD[4],
    ),
    Bad(
        "classic-alien-cpuset",
        spec(osd={"flavor": "classic", "alienCpuSet": "4-7"}),
        "spec.osd.alienThreads",
        rule=OSD[4],
    ),
    # --- WORKLOAD_RULES
    Bad(
        "preset-and-rw",
        spec(workloads=[{"preset": "randread4k", "rw": "read"}]),
        "spec.workloads[0].preset",
        rule=W[0],
    ),
    Bad("empty-workload", spec(workloads=[{}]), "spec.workloads[0].preset", rule=W[0]),
    Bad(
        "custom-without-name",
        spec(workloads=[{"rw": "randrw", "bs": "16k"}]),
        "spec.workloads[0].name",
        rule=W[1],
    ),
    Bad(
        "custom-without-bs",
        spec(workloads=[{"preset": "seqread64k"}, {"name": "x", "rw": "read"}]),
        "spec.workloads[1].name",
        rule=W[1],
    ),
    Bad(
        "option-not-allowed",
        spec(workloads=[{"preset": "randread4k", "options": {"ioengine": "libaio"}}]),
        "spec.workloads[0].options",
        rule=W[2],
    ),
    Bad(
        "option-owned-by-planner",
        spec(
            workloads=[
                {
                    "name": "x",
                    "rw": "read",
                    "bs": "4k",
                    "options": {"rwmixread": "50", "iodepth": "8"},
                }
            ]
        ),
        "spec.workloads[0].options",
        rule=W[2],
    ),
    # --- CLIENT_RULES and RUN_RULES: where fio runs
    Bad(
        "client-node-and-nodes",
        {"target": ROOK, "client": {"node": "a", "nodes": ["b"]}},
        "spec.client.nodes",
        rule=C[0],
    ),
    Bad(
        "client-nodes-and-selector",
        {"target": ROOK, "client": {"nodes": ["a"], "nodeSelector": {"role": "fio"}}},
        "spec.client.nodes",
        rule=C[0],
    ),
    Bad(
        "count-with-named-nodes",
        {"target": ROOK, "client": {"nodes": ["a", "b"], "count": 1}},
        "spec.client.count",
        rule=C[1],
    ),
    Bad(
        "local-with-client-nodes", spec(client={"nodes": ["a"]}), "spec.client", rule=LOCAL_NO_NODES
    ),
    Bad("rook-without-client-nodes", {"target": ROOK}, "spec.client.nodes", rule=NEEDS_NODES),
    Bad(
        "external-with-empty-node-list",
        {
            "target": {"external": {"user": "admin", "monHost": "m", "keyringFile": "/k"}},
            "client": {"nodes": [], "pool": "bench"},
        },
        "spec.client.nodes",
        rule=NEEDS_NODES,
    ),
    # issue 36 #3: no default pool on an existing cluster (its `rbd` is someone's data)
    Bad(
        "external-without-a-pool",
        {
            "target": {"external": {"user": "bench", "monHost": "m", "keyringFile": "/k"}},
            "client": {"node": "n"},
        },
        "spec.client.pool",
        rule=EXTERNAL_POOL,
    ),
    # --- SWEEP_RULES
    Bad(
        "knee-search-with-early-exit",
        spec(sweep={"kneeSearch": {"latencyMs": 2}, "earlyExit": {"enabled": True}}),
        "spec.sweep.kneeSearch",
        rule=S[0],
    ),
    Bad(
        "steady-state-longer-than-runtime",
        spec(sweep={"runtimeSeconds": 30, "steadyState": {"durationSeconds": 30}}),
        "spec.sweep.steadyState",
        rule=S[1],
    ),
    # --- RUN_RULES: unique workload names
    Bad(
        "duplicate-presets",
        spec(workloads=[{"preset": "randread4k"}, {"preset": "randread4k"}]),
        "spec.workloads",
        rule=UNIQUE_WORKLOADS,
    ),
    Bad(
        "duplicate-custom-names",
        spec(
            workloads=[
                {"name": "a", "rw": "read", "bs": "4k"},
                {"name": "a", "rw": "write", "bs": "4k"},
            ]
        ),
        "spec.workloads",
        rule=UNIQUE_WORKLOADS,
    ),
    Bad(
        "custom-named-like-a-preset",
        spec(
            workloads=[{"preset": "randread4k"}, {"name": "randread4k", "rw": "read", "bs": "8k"}]
        ),
        "spec.workloads",
        rule=UNIQUE_WORKLOADS,
    ),
    # --- enums
    Bad(
        "unknown-flavor",
        spec(osd={"flavor": "seastar"}),
        "spec.osd.flavor",
        'Unsupported value: "seastar"',
        py_text="Input should be 'crimson' or 'classic'",
    ),
    Bad(
        "unknown-object-store",
        spec(osd={"objectStore": "filestore"}),
        "spec.osd.objectStore",
        'Unsupported value: "filestore"',
        py_text="'cyanstore', 'seastore', 'bluestore' or 'memstore'",
    ),
    Bad(
        "unknown-cpu-policy",
        spec(osd={"cpuPolicy": "numa"}),
        "spec.osd.cpuPolicy",
        'supported values: "default", "osd", "socket"',
        py_text="'default', 'osd' or 'socket'",
    ),
    Bad(
        "unknown-hyper-threads",
        spec(osd={"hyperThreads": "smt"}),
        "spec.osd.hyperThreads",
        'Unsupported value: "smt"',
        py_text="'physical' or 'dual'",
    ),
    Bad(
        "unknown-option-naming",
        spec(osd={"optionNaming": "new"}),
        "spec.osd.optionNaming",
        'Unsupported value: "new"',
        py_text="'auto', 'legacy' or 'current'",
    ),
    Bad(
        "unknown-preset",
        spec(workloads=[{"preset": "randread5k"}]),
        "spec.workloads[0].preset",
        'Unsupported value: "randread5k"',
        py_text="'randread4k', 'randwrite4k', 'seqread64k' or 'seqwrite64k'",
    ),
    Bad(
        "unknown-rw",
        spec(workloads=[{"name": "t", "rw": "trim", "bs": "4k"}]),
        "spec.workloads[0].rw",
        'Unsupported value: "trim"',
        py_text="Input should be 'read'",
    ),
    Bad(
        "unknown-bluestore-backing",
        {"target": {"local": {"bluestoreBacking": "nvme"}}},
        "spec.target.local.bluestoreBacking",
        'supported values: "file", "loop"',
        py_text="Input should be 'file' or 'loop'",
    ),
    Bad(
        "latency-percentile-95",
        spec(sweep={"latencyTarget": {"percentile": 95, "latencyMs": 2}}),
        "spec.sweep.latencyTarget.percentile",
        "Unsupported value: 95",
        py_text="95 is not recorded; use one of 50, 90, 99, 99.9 or 99.99",
    ),
    # --- patterns
    Bad(
        "cpuset-letters",
        spec(osd={"cpuSet": "0-a"}),
        "spec.osd.cpuSet",
        "should match",
        py_text="'0-a' is not a CPU list",
    ),
    Bad(
        "client-cpuset-double-comma",
        spec(client={"cpuSet": "1,,2"}),
        "spec.client.cpuSet",
        "should match",
        py_text="is not a CPU list",
    ),
    Bad(
        "alien-cpuset-word",
        spec(osd={"alienCpuSet": "all"}),
        "spec.osd.alienCpuSet",
        "should match",
        py_text="is not a CPU list",
    ),
    Bad(
        "image-size-2GB",
        spec(client={"imageSize": "2GB"}),
        "spec.client.imageSize",
        "should match",
        py_text="'2GB' is not a size; write a whole number with Mi, Gi or Ti",
    ),
    Bad(
        "bluestore-size-zero",
        {"target": {"local": {"bluestoreSize": "0Gi"}}},
        "spec.target.local.bluestoreSize",
        "should match",
        py_text="is not a size",
    ),
    Bad(
        "bs-4q",
        spec(workloads=[{"name": "x", "rw": "read", "bs": "4q"}]),
        "spec.workloads[0].bs",
        "should match",
        py_text="'4q' is not a block size",
    ),
    Bad(
        "prefill-bs-64kb",
        spec(client={"prefillBlockSize": "64kb"}),
        "spec.client.prefillBlockSize",
        "should match",
        py_text="is not a block size",
    ),
    Bad(
        "pool-with-space",
        spec(client={"pool": "my pool"}),
        "spec.client.pool",
        "should match",
        py_text="String should match pattern",
    ),
    Bad(
        "workload-name-upper",
        spec(workloads=[{"name": "Mixed_70", "rw": "randrw", "bs": "4k"}]),
        "spec.workloads[0].name",
        "should match",
        py_text="String should match pattern",
    ),
    Bad(
        "ceph-version-codename",
        spec(osd={"cephVersion": "reef"}),
        "spec.osd.cephVersion",
        "should match",
        py_text="String should match pattern",
    ),
    # --- minimum / maximum
    Bad("osd-count-0", spec(osd={"count": 0}), "spec.osd.count", f"{RANGE_GE} 1"),
    Bad("osd-count-129", spec(osd={"count": 129}), "spec.osd.count", f"{RANGE_LE} 128"),
    Bad("reactors-0", spec(osd={"reactors": 0}), "spec.osd.reactors", f"{RANGE_GE} 1"),
    Bad("pg-num-70000", spec(client={"pgNum": 70000}), "spec.client.pgNum", f"{RANGE_LE} 65536"),
    Bad("images-0", spec(client={"images": 0}), "spec.client.images", f"{RANGE_GE} 1"),
    Bad("iodepth-0", spec(sweep={"iodepths": [0]}), "spec.sweep.iodepths[0]", f"{RANGE_GE} 1"),
    Bad(
        "iodepth-5000",
        spec(sweep={"iodepths": [1, 5000]}),
        "spec.sweep.iodepths[1]",
        f"{RANGE_LE} 4096",
    ),
    Bad("repeats-21", spec(sweep={"repeats": 21}), "spec.sweep.repeats", f"{RANGE_LE} 20"),
    Bad(
        "ramp-negative", spec(sweep={"rampSeconds": -1}), "spec.sweep.rampSeconds", f"{RANGE_GE} 0"
    ),
    Bad(
        "sample-interval-tiny",
        spec(sweep={"sampleIntervalSeconds": 0.05}),
        "spec.sweep.sampleIntervalSeconds",
        f"{RANGE_GE} 0.1",
    ),
    Bad(
        "clat-cv-limit-0",  # exclusiveMinimum
        spec(sweep={"earlyExit": {"clatCvLimit": 0}}),
        "spec.sweep.earlyExit.clatCvLimit",
        "should be greater than 0",
        py_text="greater than 0",
    ),
    Bad(
        "latency-ms-0",
        spec(sweep={"latencyTarget": {"latencyMs": 0}}),
        "spec.sweep.latencyTarget.latencyMs",
        "should be greater than 0",
        py_text="greater than 0",
    ),
    # --- lists: set semantics, sizes
    Bad(
        "iodepths-duplicate",
        spec(sweep={"iodepths": [1, 4, 4]}),
        "spec.sweep.iodepths[2]",
        "Duplicate value: 4",
        py_field="spec.sweep.iodepths",
        py_text="iodepths repeats [4]; list each iodepth once",
    ),
    Bad(
        "iodepths-empty",
        spec(sweep={"iodepths": []}),
        "spec.sweep.iodepths",
        "should have at least 1 items",
        py_text="at least 1 item",
    ),
    Bad(
        "iodepths-65",
        spec(sweep={"iodepths": list(range(1, 66))}),
        "spec.sweep.iodepths",
        "must have at most 64 items",
        py_text="at most 64 items",
    ),
    Bad(
        "workloads-empty",
        spec(workloads=[]),
        "spec.workloads",
        "should have at least 1 items",
        py_text="at least 1 item",
    ),
    Bad(
        "option-value-too-long",
        spec(workloads=[{"preset": "randread4k", "options": {"rwmixread": "7" * 257}}]),
        "spec.workloads[0].options.rwmixread",
        "may not be more than 256 bytes",
        py_text="at most 256 characters",
    ),
    # --- required fields, types
    Bad(
        "no-target",
        {"osd": {"count": 1}},
        "spec.target",
        "Required value",
        py_text="Field required",
    ),
    Bad(
        "rook-without-cluster",
        {"target": {"rook": {}}},
        "spec.target.rook.clusterName",
        "Required value",
        py_text="Field required",
    ),
    Bad(
        "latency-target-without-ms",
        spec(sweep={"latencyTarget": {"percentile": 99}}),
        "spec.sweep.latencyTarget.latencyMs",
        "Required value",
        py_text="Field required",
    ),
    Bad(
        "empty-secret-name",
        {"target": {"external": {"user": "admin", "monHost": "m", "keyringSecret": {"name": ""}}}},
        "spec.target.external.keyringSecret.name",
        "should be at least 1 chars long",
        py_text="at least 1 character",
    ),
    Bad(
        "count-is-a-word",
        spec(osd={"count": "eight"}),
        "spec.osd.count",
        "must be of type integer",
        py_text="valid integer",
    ),
]


@pytest.mark.parametrize("bad", BAD, ids=[b.id for b in BAD])
def test_bad_spec_is_rejected_by_api_and_python(
    crs: kubernetes.client.CustomObjectsApi, namespace: str, bad: Bad
) -> None:
    with pytest.raises(ApiException) as info:
        create(crs, namespace, manifest("bad", bad.spec))
    status = status_of(info.value)
    assert info.value.status == 422, status
    assert status["reason"] == "Invalid", status
    causes = status["details"]["causes"]
    assert any(
        c.get("field") == bad.field and bad.api_words in c.get("message", "") for c in causes
    ), f"expected {bad.field}: ...{bad.api_words}... in {json.dumps(causes, indent=1)}"
    assert bad.field in status["message"] and bad.api_words in status["message"]

    with pytest.raises(InvalidSpec) as py:
        validate_spec(bad.spec)
    assert py.value.field == (bad.py_field or bad.field), py.value
    assert bad.py_words in py.value.message, py.value
    if bad.rule is not None:  # a shared Rule: the CLI and kubectl say the same thing
        assert bad.rule.message in py.value.message
        assert any(bad.rule.message in c["message"] for c in causes)
    # No rule may fail to *evaluate* (e.g. "no such key: name" when a rule reads a field the
    # object lacks): the user would see a confusing error beside the real one.
    broken = [c for c in causes if "evaluating rule" in c.get("message", "")]
    assert not broken, f"a CEL rule errored instead of deciding: {broken}"


def test_every_cel_rule_has_a_bad_spec() -> None:
    covered = {b.rule for b in BAD if b.rule is not None}
    missing = [r.message for r in ALL_RULES if r not in covered and r not in models.EDGE_RULES]
    assert not missing, missing


def test_unknown_field_is_rejected_by_api_and_python(
    crs: kubernetes.client.CustomObjectsApi, namespace: str
) -> None:
    bad = spec(osd={"objectstore": "memstore"})  # lower-case s: not a field
    with pytest.raises(ApiException) as info:
        create(crs, namespace, manifest("typo", bad))
    # Strict field validation fails while decoding, before validation: 400, not 422.
    assert info.value.status == 400
    assert 'unknown field "spec.osd.objectstore"' in status_of(info.value)["message"]
    with pytest.raises(InvalidSpec) as py:
        validate_spec(bad)
    assert py.value.field == "spec.osd.objectstore"
    assert "camelCase" in py.value.message


# ------------------------------------------------------------------ Python-only checks

# CEL cannot parse CPU lists, so these pass admission; the planner and the operator reject
# them at reconcile time (validate_spec runs first thing there), with these messages.
PYTHON_ONLY = {
    "cpusets-overlap": (
        spec(osd={"cpuSet": "0-3"}, client={"cpuSet": "2-5"}),
        "spec.client.cpuSet",
        "share CPUs 2-3",
    ),
    "cpusets-share-one-cpu": (
        spec(osd={"cpuSet": "0-3"}, client={"cpuSet": "3"}),
        "spec.client.cpuSet",
        "share CPUs 3",
    ),
    "osd-cpuset-backwards": (spec(osd={"cpuSet": "7-2"}), "spec.osd.cpuSet", "runs backwards"),
    "alien-cpuset-backwards": (
        spec(osd={"alienCpuSet": "9-8"}),
        "spec.osd.alienCpuSet",
        "write 8-9",
    ),
    "client-cpu-above-kernel-limit": (
        spec(client={"cpuSet": "0-99999"}),
        "spec.client.cpuSet",
        "kernel limit",
    ),
}


@pytest.mark.parametrize("name", PYTHON_ONLY)
def test_python_only_checks_pass_admission(
    crs: kubernetes.client.CustomObjectsApi, namespace: str, name: str
) -> None:
    data, field, words = PYTHON_ONLY[name]
    create(crs, namespace, manifest(f"py-only-{name}", data))  # admitted
    with pytest.raises(InvalidSpec) as py:
        validate_spec(data)
    assert py.value.field == field
    assert words in py.value.message


def test_the_spec_is_frozen_by_the_api_server_once_the_run_is_planned(
    crs: kubernetes.client.CustomObjectsApi, namespace: str
) -> None:
    """issue 36 #1/#2: once the operator recorded the planned spec, the API server refuses
    an edit that changes what a step measures (the target, the OSDs, the clients, runtime,
    a workload's definition); more iodepths, repeats or workloads are still taken. Before
    planning, any edit is taken. The operator refuses the same edits itself
    (plan.meaning.effective_spec), for a server without this rule."""
    body = spec(client={"images": 2}, sweep={"iodepths": [1], "runtimeSeconds": 5},
                workloads=[{"preset": "randread4k"}])  # fmt: skip
    name = "frozen"
    create(crs, namespace, manifest(name, body))

    def edit(**change: Any) -> None:
        crs.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name,
                                           {"spec": change})  # fmt: skip

    edit(client={"images": 3})  # not planned yet: taken
    planned = json.dumps(validate_spec({**body, "client": {"images": 3}}).model_dump(
        mode="json", by_alias=True), sort_keys=True)  # fmt: skip
    crs.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, name,
        {"status": {"stage": "patch", "record": {"plannedSpec": planned}}})  # fmt: skip
    for change in ({"client": {"images": 4}}, {"sweep": {"runtimeSeconds": 30}},
                   {"target": {"local": {"cephBinDir": "/opt/ceph/bin"}}},
                   {"workloads": [{"preset": "randwrite4k"}]}, {"keepImages": True}):  # fmt: skip
        with pytest.raises(ApiException) as err:
            edit(**change)
        assert err.value.status == 422, change
        assert "the spec is frozen once the run is planned" in status_of(err.value)["message"]
    edit(sweep={"iodepths": [1, 4, 16], "repeats": 2})  # the sweep's axes: taken
    edit(workloads=[{"preset": "randread4k"}, {"preset": "seqread64k"}])  # one more: taken
    got = as_dict(crs.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name))
    assert got["spec"]["sweep"]["iodepths"] == [1, 4, 16]
    assert got["spec"]["client"]["images"] == 3 and got["spec"]["sweep"]["runtimeSeconds"] == 5


# ------------------------------------------------------------------ the harness itself


def test_service_account_is_bound_by_rbac(
    control_plane: ControlPlane, admin: kubernetes.client.ApiClient
) -> None:
    ns = "sa-check"
    with control_plane.client_for_service_account(ns, "reader") as api:
        sa_crs = kubernetes.client.CustomObjectsApi(api)
        with pytest.raises(ApiException) as info:
            sa_crs.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)
        assert info.value.status == 403
        assert "system:serviceaccount:sa-check:reader" in status_of(info.value)["message"]
        control_plane.apply_yaml(
            [
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "Role",
                    "metadata": {"name": "read-runs", "namespace": ns},
                    "rules": [
                        {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get", "list"]}
                    ],
                },
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": {"name": "read-runs", "namespace": ns},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "Role",
                        "name": "read-runs",
                    },
                    "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": ns}],
                },
            ]
        )
        # the API server's RBAC authorizer reads bindings from its informer cache: a new
        # binding takes effect a moment later (seen: a 403 right after the create)
        deadline = time.monotonic() + 30
        while True:
            try:
                listed = as_dict(sa_crs.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL))
                break
            except ApiException as exc:
                if exc.status != 403 or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert listed["items"] == []


def test_harness_names_the_component_that_failed(control_plane: ControlPlane) -> None:
    broken = ControlPlane(
        bin_dir=control_plane.bin_dir,
        controller_manager=False,
        extra_apiserver_flags=("--no-such-flag",),
    )
    with pytest.raises(NotReadyError) as info:
        broken.start()
    msg = str(info.value)
    assert msg.startswith("kube-apiserver exited with code"), msg
    assert "unknown flag: --no-such-flag" in msg  # the tail of its log
    assert not broken.dir.exists()
    assert not broken.pids()


def test_a_warning_the_api_answers_an_apply_with_is_kept(
    control_plane: ControlPlane, admin: kubernetes.client.ApiClient
) -> None:
    """The checks that no apply was warned about (above, tests/chart) would pass on a
    client that dropped the Warning header: a Pod with the seccomp annotation the API calls
    non-functional is applied (no kubelet here: it never runs), and the API's warning is
    what the harness keeps."""
    before = len(control_plane.apply_warnings)
    name = "crimsonbench-warned"
    annotation = "seccomp.security.alpha.kubernetes.io/pod"
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "default",
                        "annotations": {annotation: "runtime/default"}},
           "spec": {"serviceAccountName": name, "automountServiceAccountToken": False,
                    "containers": [{"name": "c", "image": "none.invalid/none"}]}}  # fmt: skip
    account = {"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": name, "namespace": "default"}}  # fmt: skip
    core = kubernetes.client.CoreV1Api(admin)
    try:
        (_, applied) = control_plane.apply_yaml([account, pod])
        assert applied["metadata"]["name"] == name
        (said,) = control_plane.apply_warnings[before:]
        assert said.startswith(f"Pod/{name}: ") and annotation in said, said
    finally:
        for delete in (core.delete_namespaced_pod, core.delete_namespaced_service_account):
            with contextlib.suppress(ApiException):
                delete(name, "default", grace_period_seconds=0)
