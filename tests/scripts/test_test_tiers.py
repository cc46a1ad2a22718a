"""scripts/test_tiers.py: every test lands in exactly one tier whatever markers it carries,
and a tier whose uncached builds do not fit in the rest of the budget is skipped, saying so."""

from __future__ import annotations

import importlib.util
import itertools
import signal
import sys
from pathlib import Path
from types import ModuleType

import pytest
from _pytest.mark.expression import Expression

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "test_tiers.py"


@pytest.fixture()
def tiers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("test_tiers_script", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "CACHE", tmp_path)  # an empty cache: nothing is built
    return mod


def _matches(marker: str, carried: set[str]) -> bool:
    return Expression.compile(marker).evaluate(lambda name, **_: name in carried)


def test_each_marker_combination_runs_in_exactly_one_tier(tiers: ModuleType) -> None:
    heavy = tiers.HEAVIEST_FIRST
    for n in range(len(heavy) + 1):
        for combo in itertools.combinations(heavy, n):
            carried = set(combo)
            hits = [t.name for t in tiers.TIERS if _matches(t.marker, carried)]
            want = next((m for m in heavy if m in carried), "quick")
            assert hits == [want], (carried, hits)


def test_every_heavy_marker_of_pytest_config_has_a_tier(tiers: ModuleType) -> None:
    import tomllib

    config = tomllib.loads((SCRIPT.parents[1] / "pyproject.toml").read_text())
    markers = config["tool"]["pytest"]["ini_options"]["markers"]
    declared = {m.split(":")[0].strip() for m in markers}
    assert declared == set(tiers.HEAVIEST_FIRST)
    assert {t.name for t in tiers.TIERS} == declared | {"quick"}


def test_a_tier_is_skipped_when_its_cold_builds_do_not_fit(tiers: ModuleType) -> None:
    kind = next(t for t in tiers.TIERS if t.name == "kind")
    budget = 84 * 60.0
    cold = kind.need_minutes()
    assert cold > kind.minutes + 30  # every build of it is missing in the empty cache
    why = tiers.skip_reason(kind, budget - (cold - 1) * 60, budget)
    k8s = tiers.BUILDS["k8s control plane"].minutes
    assert f"builds: k8s control plane ~{k8s:g} min" in why and "rook image" in why
    assert "scripts/test.sh --tier kind" in why
    assert tiers.skip_reason(kind, budget - (cold + 1) * 60, budget) == ""
    assert tiers.skip_reason(kind, 10**6, 0.0) == ""  # no budget: always runs
    ceph = next(t for t in tiers.TIERS if t.name == "ceph")
    assert tiers.skip_reason(ceph, 10**6, budget) == ""  # nothing to build: the core runs


def test_cached_builds_count_only_the_tests(tiers: ModuleType) -> None:
    k8s = next(t for t in tiers.TIERS if t.name == "k8s")
    for b in k8s.builds:
        for out in tiers.BUILDS[b].outputs:
            (tiers.CACHE / out).parent.mkdir(parents=True, exist_ok=True)
            (tiers.CACHE / out).touch()
    assert k8s.missing() == [] and k8s.need_minutes() == k8s.minutes


def test_prefetch_builds_each_needed_build_once_in_tier_order(tiers: ModuleType) -> None:
    p = tiers.Prefetch(list(tiers.TIERS), Path("/dev/null"))
    assert p.names[:2] == ["k8s control plane", "helm"]
    assert len(p.names) == len(set(p.names))
    # kind's node image (its build starts and stops our dockerd) is prefetched too; the
    # tier waits for it; a build that outlasts any budget is left to its tier
    assert "kind node image" in p.names and "crimson" not in p.names


def test_the_static_checks_builds_are_prefetched_first(tiers: ModuleType) -> None:
    """Grafana's dashboard linter (a static check) builds for minutes cold: first in the
    background, while ruff and mypy run; the static checks wait for it."""
    p = tiers.Prefetch(list(tiers.TIERS), Path("/dev/null"), static=True)
    assert p.names[:2] == ["dashboard linter", "k8s control plane"]
    (lint,) = [s for s in tiers.STATIC if s[0] == "dashboard-linter"]
    assert lint[2] == ("dashboard linter",) and tiers.BUILDS["dashboard linter"].prefetch


def test_a_prefetched_build_counts_what_is_left_and_its_tier_waits(
    tiers: ModuleType, tmp_path: Path
) -> None:
    """The prefetch's own log says when each build started and ended: the budget counts
    only what is left of a build under way, and a tier waits for its builds to be done."""
    import time

    kind = next(t for t in tiers.TIERS if t.name == "kind")
    p = tiers.Prefetch([kind], tmp_path / "prefetch.log")
    node_image = tiers.BUILDS["kind node image"]
    assert node_image.name in p.names
    assert kind.need_minutes(p) == kind.need_minutes()  # not started: the whole estimate
    # a stand-in for the build commands: the real ones take minutes; the log protocol is
    # the script's own (start() runs exactly these lines)
    for b in p.names:
        tiers.BUILDS[b] = tiers.Build(b, tiers.BUILDS[b].minutes, tiers.BUILDS[b].outputs,
                                      "sleep 1" if b == node_image.name else "true")  # fmt: skip
    p.start()
    try:
        time.sleep(0.5)
        p.wait(kind.builds)
        lines = (tmp_path / "prefetch.log").read_text()
        assert f"== done {node_image.name}: " in lines
        started = [
            ln for ln in lines.splitlines() if ln.startswith(f"== prefetch {node_image.name}: ")
        ]
        assert len(started) == 1
        # seconds into a 25 min build: the budget still counts (nearly) all of it
        assert (
            node_image.minutes - 0.5
            < p.minutes_left(tiers.BUILDS[node_image.name])
            <= node_image.minutes
        )
    finally:
        p.stop()


def test_exitfirst_from_arguments_or_pytest_addopts(
    tiers: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    assert not tiers._exitfirst(["-k", "x"])
    assert tiers._exitfirst(["-x"])
    monkeypatch.setenv("PYTEST_ADDOPTS", "-x -p no:cacheprovider")  # tests/break_product.py
    assert tiers._exitfirst([])


def _sigint_ignored(pid: int) -> bool:
    ignored = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
                   if ln.startswith("SigIgn:"))  # fmt: skip
    return bool(int(ignored.split()[1], 16) & (1 << (signal.SIGINT - 1)))


def test_pytest_child_takes_sigint_even_when_started_with_it_ignored(tiers: ModuleType) -> None:
    """The hard stop sends SIGINT: a tier's pytest must not inherit an ignored SIGINT from
    a background shell."""
    import subprocess

    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `bash -c 'make test' &` does
    try:
        plain = subprocess.Popen(["sleep", "30"])
        fixed = subprocess.Popen(["sleep", "30"], preexec_fn=tiers.interruptible)
    finally:
        signal.signal(signal.SIGINT, old)
    try:
        assert _sigint_ignored(plain.pid)  # the inheritance is real
        assert not _sigint_ignored(fixed.pid)
    finally:
        for p in (plain, fixed):
            p.kill()
            p.wait()
