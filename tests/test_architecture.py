"""Shape rules import-linter cannot express: no module uses another module's private
names, and no module of the package grows past ~400 lines (split by what it builds)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "operator" / "crimsonbench"
MAX_LINES = 420


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "egg-info" not in str(p))


def private_imports(path: Path) -> list[str]:
    """`from crimsonbench.x import _name` and `crimsonbench.x._name` attribute uses."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("crimsonbench"):
            found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    offenders = {str(p.relative_to(PACKAGE)): private_imports(p) for p in modules()}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_check_finds_a_planted_private_import(tmp_path: Path) -> None:
    planted = tmp_path / "m.py"
    planted.write_text("from crimsonbench.plan.ceph_options import _NAMES\n")
    assert private_imports(planted) == ["crimsonbench.plan.ceph_options._NAMES"]


def test_no_module_is_over_the_size_limit() -> None:
    sizes = {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in modules()}
    assert {k: n for k, n in sizes.items() if n > MAX_LINES} == {}
