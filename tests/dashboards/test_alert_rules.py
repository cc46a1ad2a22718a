"""dashboards/rules.yaml: valid for Prometheus (promtool check) and doing what it says
(promtool unit tests in dashboards/rules_test.yaml)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"


def _promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool not installed (Debian package prometheus; scripts/setup.sh)")
    return path


def test_rules_check() -> None:
    out = subprocess.run(
        [_promtool(), "check", "rules", str(DASHBOARDS / "rules.yaml")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 4 rules found" in out.stdout


def test_rules_unit_tests() -> None:
    out = subprocess.run(
        [_promtool(), "test", "rules", "rules_test.yaml"],
        capture_output=True, text=True, cwd=DASHBOARDS,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


def test_rules_are_plain_yaml_for_the_chart() -> None:
    """The Helm chart embeds the file with .Files.Get: no template syntax of its own,
    and every alert has a summary."""
    text = (DASHBOARDS / "rules.yaml").read_text()
    assert "{{-" not in text and ".Values" not in text and ".Release" not in text
    groups = yaml.safe_load(text)["groups"]
    alerts = {r["alert"]: r for g in groups for r in g["rules"]}
    assert set(alerts) == {
        "CrimsonbenchRunFailed", "CrimsonbenchRunStuck",
        "CrimsonbenchCpuOverlap", "CrimsonbenchReconcileErrors",
    }  # fmt: skip
    assert all(r["annotations"]["summary"] for r in alerts.values())
