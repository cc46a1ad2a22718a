"""A BenchmarkStudy's expansion: variants by product or by list, each a BenchmarkRun spec
that passed the run's own validation, named, the baseline first; runs interleaved; and
every refusal naming the variant, the field and the fix, before anything starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from crimsonbench.errors import InvalidSpec
from crimsonbench.plan.study import expand_study, study_fingerprint, study_runs
from crimsonbench.spec.models import Flavor, ObjectStore, validate_as
from crimsonbench.spec.study import BenchmarkStudySpec, load_study

EXAMPLES = Path(__file__).resolve().parents[2] / "operator/crimsonbench/examples/studies"

BASE: dict[str, Any] = {
    "target": {"local": {}},
    "osd": {"flavor": "classic", "objectStore": "memstore", "cpuSet": "0"},
    "client": {"cpuSet": "1", "images": 2, "imageSize": "256Mi"},
    "sweep": {"iodepths": [1, 4], "runtimeSeconds": 5, "rampSeconds": 1},
}


def study(**fields: Any) -> BenchmarkStudySpec:
    return validate_as(BenchmarkStudySpec, {"base": BASE, **fields})


def test_a_product_of_two_axes_is_every_combination_named_by_its_values() -> None:
    s = study(
        vary=[
            {"field": "osd.objectStore", "values": ["memstore", "bluestore"]},
            {"field": "client.images", "values": [1, 4], "label": "img"},
        ]
    )
    variants = expand_study(s)
    assert [v.name for v in variants] == [
        "objectstore-memstore-img-1",
        "objectstore-memstore-img-4",
        "objectstore-bluestore-img-1",
        "objectstore-bluestore-img-4",
    ]
    last = variants[-1]
    assert last.spec.osd.object_store == ObjectStore.BLUESTORE
    assert last.spec.client.images == 4
    assert last.spec.client.image_size == "256Mi"  # the base's, untouched
    assert last.describe() == "osd.objectStore=bluestore, client.images=4"


def test_runs_are_interleaved_repeat_by_repeat() -> None:
    s = study(vary=[{"field": "client.images", "values": [1, 2, 3]}], repeats=2)
    runs = study_runs("s", expand_study(s), s.repeats)
    assert [(r.variant, r.repeat) for r in runs] == [
        ("images-1", 1), ("images-2", 1), ("images-3", 1),
        ("images-1", 2), ("images-2", 2), ("images-3", 2),
    ]  # fmt: skip
    assert runs[4].name == "s-images-2-r2"
    single = study_runs("s", expand_study(s), 1)
    assert [r.name for r in single] == ["s-images-1", "s-images-2", "s-images-3"]


def test_names_too_long_for_a_run_fall_back_to_positions() -> None:
    custom = [{"name": "w", "rw": "randread", "bs": "4k"}]
    s = validate_as(BenchmarkStudySpec, {
        "base": {**BASE, "workloads": custom},
        "vary": [{"field": "workloads.0.bs", "values": ["4k", "16k"], "label": "blocksize"}],
        "repeats": 2,
    })  # fmt: skip
    variants = expand_study(s)
    assert [v.name for v in variants] == ["blocksize-4k", "blocksize-16k"]
    assert variants[1].spec.workloads[0].bs == "16k"
    name = "a-study-name-of-forty-characters-exactly"
    assert len(name) == 40
    runs = study_runs(name, variants, s.repeats)
    assert [r.name for r in runs][:2] == [f"{name}-v1-r1", f"{name}-v2-r1"]
    assert all(len(r.name) <= 50 for r in runs)


def test_an_explicit_list_with_a_baseline_puts_the_baseline_first() -> None:
    s = study(
        variants=[
            {"name": "two", "set": {"client.images": 2}},
            {"name": "one", "set": {"client.images": 1}},
        ],
        baseline="one",
    )
    assert [v.name for v in expand_study(s)] == ["one", "two"]


def test_null_removes_a_field_so_a_classic_variant_of_a_crimson_base_is_valid() -> None:
    base = {**BASE, "osd": {"flavor": "crimson", "objectStore": "cyanstore", "reactors": 2,
                            "cpuSet": "0"}}  # fmt: skip
    s = validate_as(BenchmarkStudySpec, {
        "base": base,
        "variants": [
            {"name": "crimson", "set": {}},
            {"name": "classic", "set": {"osd.flavor": "classic", "osd.objectStore": "memstore",
                                        "osd.reactors": None}},
        ],
    })  # fmt: skip
    crimson, classic = expand_study(s)
    assert classic.spec.osd.flavor == Flavor.CLASSIC and classic.spec.osd.reactors is None
    assert crimson.spec.osd.reactors == 2


def test_a_variant_that_cannot_run_is_refused_naming_it_and_the_field() -> None:
    s = study(vary=[{"field": "osd.objectStore", "values": ["memstore", "seastore"]}])
    with pytest.raises(InvalidSpec) as err:
        expand_study(s)
    assert err.value.field == "spec.vary (variant 2, objectstore-seastore): spec.osd.objectStore"
    assert "cyanstore and seastore need flavor crimson" in err.value.message


def test_every_broken_variant_is_named_at_once() -> None:
    s = study(
        variants=[
            {"name": "ok", "set": {}},
            {"name": "typo", "set": {"osd.objectStor": "bluestore"}},
            {"name": "overlap", "set": {"client.cpuSet": "0"}},
        ]
    )
    with pytest.raises(InvalidSpec) as err:
        expand_study(s)
    fields = [f for f, _ in err.value.problems]
    assert fields == [
        "spec.variants[1] (typo): spec.osd.objectStor",
        "spec.variants[2] (overlap): spec.client.cpuSet",
    ]
    assert "check the spelling" in err.value.problems[0][1]
    assert "share CPUs 0" in err.value.problems[1][1]


def test_an_index_beyond_the_base_list_says_how_long_the_list_is() -> None:
    s = study(variants=[{"name": "a", "set": {"sweep.iodepths.5": 8}}])
    with pytest.raises(InvalidSpec) as err:
        expand_study(s)
    assert "sweep.iodepths.5: the base's list has 2 items (indexes 0-1)" in str(err.value)


def test_two_variants_of_the_same_spec_are_refused() -> None:
    s = study(variants=[{"name": "a", "set": {}}, {"name": "b", "set": {"client.images": 2}}])
    with pytest.raises(InvalidSpec, match="variants a and b run the same spec"):
        expand_study(s)


def test_the_study_rules_refuse_neither_both_and_an_unknown_baseline() -> None:
    with pytest.raises(InvalidSpec, match="give either vary"):
        study()
    with pytest.raises(InvalidSpec, match="give either vary"):
        study(vary=[{"field": "client.images", "values": [1]}],
              variants=[{"name": "a", "set": {}}])  # fmt: skip
    with pytest.raises(InvalidSpec) as err:
        study(variants=[{"name": "a", "set": {}}], baseline="b")
    assert err.value.field == "spec.baseline"
    with pytest.raises(InvalidSpec) as err:
        study(vary=[{"field": "osd.", "values": [1]}])
    assert err.value.field == "spec.vary[0].field"


def test_too_many_combinations_are_refused_with_the_count() -> None:
    axes = [{"field": f, "values": list(range(1, 6))}
            for f in ("client.images", "client.processesPerImage", "osd.count")]  # fmt: skip
    with pytest.raises(InvalidSpec, match="5 x 5 x 5 = 125 variants, more than 64"):
        expand_study(study(vary=axes))


def test_the_fingerprint_changes_with_the_study() -> None:
    a = study(vary=[{"field": "client.images", "values": [1, 2]}])
    b = study(vary=[{"field": "client.images", "values": [1, 3]}])
    assert study_fingerprint(a) == study_fingerprint(
        study(vary=[{"field": "client.images", "values": [1, 2]}])
    )
    assert study_fingerprint(a) != study_fingerprint(b)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_example_study_expands(path: Path) -> None:
    name, s = load_study(path)
    variants = expand_study(s)
    assert len(variants) >= 2
    assert len(study_runs(name, variants, s.repeats)) == len(variants) * s.repeats
    assert yaml.safe_load(path.read_text())["metadata"]["name"] == name


def test_a_run_manifest_is_not_a_study(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("apiVersion: bench.crimson.ceph.io/v1alpha1\nkind: BenchmarkRun\n"
                    "metadata: {name: x}\nspec: {}\n")  # fmt: skip
    with pytest.raises(InvalidSpec, match="a BenchmarkStudy manifest says kind: BenchmarkStudy"):
        load_study(path)


def test_a_study_name_leaves_room_for_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    spec = {"base": BASE, "variants": [{"name": "a"}]}
    doc = {"apiVersion": "bench.crimson.ceph.io/v1alpha1", "kind": "BenchmarkStudy",
           "metadata": {"name": "x" * 41}, "spec": spec}  # fmt: skip
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InvalidSpec, match="at most 40"):
        load_study(path)


def test_a_set_key_that_is_not_a_field_path_is_refused() -> None:
    with pytest.raises(InvalidSpec) as err:
        study(variants=[{"name": "a", "set": {"osd objectStore": "bluestore"}}])
    assert err.value.field == "spec.variants[0].set"
    assert "'osd objectStore' is not a spec field as YAML writes it" in err.value.message
