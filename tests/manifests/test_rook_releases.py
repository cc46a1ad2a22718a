"""What a run writes to Rook, checked against the CRDs of every Rook release the harness
knows (e2e/harness/rook.py RELEASES), read from each release's own crds.yaml (Go module
proxy): the patched CephCluster of the reference runs, the restored one, the run's
CephBlockPool and CephClient. A release whose CRDs changed a field we write fails here
before any cluster runs it."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.builds import REPO, environmental
from harness.rook import (
    OLDEST_CLAIMED,
    RELEASES,
    RookUnavailable,
    buildable,
    default_version,
    fallback_note,
    rook_crds_yaml,
)
from harness.rook_facade import reconcile_lines
from manifest_inputs import SEASTORE_56, bluestore_8x5, original_cephcluster, plan_of

from crimsonbench.manifests.cephcluster import (
    apply_merge_patch,
    cephcluster_patch,
    merge_patch,
    restore_patch,
)
from crimsonbench.manifests.rook_objects import ceph_client, cephblockpool

jsonschema = pytest.importorskip("jsonschema")


@functools.cache
def crds(version: str) -> dict[str, dict[str, Any]]:
    """kind -> openAPIV3Schema from Rook VERSION's deploy/examples/crds.yaml."""
    try:
        path = rook_crds_yaml(version)
    except RookUnavailable as exc:
        if not environmental(exc):
            raise
        print(f"\nRook {version} CRDs cannot be fetched here: {exc}", file=sys.stderr)
        pytest.skip(f"Rook {version} crds.yaml cannot be fetched here: {exc}")
    out = {}
    for doc in yaml.safe_load_all(Path(path).read_text()):
        if doc and doc.get("kind") == "CustomResourceDefinition":
            out[doc["spec"]["names"]["kind"]] = doc["spec"]["versions"][0]["schema"][
                "openAPIV3Schema"
            ]
    return out


def pruned(schema: dict[str, Any], obj: Any, path: str = "") -> list[str]:
    """Keys a structural schema does not know (the API server would drop them)."""
    if isinstance(obj, dict):
        props, extra = schema.get("properties"), schema.get("additionalProperties")
        if schema.get("x-kubernetes-preserve-unknown-fields") and props is extra is None:
            return []
        out = []
        for key, value in obj.items():
            if props is not None and key in props:
                out += pruned(props[key], value, f"{path}.{key}")
            elif isinstance(extra, dict):
                out += pruned(extra, value, f"{path}.{key}")
            elif props is not None and path not in ("", ".metadata"):
                out.append(f"{path}.{key}")
        return out
    if isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return [u for i, v in enumerate(obj) for u in pruned(schema["items"], v, f"{path}[{i}]")]
    return []


def check(version: str, obj: dict[str, Any]) -> None:
    schema = crds(version)[obj["kind"]]
    errors = list(jsonschema.Draft7Validator(schema).iter_errors(obj))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:10]]
    assert not pruned(schema, obj), (version, obj["kind"], pruned(schema, obj))


def runs() -> dict[str, Any]:
    return {
        "seastore-1osd-56": plan_of("seastore-1osd-56reactor", SEASTORE_56)[1],
        "bluestore-8osd-socket": plan_of("blue-8osd-5reactor-socket", bluestore_8x5("socket"))[1],
    }


@pytest.mark.parametrize("version", list(RELEASES))
def test_the_patched_and_restored_cephcluster_fit_every_release(version: str) -> None:
    original = original_cephcluster()
    for name, plan in runs().items():
        patched = {**original, "spec": cephcluster_patch(original, plan)}
        check(version, patched)
        # what the API server holds after our merge patch, and after the restore's
        live_spec = apply_merge_patch(
            original["spec"], merge_patch(original["spec"], patched["spec"])
        )
        check(version, {**original, "spec": live_spec})
        restored_spec = apply_merge_patch(live_spec, restore_patch(original["spec"], live_spec))
        assert restored_spec == original["spec"], name
        restored = {**original, "spec": restored_spec}
        check(version, restored)


