"""Golden-file comparison for the manifest tests.

Golden files live in tests/manifests/golden/. `UPDATE_GOLDEN=1 python -m pytest
tests/manifests` rewrites them; otherwise the tests compare and fail on any difference.
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


@pytest.fixture
def golden() -> Callable[[str, list[Any]], None]:
    def check(name: str, docs: list[Any]) -> None:
        path = GOLDEN / name
        text = dump(docs)
        assert list(yaml.safe_load_all(text)) == docs  # the YAML says exactly what was built
        if os.environ.get("UPDATE_GOLDEN"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        assert path.exists(), (
            f"{path} is missing: run UPDATE_GOLDEN=1 python -m pytest tests/manifests"
        )
        assert text == path.read_text(), (
            f"{name} differs from the golden file; if the change is intended, run "
            "UPDATE_GOLDEN=1 python -m pytest tests/manifests and review the diff"
        )

    return check
