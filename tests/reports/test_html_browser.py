"""The HTML reports of the real results fixture, and of a compare of it against itself,
in a real headless browser (Debian's chromium, tests/helpers/browser.py) at 1280 px: a
screenshot that is not blank, every section in the DOM, nothing on the console, nothing
wider than the window. A broken page proves each of those checks fires.

CRIMSONBENCH_SCREENSHOTS=docs/screenshots keeps the two screenshots (README's figures),
reduced to a 64-colour palette to stay small."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from browser import WIDTH, Rendered, chromium, render
from fixture_reports import FixtureReports
from PIL import Image
from results_fixture import FIXTURE, STEP_IDS, load, result_path

from crimsonbench.reports.html import (
    COMPARISON_SECTIONS,
    RUN_SECTIONS,
    comparison_anchor,
    workload_anchor,
)
from crimsonbench.reports.study import STUDY_SECTIONS

# A report's first 2000 px are tables, text and a plot: ~10 % ink here. A blank or
# unstyled-error page has next to none.
MIN_INK = 0.03
SCREENSHOTS = "CRIMSONBENCH_SCREENSHOTS"


@pytest.fixture(scope="module")
def binary() -> str:
    path = chromium()
    if path is None:
        pytest.fail("chromium is not installed: scripts/setup.sh installs it")
    return path


def workloads() -> list[str]:
    return list(dict.fromkeys(load(result_path(FIXTURE, s))["workload"] for s in STEP_IDS))


def problems(r: Rendered, sections: Sequence[str]) -> list[str]:
    """What a person would find wrong with the page, one line each."""
    out = [f"console: {line}" for line in r.console]
    if r.ink() < MIN_INK:
        out.append(f"blank: {r.ink():.1%} of the screenshot is not white")
    out += [f"missing section: {s}" for s in sections if f'id="{s}"' not in r.dom]
    if r.scroll_width < 0:
        out.append("the width probe did not run")
    elif r.scroll_width > WIDTH or r.scroll_width > r.viewport_width:
        out.append(f"wider than the window: {r.scroll_width} px > {r.viewport_width} px")
    return out


def keep_screenshot(r: Rendered, name: str) -> None:
    where = os.environ.get(SCREENSHOTS)
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        image = Image.open(r.screenshot).convert("RGB").quantize(colors=64)
        image.save(Path(where) / name, optimize=True)


def test_the_run_report_in_a_browser(
    fixture_reports: FixtureReports, binary: str, tmp_path: Path
) -> None:
    r = render(fixture_reports.report, tmp_path, binary)
    sections = [*RUN_SECTIONS, *(workload_anchor(w) for w in workloads())]
    assert problems(r, sections) == []
    size = fixture_reports.report.stat().st_size
    print(f"\nreport.html {size / 1024:.0f} KiB, chromium {r.seconds:.1f} s, ink {r.ink():.1%}")
    keep_screenshot(r, "report.png")


def test_the_comparison_in_a_browser(
    fixture_reports: FixtureReports, binary: str, tmp_path: Path
) -> None:
    r = render(fixture_reports.comparison, tmp_path, binary)
    sections = [*COMPARISON_SECTIONS, *(comparison_anchor(w) for w in workloads())]
    assert problems(r, sections) == []
    size = fixture_reports.comparison.stat().st_size
    print(f"\ncomparison.html {size / 1024:.0f} KiB, chromium {r.seconds:.1f} s")
    keep_screenshot(r, "comparison.png")


def test_the_study_comparison_in_a_browser(
    fixture_reports: FixtureReports, binary: str, tmp_path: Path
) -> None:
    r = render(fixture_reports.study, tmp_path, binary)
    sections = [*STUDY_SECTIONS, *COMPARISON_SECTIONS,
                *(comparison_anchor(w) for w in workloads())]  # fmt: skip
    assert problems(r, sections) == []
    size = fixture_reports.study.stat().st_size
    print(f"\nstudy comparison.html {size / 1024:.0f} KiB, chromium {r.seconds:.1f} s")
    keep_screenshot(r, "study.png")


def test_each_check_fires_on_a_broken_page(binary: str, tmp_path: Path) -> None:
    """White, wider than the window, an error on the console, a fetch the policy refuses,
    and no section: every check says so."""
    page = tmp_path / "broken.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'\"><title>x</title></head>"
        '<body><div style="width:2000px;height:10px"></div>'
        '<img src="https://example.invalid/x.png">'
        "<script>console.error('deliberate error')</script></body></html>"
    )
    r = render(page, tmp_path / "out", binary)
    found = problems(r, ["run"])
    assert any("deliberate error" in p for p in found), found
    assert any("https://example.invalid/x.png" in p and "Content Security Policy" in p
               for p in found), found  # fmt: skip
    assert any(p.startswith("blank:") for p in found), found
    assert "missing section: run" in found
    assert any(p.startswith("wider than the window: 20") for p in found), found  # 2000 + margin
