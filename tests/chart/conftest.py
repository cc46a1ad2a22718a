"""Fixtures of the chart tests (helpers in chartlib.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from chartlib import Render, _skip, run_helm
from harness.builds import ensure_helm, environmental


@pytest.fixture(scope="session")
def helm() -> Path:
    try:
        return ensure_helm()
    except RuntimeError as exc:
        if environmental(exc):
            _skip(f"no helm on this machine: {exc}")
        raise


@pytest.fixture(scope="session")
def render(helm: Path) -> Render:
    """render(values_files, sets, release=, namespace=, crds=) -> the rendered documents."""

    def _render(
        values: Sequence[Path] = (),
        sets: Sequence[str] = (),
        release: str = "crimsonbench",
        namespace: str = "crimsonbench",
        crds: bool = False,
    ) -> list[dict[str, Any]]:
        args = ["template", release, ".", "--namespace", namespace]
        for v in values:
            args += ["-f", str(v)]
        for s in sets:
            args += ["--set", s]
        if crds:
            args.append("--include-crds")
        out = run_helm(helm, *args).stdout
        return [d for d in yaml.safe_load_all(out) if d]

    return _render
