"""Everything the operator remembers of a run, as one typed record: the run's status as the
models of spec/status.py (what it shows, and `record`: what it only remembers to carry on
after a restart), loaded once per tick and written back as a diff (a JSON merge patch of
the status: only what the tick changed).

A run an older operator started kept part of this elsewhere: annotations on the run
(step retries, OSD incarnations, two wait starts), marks on its `<run>-run` ConfigMap
(images removed, a wait start) and on the saved original CephCluster spec (how far the
restore got), and two status fields. They are read once, when a run without `record` is
first loaded (LegacyMarks), moved into the record, and the annotations removed a tick
later, once the record holding them has been written. Nothing else reads those places.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from crimsonbench.manifests.cephcluster import merge_patch
from crimsonbench.manifests.naming import GROUP
from crimsonbench.spec.status import (
    BenchmarkRunStatus,
    Condition,
    OsdsRestarted,
    RestoreMarks,
    RunBookkeeping,
)

WaitName = Literal["rollout", "pool", "removal", "client"]
# Stages after which a run has started something (a run without a record there was
# started by an older operator; its fio driver keys steps by position).
_STARTED = ("observe", "patch", "rollout", "prepare", "steps", "restore")


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# ---------------------------------------------------------------- before the record

_RUN_ANNOTATIONS = ("step-retries", "osd-incarnations", "pool-wait-since", "removal-wait-since")
LEGACY_ANNOTATIONS = tuple(f"{GROUP}/{k}" for k in _RUN_ANNOTATIONS)


@dataclass(frozen=True)
class LegacyMarks:
    """What an older operator kept on ConfigMaps: the annotations of the run's `<run>-run`
    ConfigMap and of its saved original spec (None: that ConfigMap does not exist)."""

    run_record: Mapping[str, str] | None = None
    saved_original: Mapping[str, str] | None = None


def _legacy(
    raw: Mapping[str, Any], annotations: Mapping[str, str], marks: LegacyMarks
) -> RunBookkeeping:
    """The record a run an older operator started would have: from its annotations, its
    ConfigMaps' marks and its status fields."""

    def mark(where: Mapping[str, str] | None, key: str) -> str | None:
        return (where or {}).get(f"{GROUP}/{key}")

    def since(*values: str | None) -> float | None:
        return next((float(v) for v in values if v), None)

    book = RunBookkeeping()
    retries = annotations.get(f"{GROUP}/step-retries")
    if retries:
        book.step_retries = json.loads(retries)
    incarnations = annotations.get(f"{GROUP}/osd-incarnations")
    if incarnations is not None:
        book.osd_incarnations = json.loads(incarnations)
    book.waits.pool = since(annotations.get(f"{GROUP}/pool-wait-since"))
    book.waits.removal = since(mark(marks.run_record, "removal-wait-since"),
                               annotations.get(f"{GROUP}/removal-wait-since"))  # fmt: skip
    book.waits.rollout = raw.get("rolloutSince") or None
    removed = mark(marks.run_record, "images-removed")
    book.images_removed = removed or ("done" if raw.get("imagesRemoved") else "")
    original = marks.saved_original
    restarted = mark(original, "crimson-osds-restarted")
    book.restore = RestoreMarks(
        started=since(mark(original, "restore-started")),
        config_cleaned=mark(original, "config-cleaned"),
        osds_restarted=None if restarted is None else OsdsRestarted(**json.loads(restarted)),
        over=mark(original, "config-restored"),
    )
    if raw.get("stage") == "steps":  # its driver may hold a step in flight by position
        book.step_keys = "position"
    return book


# ---------------------------------------------------------------- the record


def _dump(status: BenchmarkRunStatus) -> dict[str, Any]:
    """The status as JSON, every field (defaults too); a field set to None is left out."""
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


@dataclass
class RunRecord:
    """The run's status for one tick. Change `status` (and `status.record`, as `book`)
    field by field; `status_patch()` is what the tick changed."""

    status: BenchmarkRunStatus
    loaded: dict[str, Any]  # the status as read, as the models say it: the diff's base
    stale_annotations: tuple[str, ...] = ()  # an older operator's, now in the record
    migrated: bool = False  # the record was made from an older operator's places this tick
    events: list[tuple[str, str]] = field(default_factory=list)  # Warning events to post

    @classmethod
    def load(
        cls,
        status: Mapping[str, Any] | None,
        annotations: Mapping[str, str] | None = None,
        legacy: LegacyMarks | None = None,
    ) -> RunRecord:
        """From the run's status and annotations as the API returns them. legacy: read
        only for a status without `record` (needs_legacy_marks)."""
        raw = dict(status or {})
        annotations = dict(annotations or {})
        typed = BenchmarkRunStatus.model_validate(raw)
        loaded = _dump(typed)
        migrated = typed.record is None
        if typed.record is None:
            typed.record = _legacy(raw, annotations, legacy or LegacyMarks())
            typed.rollout_since = typed.images_removed = None
        stale = () if migrated else tuple(k for k in LEGACY_ANNOTATIONS if k in annotations)
        return cls(typed, loaded, stale, migrated)

    @staticmethod
    def needs_legacy_marks(status: Mapping[str, Any] | None) -> bool:
        """True for a run whose marks may still be on ConfigMaps (an older operator's)."""
        return "record" not in (status or {}) and (status or {}).get("stage") in _STARTED

    @property
    def book(self) -> RunBookkeeping:
        assert self.status.record is not None  # load() always makes one
        return self.status.record

    def status_patch(self) -> dict[str, Any]:
        """The merge patch from the status as loaded to the status now ({}: no change)."""
        return merge_patch(self.loaded, _dump(self.status))

    # ------------------------------------------------------------ what the status shows

    @property
    def placement(self) -> dict[int, str]:
        """OSD id -> node, as observe found them."""
        return {int(k): v for k, v in self.status.osd_placement.items()}

    def condition(self, type_: str, ok: bool, reason: str, message: str) -> None:
        """Set a standard condition; lastTransitionTime changes only when status flips."""
        status = "True" if ok else "False"
        conditions = list(self.status.conditions)
        at = next((i for i, c in enumerate(conditions) if c.type == type_), None)
        old = None if at is None else conditions[at]
        since = old.last_transition_time if old is not None and old.status == status else None
        new = Condition(type=type_, status=status, reason=reason, message=message[:32000],
                        last_transition_time=since or now_iso())  # fmt: skip
        if at is None:
            conditions.append(new)
        else:
            conditions[at] = new
        self.status.conditions = conditions

    def conditions(self) -> dict[str, Condition]:
        return {c.type: c for c in self.status.conditions}

    # ------------------------------------------------------------ bounded waits

    def waited(self, name: WaitName, now: float) -> float:
        """Seconds since the wait `name` began; it begins now if it had not."""
        waits = self.book.waits
        since = getattr(waits, name)
        if since is None:
            since = round(now, 1)
            setattr(waits, name, since)
        return max(0.0, now - since)
