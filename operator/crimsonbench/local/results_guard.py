"""The results directory of a local run: the refusals before anything is written, and
the one lock that keeps a second run out of it while the first writes there."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from crimsonbench.errors import InvalidSpec
from crimsonbench.plan.meaning import meaning_changes
from crimsonbench.results.store import (
    LOCK_FILE,
    MARKER_FILE,
    CorruptResults,
    NotAResultsDirectory,
    ResultStore,
)


def _listing(root: Path, most: int = 5) -> str:
    names = sorted(e.name for e in root.iterdir())
    shown = ", ".join(names[:most]) + (
        f" and {len(names) - most} more" if len(names) > most else ""
    )
    return shown or "nothing"


@contextmanager
def exclusive(store: ResultStore) -> Iterator[None]:
    """One run per results directory: a second run would mix its steps into the first's."""
    with held(store.lock_path, store.root, "a run"):
        yield


@contextmanager
def held(lock_path: Path, root: Path, what: str) -> Iterator[None]:
    """An exclusive lock on lock_path for this process's life in the block, its pid
    written in it; InvalidSpec naming --results and the holder when another has it."""
    with lock_path.open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            raise InvalidSpec(
                "--results",
                f"{root} is in use by {what} still going ({holder}); "
                "wait for it or pick another --results directory",
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}")
        fh.flush()
        yield


class ResultsGuard:
    """What a run may do with its results directory; check() refuses (InvalidSpec naming
    --results) and only reads."""

    def __init__(self, store: ResultStore, spec_json: dict[str, Any], fresh: bool) -> None:
        self.store, self.spec_json, self.fresh = store, spec_json, fresh
        self.adopt = False  # an old results directory of this spec, marked when run

    def check(self) -> None:
        """The results directory's refusals (InvalidSpec naming --results); reads only."""
        root = self.store.root
        if root.is_symlink() and not root.exists():
            raise InvalidSpec(
                "--results",
                f"{root} is a link to {os.readlink(root)}, which does not exist; create that "
                "directory or pick another --results",
            )
        if root.exists() and not root.is_dir():
            raise InvalidSpec("--results", f"{root} is not a directory; pick another --results")
        links = self.store.links()
        if links:
            raise InvalidSpec(
                "--results",
                f"{links[0]} is a symbolic link (to {os.readlink(links[0])}); a run writes "
                "nothing through links in its results directory: replace it with a real "
                "directory, or pick another --results",
            )
        self._check_not_in_use()
        if root.is_dir() and any(root.iterdir()) and not self.store.has_marker:
            self._refuse_unmarked(root)
        if not self.fresh:
            self._check_same_spec()
            self._check_steps_usable()

    def _check_steps_usable(self) -> None:
        """A resumed run keeps every step it finds; one it cannot read would stop the
        report at the end (after the run's work), so it is refused now, naming each."""
        try:
            problems = self.store.scan_steps().problems
        except NotAResultsDirectory as exc:
            raise InvalidSpec("--results", str(exc)) from None
        if problems:
            raise InvalidSpec(
                "--results",
                str(CorruptResults(self.store.root, problems)) + " Or pass --fresh to start over.",
            )

    def _refuse_unmarked(self, root: Path) -> None:
        """A non-empty directory without our marker: --fresh deletes nothing there, and a
        run writes there only when it holds our results from before markers existed
        (spec.json of this very spec), which it then marks."""
        marker = f"{root / MARKER_FILE}"
        if self.fresh:
            raise InvalidSpec(
                "--results",
                f"--fresh empties only a results directory crimsonbench created (it has "
                f"{marker}); {root} has none and holds {_listing(root)}. Check what it is, "
                "then delete it yourself, or pick another --results directory",
            )
        foreign = self.store.foreign_entries()
        try:
            found = self.store.read_spec() if not foreign else None
        except NotAResultsDirectory:
            found = None
        if found is None or found != self.spec_json:
            raise InvalidSpec(
                "--results",
                f"{root} is not empty ({_listing(root)}) and is not a crimsonbench results "
                f"directory of this spec (no {marker}): pick a new or empty --results directory",
            )
        self.adopt = True

    def _check_not_in_use(self) -> None:
        """The lock of a run still going, checked before anything is written (the lock
        is taken for real once the directory is ours: _exclusive)."""
        path = self.store.root / LOCK_FILE
        if not path.is_file() or path.is_symlink():
            return
        with path.open("rb") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = fh.read(200).decode(errors="replace").strip() or "another process"
                raise InvalidSpec(
                    "--results",
                    f"{self.store.root} is in use by a run still going ({holder}); "
                    "wait for it or pick another --results directory",
                ) from None
            fcntl.flock(fh, fcntl.LOCK_UN)

    def _check_same_spec(self) -> None:
        """The steps found are kept when this spec measures what theirs did (resume by
        content, plan.meaning): more iodepths, repeats or workloads run only the new
        steps; a change of anything a step measures under is refused, naming it."""
        try:
            found = self.store.read_spec() if self.store.root.is_dir() else None
        except NotAResultsDirectory as exc:
            raise InvalidSpec("--results", str(exc)) from None
        if found is None or found == self.spec_json:
            return
        try:
            changes = meaning_changes(found, self.spec_json)
        except InvalidSpec as exc:
            changes = [str(exc)]
        if changes:
            root = self.store.root
            raise InvalidSpec(
                "--results",
                f"{root} holds steps measured under another spec ({'; '.join(changes)}), "
                "so they would not compare with this spec's; pass --fresh to start over "
                "(their results are deleted) or pick another --results directory. (More "
                "iodepths, repeats or workloads, or other earlyExit, latencyTarget or "
                "kneeSearch rules, keep every finished step.)",
            )
