"""The checked-in CRD is exactly what the models generate, and its CEL rules agree with
the Python checks (evaluated here with cel-python; the real API server runs them in the
operator tests)."""

from __future__ import annotations

import functools
import itertools
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml

from crimsonbench.spec import models
from crimsonbench.spec.crd import build_crd, frozen_spec_rule, render_crd
from crimsonbench.spec.rules import Rule
from crimsonbench.spec.workload import OPTION_FORMATS

ROOT = Path(__file__).resolve().parents[2]


def test_checked_in_crd_matches_models() -> None:
    checked_in = (ROOT / "crds" / "benchmarkrun.yaml").read_text()
    assert checked_in == render_crd(), (
        "crds/benchmarkrun.yaml drifted from the models: run "
        "`python -m crimsonbench.spec.crd > crds/benchmarkrun.yaml`"
    )


def test_checked_in_study_crd_matches_models() -> None:
    from crimsonbench.spec.study_crd import build_study_crd, render_study_crd

    checked_in = (ROOT / "crds" / "benchmarkstudy.yaml").read_text()
    assert checked_in == render_study_crd(), (
        "crds/benchmarkstudy.yaml drifted from the models: run "
        "`python -m crimsonbench.spec.study_crd > crds/benchmarkstudy.yaml`"
    )
    schema = build_study_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for node in _walk(schema):  # structural: every node typed, or open by declaration
        for bad in ("$ref", "anyOf", "$defs", "title", "const"):
            assert bad not in node, f"{bad} is not allowed in a structural schema: {node}"
    base = schema["properties"]["spec"]["properties"]["base"]
    run = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    # the base is a whole BenchmarkRun spec, with every one of its rules
    assert base["x-kubernetes-validations"] == run["x-kubernetes-validations"]
    assert base["properties"] == run["properties"]


def _walk(node: Any):  # type: ignore[no-untyped-def]
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def test_schema_is_structural() -> None:
    schema = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for node in _walk(schema):
        for bad in ("$ref", "anyOf", "$defs", "title", "const"):
            assert bad not in node, f"{bad} is not allowed in a structural schema: {node}"
        if "properties" in node:
            assert node.get("type") == "object", node
        assert node.get("additionalProperties", {}) is not False


def test_every_rule_is_in_the_crd() -> None:
    crd_rules = {
        (r["rule"], r["message"])
        for node in _walk(build_crd())
        for r in node.get("x-kubernetes-validations", [])
    }
    declared = {
        (r.cel, r.message)
        for group in (
            models.TARGET_RULES,
            models.EXTERNAL_RULES,
            models.LOCAL_RULES,
            models.OSD_RULES,
            models.CLIENT_RULES,
            models.SWEEP_RULES,
            models.WORKLOAD_RULES,
            models.RUN_RULES,
            models.EDGE_RULES,
        )
        for r in group
    }
    frozen = frozen_spec_rule()  # at the root: it reads the status (tests/k8s/test_admission.py)
    assert declared | {(frozen["rule"], frozen["message"])} == crd_rules


@functools.cache
def _program(cel: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(cel))


def _cel(rule: Rule, obj: dict[str, Any]) -> bool:
    return bool(_program(rule.cel).evaluate({"self": celpy.json_to_cel(obj)}))


def _agree(rules: tuple[Rule, ...], model: type[Any], combos: list[dict[str, Any]]) -> int:
    checked = 0
    for fields in combos:
        obj = model.model_construct(**fields)  # no validation: we want invalid objects too
        as_json = obj.model_dump(by_alias=True, exclude_none=True, mode="json")
        for rule in rules:
            assert _cel(rule, as_json) == rule.check(obj), (rule.cel, fields)
            checked += 1
    return checked


def test_osd_rules_cel_and_python_agree() -> None:
    combos = [
        {"flavor": f, "object_store": s, "reactors": r, "cpus_per_osd": c, "alien_threads": a}
        for f, s, r, c, a in itertools.product(
            list(models.Flavor), list(models.ObjectStore), [None, 2], [None, 2], [None, 8]
        )
    ]
    assert _agree(models.OSD_RULES, models.OsdSpec, combos) == len(combos) * 5


def test_client_rules_cel_and_python_agree() -> None:
    combos = [
        {"node": n, "nodes": ns, "node_selector": sel, "count": c}
        for n, ns, sel, c in itertools.product(
            [None, "a"], [[], ["a", "b"]], [{}, {"role": "client"}], [None, 2]
        )
    ]
    assert _agree(models.CLIENT_RULES, models.ClientSpec, combos) == len(combos) * 2


@pytest.mark.parametrize("target", ["local", "rook"])
def test_where_fio_runs_rules_cel_and_python_agree(target: str) -> None:
    t = models.TargetSpec(
        local=models.LocalTarget() if target == "local" else None,
        rook=models.RookTarget(cluster_name="c") if target == "rook" else None,
    )
    clients = [
        models.ClientSpec(),
        models.ClientSpec(node="a"),
        models.ClientSpec(nodes=["a", "b"]),
        models.ClientSpec(node_selector={"role": "client"}),
        models.ClientSpec(count=2),
    ]
    combos = [{"target": t, "client": c} for c in clients]
    _agree(models.RUN_RULES, models.BenchmarkRunSpec, combos)


def test_workload_rules_cel_and_python_agree() -> None:
    combos = [
        {"preset": p, "name": n, "rw": rw, "bs": bs, "options": o}
        for p, n, rw, bs, o in itertools.product(
            [None, "randread4k"],
            [None, "mix"],
            [None, "randrw"],
            [None, "16k"],
            [{}, {"rwmixread": "70"}, {"ioengine": "libaio"}],
        )
    ]
    assert _agree(models.WORKLOAD_RULES, models.WorkloadSpec, combos) > 0


