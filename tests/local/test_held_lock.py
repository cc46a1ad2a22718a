"""One process at a time per results or study directory (local.results_guard.held): a
second holder is refused, naming what holds it and its pid; the lock goes with the block."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crimsonbench.errors import InvalidSpec
from crimsonbench.local.results_guard import held


def test_a_second_holder_is_refused_naming_the_first(tmp_path: Path) -> None:
    lock = tmp_path / ".study.lock"
    with held(lock, tmp_path, "a study"):
        with pytest.raises(InvalidSpec) as err, held(lock, tmp_path, "a study"):
            pass
        assert err.value.field == "--results"
        assert f"is in use by a study still going (pid {os.getpid()})" in err.value.message
    with held(lock, tmp_path, "a study"):  # released with the block
        assert lock.read_text() == f"pid {os.getpid()}"
