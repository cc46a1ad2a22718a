"""Undoing a run's CephCluster patch value by value, from the run's own record.

Before the patch, every value it will set is recorded with the value found there
(`spec_changes`: path, before, after; the run's record keeps them, spec.status.SpecChange).
The restore puts back a value only while the cluster still holds the run's (`undo_patch`):
an admin's `kubectl edit` during the run, of that very value or anywhere else, stays as the
admin left it, and is named. A section or map the run created is removed again once empty.

Values travel as JSON text (the record's schema holds strings), compared as JSON values
(1, 1.0 and "1" differ: they serialize differently and Rook reads them differently).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crimsonbench.manifests.cephcluster import apply_merge_patch

ABSENT = None  # a change's before: the path did not exist


@dataclass(frozen=True)
class Change:
    """One leaf of the spec the patch sets: `created` is how many leading elements of
    `path` existed before (len(path) - 1 when only the leaf is new or changed)."""

    path: tuple[str, ...]
    before: str | None  # JSON text, ABSENT: not there
    after: str  # JSON text
    created: int


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def spec_changes(current: Mapping[str, Any], desired: Mapping[str, Any]) -> list[Change]:
    """Every leaf of `desired` (a value that is not an object) that differs from
    `current`, with what `current` has there. The run's desired spec only adds and
    overwrites (cephcluster_patch): a key it would remove is refused."""
    out: list[Change] = []
    _walk(current, desired, (), 0, out)
    return out


def _walk(
    old: Any, new: Mapping[str, Any], path: tuple[str, ...], existed: int, out: list[Change]
) -> None:
    old_map = old if isinstance(old, Mapping) else None
    if old_map is not None:
        gone = sorted(set(old_map) - set(new))
        if gone:
            raise ValueError(f"the patch would remove {'.'.join([*path, gone[0]])}")
    for key in sorted(new):
        value, here = new[key], (*path, str(key))
        had = old_map is not None and key in old_map
        before = old_map[key] if had and old_map is not None else None
        depth = existed + 1 if had else existed
        new_empty = isinstance(value, Mapping) and not value and not had  # a leaf of its own
        if (
            isinstance(value, Mapping)
            and not new_empty
            and (not had or isinstance(before, Mapping))
        ):
            _walk(before if had else None, value, here, depth if had else existed, out)
            continue
        if had and _text(before) == _text(value):
            continue
        out.append(Change(here, _text(before) if had else ABSENT, _text(value),
                          min(existed, len(here) - 1)))  # fmt: skip


def apply_changes(current: Mapping[str, Any], changes: Sequence[Change]) -> dict[str, Any]:
    """current with every change's value set (the spec the run's patch makes)."""
    out = copy.deepcopy(dict(current))
    for c in changes:
        node = out
        for key in c.path[:-1]:
            if not isinstance(node.get(key), Mapping):
                node[key] = {}
            node = node[key]
        node[c.path[-1]] = json.loads(c.after)
    return out


def changes_digest(changes: Sequence[Change]) -> str:
    """sha256 of the changes as recorded: the patch puts it on the CephCluster, and the
    restore applies a record only when it matches (whoever may edit the run's status must
    not decide what the restore writes into the cluster)."""
    rows = [[list(c.path), c.before, c.after, c.created] for c in changes]
    return hashlib.sha256(_text(rows).encode()).hexdigest()


def _get(spec: Any, path: Sequence[str]) -> tuple[bool, Any]:
    node = spec
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return False, None
        node = node[key]
    return True, node


@dataclass(frozen=True)
class Undo:
    patch: dict[str, Any]  # the JSON merge patch that puts the run's values back
    left: tuple[str, ...]  # paths someone changed since the run set them: kept as they are


def undo_patch(changes: Sequence[Change], current: Mapping[str, Any]) -> Undo:
    """The merge patch reverting every change whose value is still the run's; maps the
    run created are removed when the revert leaves them empty. Nothing else is touched."""
    target = copy.deepcopy(dict(current))
    left: list[str] = []
    reverted: list[Change] = []
    for c in changes:
        found, value = _get(target, c.path)
        if not found or _text(value) != c.after:
            as_before = (not found) if c.before is ABSENT else found and _text(value) == c.before
            if not as_before:  # someone else's value now: theirs to keep
                left.append(".".join(c.path))
            continue
        parent = _get(target, c.path[:-1])[1]
        if c.before is ABSENT:
            del parent[c.path[-1]]
        else:
            parent[c.path[-1]] = json.loads(c.before)
        reverted.append(c)
    for c in reverted:  # innermost first: a created map inside a created map
        for depth in range(len(c.path) - 1, c.created, -1):
            found, node = _get(target, c.path[:depth])
            if found and isinstance(node, Mapping) and not node:
                del _get(target, c.path[: depth - 1])[1][c.path[depth - 1]]
    return Undo(_merge(current, target), tuple(left))


def _merge(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    patch: dict[str, Any] = {k: None for k in old if k not in new}
    for key, value in new.items():
        if key not in old:
            patch[key] = copy.deepcopy(value)
        elif isinstance(value, Mapping) and isinstance(old[key], Mapping):
            sub = _merge(old[key], value)
            if sub:
                patch[key] = sub
        elif _text(old[key]) != _text(value):
            patch[key] = copy.deepcopy(value)
    return patch


def after_undo(changes: Sequence[Change], current: Mapping[str, Any]) -> dict[str, Any]:
    """The spec once undo_patch is applied (what the OSDs should roll back to)."""
    return dict(apply_merge_patch(current, undo_patch(changes, current).patch))