@pytest.mark.parametrize(
    "which",
    [(), ("local",), ("local", "rook"), ("rook", "external"), ("local", "rook", "external")],
)
def test_target_rule_cel_and_python_agree(which: tuple[str, ...]) -> None:
    values = {
        "local": models.LocalTarget(),
        "rook": models.RookTarget(cluster_name="c"),
        "external": models.ExternalTarget(mon_host="m", user="u", keyring_file="/k"),
    }
    combo = [{k: values[k] for k in which}]
    _agree(models.TARGET_RULES, models.TargetSpec, combo)


def test_unique_workload_rule_cel_and_python_agree() -> None:
    w = models.WorkloadSpec
    cases = [
        [w(preset="randread4k"), w(preset="randwrite4k")],
        [w(preset="randread4k"), w(preset="randread4k")],
        [w(name="a", rw="read", bs="4k"), w(name="a", rw="write", bs="4k")],
    ]
    target = models.TargetSpec(local=models.LocalTarget())
    combos = [{"target": target, "workloads": c} for c in cases]
    _agree(models.RUN_RULES, models.BenchmarkRunSpec, combos)


def test_crd_loads_as_yaml_with_printer_columns() -> None:
    doc = yaml.safe_load((ROOT / "crds" / "benchmarkrun.yaml").read_text())
    cols = [c["name"] for c in doc["spec"]["versions"][0]["additionalPrinterColumns"]]
    for wanted in ("Phase", "Progress", "Backend", "Reactors", "Policy", "Peak IOPS", "Age"):
        assert wanted in cols
    assert doc["spec"]["names"]["shortNames"] == ["br"]


# ---- the spec's edge (issue 26): the same answers from CEL (cel-python) and Python

NAMES = ["a", "quick-crimson", "a" * 50, "a" * 51, "A", "a.b", "a/b", ".", "..", "-a", "a-",
         "a\nb", "a\0b", "qu\u00efck", ""]  # fmt: skip


@pytest.mark.parametrize("name", NAMES, ids=[repr(n)[:20] for n in NAMES])
def test_name_rule_cel_and_python_agree(name: str) -> None:
    from crimsonbench.spec.names import NAME_RULE

    assert _cel(NAME_RULE, {"metadata": {"name": name}}) == NAME_RULE.check(name)


def test_option_rules_cel_and_python_agree() -> None:
    values = ["0", "1", "70", "100", "101", "150", "yes", "4k", "64m", "1g", "10%", "100%",
              "101%", "5k,1k", "100m,,", ",", "10us", "2ms", "soon", "4q", "1.5", "-1"]  # fmt: skip
    names = [n for names, _, _ in OPTION_FORMATS for n in names]
    combos = [
        {"name": "w", "rw": "read", "bs": "4k", "options": {k: v}} for k in names for v in values
    ]
    combos.append({"name": "w", "rw": "read", "bs": "4k", "options": {}})
    assert _agree(models.OPTION_RULES, models.WorkloadSpec, combos) == len(combos) * 7


def test_map_key_rules_cel_and_python_agree() -> None:
    keys = ["role", "node-role.kubernetes.io/fio", "a b", "../n1", "n1.example.com", "N1",
            "x" * 64, "x" * 63, "a/b/c", "osd_op_num_shards", "osd op", "Osd", "1x",
            "a\nb"]  # fmt: skip
    clients = [{"node_selector": {k: "v"}, "node_cpu_sets": {k: "0"}} for k in keys]
    assert _agree(models.CLIENT_KEY_RULES, models.ClientSpec, clients) == len(keys) * 2
    osds = [{"ceph_config": {k: "1"}} for k in keys]
    assert _agree(models.OSD_KEY_RULES, models.OsdSpec, osds) == len(keys)


@pytest.mark.parametrize(
    ("workloads", "repeats", "iodepths", "images", "processes"),
    [(4, 1, 10, 32, 4), (4, 1, 7, 1024, 32), (4, 1, 8, 1024, 32), (32, 20, 64, 1024, 64),
     (1, 1, 1, 1, 1), (4, 2, 10, 1000, 12), (4, 2, 10, 1000, 13)],
)  # fmt: skip
def test_bound_rule_cel_and_python_agree(
    workloads: int, repeats: int, iodepths: int, images: int, processes: int
) -> None:
    w = [models.WorkloadSpec(name=f"w{i}", rw="read", bs="4k") for i in range(workloads)]
    fields = {
        "target": models.TargetSpec(local=models.LocalTarget()),
        "workloads": w,
        "sweep": models.SweepSpec.model_construct(
            **{
                **models.SweepSpec().__dict__,
                "repeats": repeats,
                "iodepths": list(range(1, iodepths + 1)),
            }  # fmt: skip
        ),
        "client": models.ClientSpec.model_construct(
            **{
                **models.ClientSpec().__dict__,
                "images": images,
                "processes_per_image": processes,
            }  # fmt: skip
        ),
    }
    assert _agree(models.BOUND_RULES, models.BenchmarkRunSpec, [fields]) == 1
    expected = workloads * repeats * iodepths * images * processes <= models.MAX_STEP_JOBS
    assert (
        models.BOUND_RULES[0].check(models.BenchmarkRunSpec.model_construct(**fields)) == expected
    )


def test_bound_rule_reads_the_defaults_when_fields_are_missing() -> None:
    rule = models.BOUND_RULES[0]
    assert _cel(rule, {"target": {"local": {}}})  # defaults: 4 x 1 x 10 x 32 x 1
    assert not _cel(rule, {"client": {"images": 1024, "processesPerImage": 64}})
    assert _cel(rule, {"client": {"images": 1024, "processesPerImage": 24}})  # 983,040
