"""scripts/test_tiers.py's verdict, on real pytest runs of tiny generated test files: a tier
whose tests all skipped is "skipped" and fails make test, a tier the budget cut fails it,
and only the skips the README names as optional (the crimson tier without its build) pass,
their reason printed. Also: UPDATE_GOLDEN outside `make golden`, and the README's list."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "test_tiers.py"
NO_CRIMSON = "no crimson Ceph root at /nowhere (no Debian package ships crimson-osd)"


@pytest.fixture()
def tiers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The script, on a scratch repository (tmp_path/repo) with an empty build cache, no
    static checks but `true`, and no background builds."""
    spec = importlib.util.spec_from_file_location("test_tiers_outcomes", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    markers = "".join(f"    {m}: a tier\n" for m in mod.HEAVIEST_FIRST)
    (repo / "pytest.ini").write_text(f"[pytest]\nmarkers =\n{markers}")
    monkeypatch.setattr(mod, "REPO", repo)
    monkeypatch.setattr(mod, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(mod, "STATIC", (("static", ("true",), ()),))
    monkeypatch.setattr(mod.Prefetch, "start", lambda self: None)  # builds nothing
    for var in ("PYTEST_ADDOPTS", "CB_TEST_TIERS", "CB_TEST_T0", "CB_TEST_BUDGET_MIN",
                "CB_TEST_HARD_MIN", "UPDATE_GOLDEN"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    return mod


def write_tests(mod: ModuleType, name: str, body: str) -> None:
    (mod.REPO / "tests" / name).write_text("import pytest\n\n" + body)


def built(mod: ModuleType, build: str) -> None:
    for out in mod.BUILDS[build].outputs:
        (mod.CACHE / out).parent.mkdir(parents=True, exist_ok=True)
        (mod.CACHE / out).touch()
    assert mod.BUILDS[build].cached()


def run(mod: ModuleType, capfd: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    rc = mod.main(list(argv))
    return rc, capfd.readouterr().out


def summary(out: str) -> str:
    return out[out.index("\n== tiers") :]


def test_a_tier_whose_tests_all_skipped_is_skipped_and_fails(
    tiers: ModuleType, capfd: pytest.CaptureFixture[str]
) -> None:
    write_tests(tiers, "test_a.py", (
        "def test_one():\n    pytest.skip('no widget on this machine')\n\n"
        "def test_two():\n    pytest.skip('no widget on this machine')\n"
    ))  # fmt: skip
    rc, out = run(tiers, capfd, "--tier", "quick")
    table = summary(out)
    assert rc == 1
    assert "quick    skipped " in table and "passed" not in table.split("total")[0]
    assert "SKIP NOT ALLOWED: tests.test_a::test_one: no widget on this machine" in table
    assert "== FAILED" in table


def test_one_skip_that_is_not_optional_fails_a_passing_tier(
    tiers: ModuleType, capfd: pytest.CaptureFixture[str]
) -> None:
    write_tests(tiers, "test_a.py", (
        "def test_runs():\n    assert True\n\n"
        "def test_skips():\n    pytest.skip('the network is down')\n"
    ))  # fmt: skip
    rc, out = run(tiers, capfd, "--tier", "quick")
    assert rc == 1
    assert "SKIPS NOT ALLOWED (1 passed, 1 skipped)" in summary(out)
    assert "SKIP NOT ALLOWED: tests.test_a::test_skips: the network is down" in summary(out)


def test_a_passing_tier_passes_and_a_failing_one_fails(
    tiers: ModuleType, capfd: pytest.CaptureFixture[str]
) -> None:
    write_tests(tiers, "test_a.py", "def test_one():\n    assert True\n")
    write_tests(tiers, "test_b.py", "@pytest.mark.ceph\ndef test_two():\n    assert False\n")
    rc, out = run(tiers, capfd, "--tier", "quick")
    assert rc == 0 and "quick    passed (1 passed)" in summary(out)
    assert "== every tier ran and passed" in out
    rc, out = run(tiers, capfd, "--tier", "ceph")
    assert rc == 1 and "ceph     FAILED (1 failed, 0 passed)" in summary(out)


def test_the_crimson_tier_without_its_build_is_optional_and_says_why(
    tiers: ModuleType, capfd: pytest.CaptureFixture[str]
) -> None:
    write_tests(tiers, "test_c.py", (
        f"@pytest.mark.crimson\ndef test_c():\n    pytest.skip({NO_CRIMSON!r})\n\n"
        f"@pytest.mark.crimson\n@pytest.mark.kind\ndef test_ck():\n"
        f"    pytest.skip('kind + crimson cannot run here: ' + {NO_CRIMSON!r})\n"
    ))  # fmt: skip
    assert not tiers.BUILDS["crimson"].cached()
    rc, out = run(tiers, capfd, "--tier", "crimson")
    table = summary(out)
    assert rc == 0, out
    assert "crimson  skipped (optional)" in table
    assert (
        "optional skip (the crimson tier without its build), 2 test(s), e.g. tests.test_c::test_c"
        in table
    )
    assert "e2e/build-crimson.sh 20.2.4 && e2e/crimson/build-ceph-root.sh 20.2.4" in table
    assert "== every tier ran and passed (optional skips above)" in table

    built(tiers, "crimson")  # the same skip is no longer the machine's: a defect
    rc, out = run(tiers, capfd, "--tier", "crimson")
    assert rc == 1 and "SKIP NOT ALLOWED: tests.test_c::test_c" in summary(out)


def _budget_run(
    tiers: ModuleType, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str]:
    write_tests(tiers, "test_q.py", "def test_q():\n    assert True\n")
    monkeypatch.setenv("CB_TEST_BUDGET_MIN", "0.001")  # nothing with a build to do fits
    return run(tiers, capfd)


def test_a_tier_the_budget_cut_fails_make_test(
    tiers: ModuleType, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tiers, "TIERS", tuple(t for t in tiers.TIERS
                                              if t.name in ("quick", "kind")))  # fmt: skip
    rc, out = _budget_run(tiers, capfd, monkeypatch)
    table = summary(out)
    assert rc == 1
    assert "quick    passed (1 passed)" in table
    assert "kind     SKIPPED (budget)" in table
    assert "run it alone: scripts/test.sh --tier kind" in table
    assert "a tier the budget cut was not tested: make test fails" in table


def test_the_crimson_tier_cut_by_the_budget_is_optional_only_without_its_build(
    tiers: ModuleType, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tiers, "TIERS", tuple(t for t in tiers.TIERS
                                              if t.name in ("quick", "crimson")))  # fmt: skip
    rc, out = _budget_run(tiers, capfd, monkeypatch)
    table = summary(out)
    assert rc == 0, out
    assert "crimson  skipped (budget, optional)" in table
    assert "optional (the crimson tier without its build): no Debian package" in table

    built(tiers, "crimson")  # but its other builds do not fit: not optional any more
    rc, out = _budget_run(tiers, capfd, monkeypatch)
    assert rc == 1 and "crimson  SKIPPED (budget)" in summary(out)


def test_the_runner_refuses_update_golden(
    tiers: ModuleType, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UPDATE_GOLDEN", "1")
    rc, out = run(tiers, capfd)
    assert rc == 2 and "`make golden` rewrites them on purpose" in out


def test_update_golden_outside_make_golden_fails_the_golden_tests() -> None:
    golden = sorted((ROOT / "tests" / "manifests" / "golden").iterdir())
    before = {p: p.read_bytes() for p in golden}
    env = {k: v for k, v in os.environ.items() if k != "CRIMSONBENCH_GOLDEN_TARGET"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/manifests/test_manifests_fio.py::test_golden_fio_server_driver_and_step"],
        cwd=ROOT, env={**env, "UPDATE_GOLDEN": "1"}, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "UPDATE_GOLDEN is set outside `make golden`" in proc.stdout
    assert {p: p.read_bytes() for p in golden} == before  # nothing rewritten


def test_every_optional_skip_is_named_in_the_readme_and_matches_its_test(
    tiers: ModuleType,
) -> None:
    readme = " ".join((ROOT / "README.md").read_text().split())
    for o in tiers.OPTIONAL:
        assert o.name in readme, o.name
    # the reasons are the tests' own words (a reworded skip would stop being optional)
    said = {
        "no crimson Ceph root at": ("tests/crimson/conftest.py", "e2e/harness/rook.py"),
        "the published tables (shared/seeds/001_*)": ("tests/plan/test_knee_search.py",),
        "a crimson binary is installed here": ("tests/local/test_local_run.py",),
        "a crimson OSD binary is installed here": ("tests/local/test_local_cluster.py",),
    }
    for o in tiers.OPTIONAL:
        for reason in o.reasons:
            if reason != tiers.BUDGET:
                for path in said[reason]:
                    assert reason in (ROOT / path).read_text(), (reason, path)