@pytest.mark.parametrize("version", list(RELEASES))
def test_the_run_s_pool_and_client_fit_every_release(version: str) -> None:
    plan = runs()["bluestore-8osd-socket"]
    check(version, cephblockpool("r", plan.pool, namespace="rook-ceph"))
    check(version, ceph_client("r", plan.pool, namespace="rook-ceph"))


def test_every_release_has_the_fields_the_run_writes() -> None:
    """cephConfig (section -> key -> string), resources by daemon key, the OSD store type
    Rook provisions: the same in every release (what differs: README, "Rook and Ceph
    versions")."""
    for version in RELEASES:
        spec = crds(version)["CephCluster"]["properties"]["spec"]["properties"]
        cephconfig = spec["cephConfig"]["additionalProperties"]["additionalProperties"]
        assert cephconfig["type"] == "string", version
        assert spec["resources"]["additionalProperties"]["type"] == "object", version
        store = spec["storage"]["properties"]["store"]["properties"]["type"]
        assert store["enum"] == ["bluestore", "bluestore-rdr"], version  # never seastore


def test_a_release_built_from_source_says_in_one_line_what_to_do_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clone without ../shared (a user's machine): no traceback from a build, one line
    naming the archive, its place and the way out."""
    release = RELEASES["v1.20.6"]
    assert release.from_source
    monkeypatch.setenv("CRIMSONBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CRIMSONBENCH_SOURCES", str(tmp_path / "sources"))
    with pytest.raises(RookUnavailable) as caught:
        buildable(release)
    why = str(caught.value)
    assert "\n" not in why
    assert f"{tmp_path / 'sources' / 'rook-v1.20.6.tar.gz'} is not there" in why
    assert "official images" in why
    (tmp_path / "sources").mkdir()
    (tmp_path / "sources" / "rook-v1.20.6.tar.gz").write_bytes(b"")
    buildable(release)  # the build script checks the archive's sha256 itself


def test_the_default_is_the_newest_release_buildable_here_and_says_when_it_falls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With v1.20.6's source archive (or its cached operator) the kind tier runs v1.20.6;
    a user's clone without either runs the oldest release we claim, from the module proxy,
    and make test says why in one line instead of skipping the tier."""
    monkeypatch.setenv("CRIMSONBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CRIMSONBENCH_SOURCES", str(tmp_path / "sources"))
    assert default_version() == OLDEST_CLAIMED == "v1.17.8"
    note = fallback_note(default_version())
    assert "\n" not in note and "rook-v1.20.6.tar.gz" in note
    assert note.endswith("running Rook v1.17.8 instead")
    (tmp_path / "sources").mkdir()
    (tmp_path / "sources" / "rook-v1.20.6.tar.gz").write_bytes(b"")
    assert default_version() == "v1.20.6"
    assert fallback_note("v1.20.6") == ""
    (tmp_path / "sources" / "rook-v1.20.6.tar.gz").unlink()
    built = tmp_path / "cache" / "rook" / "v1.20.6" / "bin" / "rook"
    built.parent.mkdir(parents=True)
    built.write_bytes(b"")
    assert default_version() == "v1.20.6"  # built here once: it runs without the archive


def test_the_harness_reads_when_rook_v1_20_reconciles() -> None:
    """v1.20 renamed the logger (cluster-controller) and moved the namespace into a prefix;
    read wrong, every wait after a CephCluster change times out. The lines are `kubectl
    logs` of the v1.20.6 operator on kind (grep reconcil), 2026-11-29."""
    log = (REPO / "tests" / "fixtures" / "rook" / "operator-v1.20.6-reconcile.log").read_text()
    assert [(ns, done) for _, ns, done in reconcile_lines(log)] == [
        ("rook-ceph", True), ("rook-ceph", False), ("rook-ceph", True)
    ]  # fmt: skip
