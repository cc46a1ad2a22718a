"""The run's CephCluster patch undone value by value from its record
(manifests/cephcluster_undo.py): over generated specs, the record replays the patch
exactly and its undo gives back the spec as found; whatever someone else changed in
between stays theirs."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crimsonbench.manifests.cephcluster import apply_merge_patch
from crimsonbench.manifests.cephcluster_undo import (
    apply_changes,
    changes_digest,
    spec_changes,
    undo_patch,
)

KEYS = st.sampled_from(["cephConfig", "resources", "osd", "osd.0", "osd.1", "limits", "cpu",
                        "memory", "global", "x"])  # fmt: skip
LEAVES = st.one_of(st.text(max_size=4), st.integers(-3, 3), st.booleans(),
                   st.lists(st.integers(0, 3), max_size=2))  # fmt: skip
SPECS = st.recursive(LEAVES, lambda inner: st.dictionaries(KEYS, inner, max_size=4), max_leaves=12)


def _maps(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {"leaf": x}


def _overlay(original: Any, extra: Any) -> dict[str, Any]:
    """What cephcluster_patch does: add and overwrite, never remove."""
    out = copy.deepcopy(_maps(original))
    for k, v in _maps(extra).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _overlay(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


@settings(max_examples=300, deadline=None)
@given(SPECS, SPECS)
def test_the_record_replays_the_patch_and_its_undo_gives_back_the_original(
    original: Any, extra: Any
) -> None:
    original, desired = _maps(original), _overlay(original, extra)
    changes = spec_changes(original, desired)
    assert apply_changes(original, changes) == desired  # what the patch makes
    undo = undo_patch(changes, desired)
    assert apply_merge_patch(desired, undo.patch) == original and undo.left == ()
    # and once undone, nothing is left to do
    assert undo_patch(changes, original).patch == {}


def test_someone_elses_values_stay_theirs_and_are_named() -> None:
    original = {
        "cephConfig": {"global": {"a": "1"}},
        "resources": {"osd": {"limits": {"cpu": "4"}}},
    }
    desired = {"cephConfig": {"global": {"a": "1"}, "osd.0": {"k": "v", "k2": "w"}},
               "resources": {"osd": {"limits": {"cpu": "2"}}}}  # fmt: skip
    changes = spec_changes(original, desired)
    during = copy.deepcopy(desired)
    during["cephConfig"]["osd.0"]["k"] = "admin"  # a value the run set, edited
    during["cephConfig"]["osd.0"]["mine"] = "admin"  # a key added in a section the run made
    during["cephConfig"]["global"]["b"] = "2"  # elsewhere
    undo = undo_patch(changes, during)
    after = apply_merge_patch(during, undo.patch)
    assert after == {"cephConfig": {"global": {"a": "1", "b": "2"},
                                    "osd.0": {"k": "admin", "mine": "admin"}},
                     "resources": {"osd": {"limits": {"cpu": "4"}}}}  # fmt: skip
    assert undo.left == ("cephConfig.osd.0.k",)


def test_a_patch_that_would_remove_a_key_is_refused() -> None:
    with pytest.raises(ValueError, match="would remove cephConfig.x"):
        spec_changes({"cephConfig": {"x": "1"}}, {"cephConfig": {}})


def test_the_digest_changes_with_any_value_of_the_record() -> None:
    changes = spec_changes({"a": {"b": "1"}}, {"a": {"b": "2", "c": [1]}})
    base = changes_digest(changes)
    assert base == changes_digest(list(changes))
    for i, c in enumerate(changes):
        for field, value in (("after", json.dumps("3")), ("before", json.dumps("0"))):
            tampered = [*changes[:i], c.__class__(**{**c.__dict__, field: value}),
                        *changes[i + 1 :]]  # fmt: skip
            assert changes_digest(tampered) != base
