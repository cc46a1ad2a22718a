"""Shape rules import-linter cannot express: no module uses another module's private
names, and no module of the package grows past ~400 lines (split by what it builds); and
import-linter's own contracts shown to bite on a planted import."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "operator" / "crimsonbench"
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


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter with the repository's contracts on the package copied under ROOT."""
    return subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache",
         "--config", str(REPO / "pyproject.toml")],
        cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("module", "planted", "contract"),
    [
        # the pure planner reaching an executor: both the layers and the no-I/O contract
        ("plan/cpu.py", "import crimsonbench.controller.kube", "The pure core does no I/O"),
        # results importing a report (a higher layer)
        ("results/types.py", "import crimsonbench.reports.tables", "Data flows one way"),
        # the Rook logic importing kopf
        ("controller/osd_restarts.py", "import kopf", "Only the operator's wiring knows kopf"),
    ],
)
def test_the_contracts_catch_a_planted_import(
    tmp_path: Path, module: str, planted: str, contract: str
) -> None:
    pkg = tmp_path / "crimsonbench"
    shutil.copytree(PACKAGE, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    assert _lint_imports(tmp_path).returncode == 0  # the copy as it is keeps every contract
    target = pkg / module
    target.write_text(f"{planted}  # planted\n{target.read_text()}")
    got = _lint_imports(tmp_path)
    assert got.returncode != 0, got.stdout
    broken = got.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken, got.stdout
