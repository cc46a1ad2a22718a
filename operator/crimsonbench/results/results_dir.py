"""The results directory as a place on disk: its file names (results.store documents the
layout), paths that stay under its root without following a link, our marker, and
what may be deleted. ResultStore (results.store) reads and writes the files in it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from crimsonbench.results.safe_files import NotAResultsDirectory, UnsafePath, write_atomic

RUN_FILE = "run.json"
SPEC_FILE = "spec.json"
PLAN_FILE = "plan.json"
STATUS_FILE = "status.json"
LOCK_FILE = ".lock"
STEPS_DIR = "steps"
RESULT_FILE = "result.json"
SAMPLES_FILE = "samples.json"
AFFINITY_FILE = "affinity.json"
REPORT_DIR = "report"  # what `crimsonbench report` derives from the rest
RESERVE_FILE = ".reserve"  # space a local run sets aside to say how it ended on a full disk
MARKER_FILE = ".crimsonbench-results"
MARKER_TEXT = "crimsonbench results directory: `crimsonbench run --fresh` may empty it\n"
# What a results directory holds at its top (anything else there is not ours)
TOP_LEVEL = frozenset({RUN_FILE, SPEC_FILE, PLAN_FILE, STATUS_FILE, LOCK_FILE, RESERVE_FILE,
                       MARKER_FILE, STEPS_DIR, REPORT_DIR})  # fmt: skip
VIOLATIONS_KEY = "violations"  # the list of CPU-affinity violations in affinity.json


class CorruptResults(NotAResultsDirectory):
    """Files of a results directory that cannot be used: every one, each with why."""

    def __init__(self, root: Path, problems: Sequence[tuple[Path, str]]) -> None:
        self.root = root
        self.problems = list(problems)
        lines = [f"{_rel(root, p)}: {why}" for p, why in self.problems]
        if len(lines) == 1:
            text = f"{root}/{lines[0]}"
        else:
            text = f"{root}: {len(lines)} files cannot be used:\n" + "\n".join(
                f"  {ln}" for ln in lines
            )
        steps = [p for p, _ in self.problems if _rel(root, p).startswith(STEPS_DIR + "/")]
        if steps:
            text += (
                f"\n{len(steps)} step(s) would be left out; nothing was written. Move those "
                f"step directories out of {STEPS_DIR}/ (or run the steps again) to use the rest."
            )
        super().__init__(text)


def _rel(root: Path, path: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


class ResultsDir:
    def __init__(self, root: Path) -> None:
        # absolute: fio runs with its step directory as working directory (its IOPS logs
        # land there), so a relative --output would be resolved twice and not be found
        self.root = Path(root).absolute()

    # ------------------------------------------------------------ paths

    def path(self, *parts: str) -> Path:
        """root/parts, checked: each part a plain name, no symbolic link at any level
        below the root, and the result resolved inside the resolved root. The root itself
        may be a link (the user named it)."""
        path = self.root
        for part in parts:
            if not part or part in (".", "..") or "/" in part or "\0" in part:
                raise UnsafePath(f"{part!r} is not a plain file name under {self.root}")
            path = path / part
            if path.is_symlink():
                raise UnsafePath(
                    f"{path} is a symbolic link (to {os.readlink(path)}); crimsonbench never "
                    "reads or writes through a link inside a results directory: replace it "
                    "with a real directory or file"
                )
        real_root = os.path.realpath(self.root)
        real = os.path.realpath(path)
        if os.path.commonpath([real_root, real]) != real_root:
            raise UnsafePath(f"{path} resolves to {real}, outside {real_root}")
        return path

    def _dir(self, *parts: str) -> Path:
        """The directory root/parts, created (with the root and its marker) if needed."""
        self.create()
        path = self.root
        for i in range(len(parts)):
            path = self.path(*parts[: i + 1])
            if not path.is_dir():
                path.mkdir(exist_ok=True)  # a file of that name: FileExistsError
        return path

    # ------------------------------------------------------------ the directory

    @property
    def has_marker(self) -> bool:
        return (self.root / MARKER_FILE).is_file() and not (self.root / MARKER_FILE).is_symlink()

    def create(self) -> None:
        """Make the root (and its parents) if missing and mark it as ours; an existing
        empty directory is marked too. A directory with other content keeps what it is:
        adopt() marks an old results directory explicitly."""
        if self.root.is_dir():
            if not self.has_marker and not any(self.root.iterdir()):
                self.adopt()
            return
        self.root.mkdir(parents=True, exist_ok=True)
        self.adopt()

    def adopt(self) -> None:
        """Write our marker (a results directory made before markers existed)."""
        write_atomic(self.path(MARKER_FILE), MARKER_TEXT)

    def foreign_entries(self) -> list[str]:
        """Top-level names a results directory never holds (sorted)."""
        if not self.root.is_dir():
            return []
        return sorted(e.name for e in self.root.iterdir() if e.name not in TOP_LEVEL)

    def links(self) -> list[Path]:
        """Symbolic links at the top of the directory and in steps/ (never followed)."""
        found: list[Path] = []
        if not self.root.is_dir():
            return found
        for entry in self.root.iterdir():
            if entry.is_symlink():
                found.append(entry)
        steps = self.root / STEPS_DIR
        if steps.is_dir() and not steps.is_symlink():
            found += [e for e in steps.iterdir() if e.is_symlink()]
            for step in steps.iterdir():
                if step.is_dir() and not step.is_symlink():
                    found += [e for e in step.iterdir() if e.is_symlink()]
        return sorted(found)

    def check_readable(self) -> None:
        """Raise NotAResultsDirectory unless this looks like a results directory."""
        if not self.root.is_dir():
            raise NotAResultsDirectory(f"{self.root} is not a directory")
        if not os.access(self.root, os.R_OK | os.X_OK):
            raise NotAResultsDirectory(f"{self.root} is not readable (permissions)")
        if not (self.root / RUN_FILE).exists() and not (self.root / STEPS_DIR).is_dir():
            raise NotAResultsDirectory(
                f"{self.root} is not a results directory: it has neither {RUN_FILE} nor "
                f"{STEPS_DIR}/ (give the directory `crimsonbench run` or `fetch` wrote)"
            )

    def clear(self) -> None:
        """Delete every result (the lock and the marker stay: the caller holds the lock).
        Only in a directory that carries our marker; links are removed, never followed."""
        if not self.root.is_dir():
            return
        if not self.has_marker:
            raise UnsafePath(
                f"{self.root} has no {MARKER_FILE} file, so crimsonbench did not create it; "
                "it deletes nothing there"
            )
        for entry in self.root.iterdir():
            if entry.name in (LOCK_FILE, MARKER_FILE):
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()

    @property
    def lock_path(self) -> Path:
        return self.path(LOCK_FILE)

    def check_report_writable(self, names: Iterable[str] = ()) -> None:
        """Raise UnsafePath before anything is written when report/ (or a file in it) is a
        link, report is not a directory, or one of the files to write is a directory."""
        report = self.path(REPORT_DIR)
        if report.exists() and not report.is_dir():
            raise UnsafePath(f"{report} is a file; the report goes into a directory of that name")
        if not report.is_dir():
            return
        for entry in sorted(report.iterdir()):
            if entry.is_symlink():
                raise UnsafePath(
                    f"{entry} is a symbolic link (to {os.readlink(entry)}); crimsonbench "
                    "never writes through a link inside a results directory: remove it"
                )
        for name in names:
            path = report / name
            if path.exists() and not path.is_file():
                raise UnsafePath(f"{path} is not a file; the report writes a file there: remove it")
