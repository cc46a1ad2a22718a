"""Golden-file comparison for the manifest tests.

Golden files live in tests/manifests/golden/. `make golden` rewrites them (it sets
UPDATE_GOLDEN and CRIMSONBENCH_GOLDEN_TARGET); otherwise the tests compare and fail on any
difference. UPDATE_GOLDEN alone (left in a shell or a CI environment) fails every golden
test: it would make them pass without comparing anything.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from manifest_inputs import dump

GOLDEN = Path(__file__).resolve().parent / "golden"
MAKE_GOLDEN = "make golden"  # the Makefile's golden target sets CRIMSONBENCH_GOLDEN_TARGET to it


def updating() -> bool:
    """True only under `make golden`; UPDATE_GOLDEN set anywhere else is a failure."""
    if not os.environ.get("UPDATE_GOLDEN"):
        return False
    if os.environ.get("CRIMSONBENCH_GOLDEN_TARGET") != MAKE_GOLDEN:
        pytest.fail(
            "UPDATE_GOLDEN is set outside `make golden`: the golden tests would pass without "
            "comparing anything. Unset it; to rewrite the golden files run `make golden` and "
            "review the diff",
            pytrace=False,
        )
    return True


@pytest.fixture
def golden() -> Callable[[str, list[Any]], None]:
    def check(name: str, docs: list[Any]) -> None:
        path = GOLDEN / name
        text = dump(docs)
        assert list(yaml.safe_load_all(text)) == docs  # the YAML says exactly what was built
        if updating():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        assert path.exists(), f"{path} is missing: run `make golden` and review the diff"
        assert text == path.read_text(), (
            f"{name} differs from the golden file; if the change is intended, run "
            "`make golden` and review the diff"
        )

    return check
