"""Shape rules import-linter cannot express: no module uses another module's private
names, no module of the package or of the e2e harness grows past 400 lines (split by what
it builds) nor a function past 60 (STYLE.md), nothing
reads settings or the environment when it is imported; and import-linter's own contracts
shown to bite on a planted import, each of them."""

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
HARNESS = REPO / "e2e" / "harness"
MAX_LINES = 400
MAX_FUNCTION_LINES = 60


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "egg-info" not in str(p))


def sized() -> list[Path]:
    """What the size rules hold: the package and the e2e harness the tests run on."""
    return [*modules(), *sorted(HARNESS.glob("*.py"))]


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


def reads_at_import(path: Path) -> list[str]:
    """Calls at a module's top level (class bodies too: they run at import) that read
    settings or the environment: Settings(...), os.environ / os.getenv."""
    found = []
    body = list(ast.parse(path.read_text()).body)
    while body:
        node = body.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if isinstance(node, ast.ClassDef):
            body += node.body
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and getattr(sub.func, "id", "") == "Settings":
                found.append(f"line {sub.lineno}: Settings()")
            if isinstance(sub, ast.Attribute) and sub.attr in ("environ", "getenv"):
                found.append(f"line {sub.lineno}: os.{sub.attr}")
    return found


def test_nothing_reads_settings_or_the_environment_at_import() -> None:
    offenders = {str(p.relative_to(PACKAGE)): reads_at_import(p) for p in modules()}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_import_time_check_finds_a_planted_read(tmp_path: Path) -> None:
    planted = tmp_path / "m.py"
    planted.write_text("import os\nTICK = Settings().tick_seconds\n"
                       "class A:\n    home = os.environ['HOME']\n"
                       "def fine():\n    return Settings()\n")  # fmt: skip
    assert sorted(reads_at_import(planted)) == ["line 2: Settings()", "line 4: os.environ"]


def test_no_module_is_over_the_size_limit() -> None:
    sizes = {str(p.relative_to(REPO)): len(p.read_text().splitlines()) for p in sized()}
    assert {k: n for k, n in sizes.items() if n > MAX_LINES} == {}


def long_functions(path: Path) -> dict[str, int]:
    """module:function -> lines, of every function (methods and nested ones too) longer
    than MAX_FUNCTION_LINES, its decorators and signature counted."""
    found = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines = (node.end_lineno or node.lineno) - start + 1
            if lines > MAX_FUNCTION_LINES:
                found[f"{path.name}:{node.name}"] = lines
    return found


def test_no_function_is_over_the_size_limit() -> None:
    assert {k: n for p in sized() for k, n in long_functions(p).items()} == {}


def test_the_function_check_finds_a_planted_long_function(tmp_path: Path) -> None:
    def lines(n: int, indent: str) -> str:
        return "".join(f"{indent}x{i} = {i}\n" for i in range(n))

    planted = tmp_path / "long.py"
    planted.write_text(  # 60 lines exactly, then a method of 61
        "def fits():\n" + lines(MAX_FUNCTION_LINES - 1, "    ")
        + "\n\nclass C:\n    def grown(self):\n" + lines(MAX_FUNCTION_LINES, "        ")
    )  # fmt: skip
    assert long_functions(planted) == {"long.py:grown": MAX_FUNCTION_LINES + 1}


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
        # kopf anywhere but the wiring (protected: not an allow-list of modules)
        ("controller/osd_restarts.py", "import kopf", "Only the operator's wiring knows kopf"),
        ("metrics.py", "import kopf", "Only the operator's wiring knows kopf"),
        # the wiring imported by the stages (kopf would reach them through it)
        ("controller/stages.py", "import crimsonbench.controller.main",
         "Nothing imports the operator's wiring"),
        # a decision reading the clock, or the API client
        ("controller/decisions/step_decide.py", "import time", "The operator's decisions are pure"),
        ("controller/decisions/rollout.py", "import crimsonbench.controller.kube",
         "The operator's decisions are pure"),
        # a decision module created today is held by the package-wide contracts at once
        ("controller/decisions/new_rule.py", "import crimsonbench.controller.run_context",
         "The operator's decisions are pure"),
        ("controller/decisions/new_rule.py", "import os", "A decision reads no environment"),
        # the I/O layer taking its types from a decision module
        ("controller/kube.py", "import crimsonbench.controller.decisions.rollout",
         "The I/O layer returns observed types"),
        # the pure planner reaching the operator's targets (namespaces, RBAC)
        ("plan/build.py", "import crimsonbench.manifests.targets",
         "The pure planner knows nothing of the operator"),
    ],
)  # fmt: skip
def test_the_contracts_catch_a_planted_import(
    tmp_path: Path, module: str, planted: str, contract: str
) -> None:
    pkg = tmp_path / "crimsonbench"
    shutil.copytree(PACKAGE, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    assert _lint_imports(tmp_path).returncode == 0  # the copy as it is keeps every contract
    target = pkg / module
    before = target.read_text() if target.exists() else ""  # or a module made today
    target.write_text(f"{planted}  # planted\n{before}")
    got = _lint_imports(tmp_path)
    assert got.returncode != 0, got.stdout
    broken = got.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken, got.stdout
