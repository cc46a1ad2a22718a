"""The lines a log file gained since a mark: the cluster log's lines of one step."""

from __future__ import annotations

from pathlib import Path

MAX_BYTES = 1 << 20  # a step's share of the log; more is a storm, its start tells enough


class NewLines:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._offset = self._size()

    def _size(self) -> int:
        try:
            return self._path.stat().st_size
        except OSError:
            return 0

    def read_new(self) -> list[str]:
        """Whole lines written since the mark (or since the start of a file that was
        truncated or replaced meanwhile)."""
        start = 0 if self._size() < self._offset else self._offset
        try:
            with self._path.open("rb") as f:
                f.seek(start)
                data = f.read(MAX_BYTES)
        except OSError:
            return []
        return data.decode(errors="replace").splitlines()
