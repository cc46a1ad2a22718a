"""scripts/lint-dashboards.sh (a static check of make test): Grafana's own dashboard linter
passes our dashboards and bites on a broken one; our build of it holds no Grafana or Loki
code (e2e/build-dashboard-linter.sh; make test's static checks build it first, cached)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "lint-dashboards.sh"
RUN_BOARD = ROOT / "dashboards" / "crimsonbench-run.json"


def lint(*boards: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *map(str, boards)], capture_output=True, text=True,
                          timeout=1800, check=False)  # fmt: skip


def test_our_dashboards_pass_the_linter() -> None:
    proc = lint()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count(": clean") == len(list((ROOT / "dashboards").glob("*.json")))


def test_the_linter_bites_on_a_broken_dashboard(tmp_path: Path) -> None:
    board = json.loads(RUN_BOARD.read_text())
    board["editable"] = True
    panel = next(p for p in board["panels"] if p["title"] == "Since last progress")
    panel["fieldConfig"]["defaults"].pop("unit")
    panel["targets"][0]["expr"] = "time() - crimsonbench_run_last_progress_timestamp_seconds"
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(board))
    proc = lint(broken)
    assert proc.returncode == 1
    assert "is editable, it should be set to 'editable: false'" in proc.stderr
    assert "panel 'Since last progress' has no or invalid units defined" in proc.stderr
    assert "job selector not found" in proc.stderr
    assert f"{broken}: the dashboard linter found the above" in proc.stderr


def test_a_loki_target_fails_rather_than_passing_unlinted(tmp_path: Path) -> None:
    """Our build has no LogQL parser: a Loki query is an error, never a silent pass."""
    board = json.loads(RUN_BOARD.read_text())
    panel = next(p for p in board["panels"] if p["title"] == "Since last progress")
    panel["targets"][0]["datasource"] = {"type": "loki", "uid": "${datasource}"}
    board["panels"] = [panel]
    path = tmp_path / "loki.json"
    path.write_text(json.dumps(board))
    proc = lint(path)
    assert proc.returncode == 1
    assert "this build of the linter has no LogQL parser" in proc.stderr


def test_the_built_linter_holds_no_grafana_or_loki_code() -> None:
    binary = subprocess.run([str(ROOT / "e2e" / "build-dashboard-linter.sh")],
                            capture_output=True, text=True, timeout=1800, check=True)  # fmt: skip
    modules = subprocess.run(["go", "version", "-m", binary.stdout.strip()], capture_output=True,
                             text=True, timeout=60, check=True).stdout  # fmt: skip
    deps = [ln.split()[1] for ln in modules.splitlines() if ln.split()[:1] == ["dep"]]
    assert deps, modules
    assert not [
        d for d in deps if d.startswith(("github.com/grafana/grafana", "github.com/grafana/loki"))
    ]
