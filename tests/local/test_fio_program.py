"""Which fio a local run starts on this machine: $CRIMSONBENCH_FIO, else ours beside the
Python (setup.sh links scripts/build-fio.sh's build there), else the fio on PATH."""

from __future__ import annotations

from pathlib import Path

import pytest

from crimsonbench.errors import ExecutionError
from crimsonbench.local.fio_program import FIO_ENV, host_fio


def _exe(path: Path) -> Path:
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_ours_beside_the_python_comes_before_path(tmp_path: Path) -> None:
    ours = _exe(tmp_path / "fio")
    assert host_fio({}, beside=tmp_path) == str(ours)
    ours.chmod(0o644)  # not runnable: not ours
    assert host_fio({}, beside=tmp_path) == "fio"
    assert host_fio({}, beside=tmp_path / "nothing") == "fio"


def test_the_variable_names_another_and_a_wrong_one_is_refused(tmp_path: Path) -> None:
    _exe(tmp_path / "fio")
    stock = _exe(tmp_path / "stock-fio")
    assert host_fio({FIO_ENV: str(stock)}, beside=tmp_path) == str(stock)
    assert host_fio({FIO_ENV: "  "}, beside=tmp_path) == str(tmp_path / "fio")
    with pytest.raises(ExecutionError, match=f"{FIO_ENV}=/no/such/fio is not an executable"):
        host_fio({FIO_ENV: "/no/such/fio"}, beside=tmp_path)
