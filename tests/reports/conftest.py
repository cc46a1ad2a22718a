"""Reports rendered once per session for the HTML unit and browser tests."""

from __future__ import annotations

import pytest
from fixture_reports import FixtureReports, render_fixture_reports


@pytest.fixture(scope="session")
def fixture_reports(tmp_path_factory: pytest.TempPathFactory) -> FixtureReports:
    return render_fixture_reports(tmp_path_factory.mktemp("html"))
