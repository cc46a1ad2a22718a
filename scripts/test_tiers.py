"""The whole test suite as tiers, cheapest and most telling first, inside CI's time.

Why tiers and a time limit: on a fresh 2-core machine the real parts are built first
(Kubernetes ~11 min, our images 5, kind's node image ~8, helm 3.5, Rook ~4.5, the
monitoring images 4: ~35 min of builds, bench/RESULTS.md "cold make test") and the tests
take ~40 min more, against CI's 90. Each heavy tier starts only when its builds not done
yet plus its tests can end before the hard stop (CB_TEST_BUDGET_MIN, 84: CI stops at 90,
pytest is interrupted at CB_TEST_HARD_MIN, 86, and tears down); otherwise it is skipped
with the reason and the command that runs it. The estimates are measured cold, beside the
other tiers (the figures below), so on a fresh machine of ours every tier but crimson runs:
the time limit is for a machine much slower than ours, never the reason a fresh one fails.

A green summary means every tier ran and passed. A tier cut by the budget, a tier whose
tests all skipped ("skipped", never "passed") and any single skipped test make the summary
exit non-zero, unless the skip is one of OPTIONAL: named in the README ("Optional here"),
true on this machine (checked here, not taken from the test's word), its reason printed.
Outcomes are read from pytest's own junit XML report, per tier.

The builds a run will need are started at once in the background at the lowest CPU and I/O
priority (`nice 19`, `ionice idle`): they soak up the CPU the quick and Ceph tiers leave
idle without slowing them. Each build script takes a lock and is idempotent, so a tier
that reaches a build still running waits for it instead of building twice.

    scripts/test.sh                       # static checks + every tier that fits
    scripts/test.sh --tier kind           # one tier, no budget (also: --tier quick ...)
    scripts/test.sh tests/plan -k topo    # plain pytest arguments: no tiers
    CB_TEST_BUDGET_MIN=0 scripts/test.sh  # every tier, however long it takes
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("CRIMSONBENCH_CACHE", Path.home() / ".cache" / "crimsonbench"))
K8S = "k8s/v1.36.3/bin"
# Which Rook the kind tier runs is the harness's one setting (e2e/harness/rook.py): its
# builds are keyed by it, and every tier's pytest is told the same one.
sys.path.insert(0, str(REPO / "e2e"))
from harness import rook as rook_release  # noqa: E402

ROOK = rook_release.RELEASE
# the release's operator binary and image (with our fio runner on its Ceph client from
# Ceph 20 on), built as the harness would, told the release
_ROOK_ENV = " ".join(f"{k}={shlex.quote(v)}" for k, v in rook_release.build_env().items())
_ROOK_IMAGE_OUTPUTS = (
    f"images/rook-ceph-{ROOK.version}-{ROOK.ceph}.tar",
    *([f"images/crimsonbench-fio-{rook_release.RELEASE_FIO_TAG}.tar"]
      if rook_release.RELEASE_FIO_TAG else []),
)  # fmt: skip


@dataclass(frozen=True)
class Build:
    """Something built once per machine and cached; `outputs` all present = cached."""

    name: str
    minutes: float  # cold, 2 cores
    outputs: tuple[str, ...]  # relative to the cache root
    command: str  # what builds it (shell; the background prefetch runs it)
    prefetch: bool = True  # False: it starts a daemon, or takes longer than any budget

    def cached(self) -> bool:
        return all((CACHE / o).exists() for o in self.outputs)


_K8S_CP = "kube-apiserver kube-controller-manager kube-scheduler"
# minutes: cold, on 2 cores, in the background beside the quick, ceph and k8s tiers (a
# fresh machine, 2026-11-28, bench/RESULTS.md "cold make test"; rounded up)
BUILDS = {
    b.name: b
    for b in (
        Build("k8s control plane", 11, tuple(f"{K8S}/{c}" for c in ("etcd", *_K8S_CP.split())),
              f"K8S_COMPONENTS='{_K8S_CP}' e2e/build-k8s-binaries.sh"),
        Build("kubelet", 1, (f"{K8S}/kubelet",),
              f"K8S_COMPONENTS='{_K8S_CP} kubelet' e2e/build-k8s-binaries.sh"),
        Build("helm", 3.5, ("helm/v3.22.0/bin/helm",), "e2e/build-helm.sh"),
        Build("our images", 5, ("images/crimsonbench-fio-dev.tar",
                                "images/crimsonbench-operator-dev.tar"), "e2e/build-images.sh"),
        # v1.17.8 3 min, v1.20.6 (from its source, more modules) 5.7
        Build("rook", 6 if ROOK.from_source else 3, (f"rook/{ROOK.version}/bin/rook",),
              f"{_ROOK_ENV} e2e/build-rook.sh"),
        # trixie's reef 1.5 min; sid's tentacle + our fio runner on its client 4.2
        Build("rook image", 4.5 if rook_release.RELEASE_FIO_TAG else 1.5, _ROOK_IMAGE_OUTPUTS,
              f"{_ROOK_ENV} e2e/rook/build-image.sh"),
        # the kind run's monitoring chain: prometheus-operator v0.93.0 + Debian trixie's
        # prometheus image (on Rook's trixie base)
        Build("monitoring images", 4, ("images/monitoring-v0.93.0-trixie.tar",),
              "e2e/monitoring/build-images.sh"),
        # the kind nodes' NetworkPolicy agent, with our NFQUEUE patch (kind's node image
        # builds it too; cold: ~224 CPU-s, 9.6 min on a busy machine: bench/RESULTS.md,
        # "kube-network-policies")
        Build("kube-network-policies", 4,
              ("kube-network-policies/v0.8.0+xt-nfqueue-1/bin/kube-network-policies",),
              "e2e/build-kube-network-policies.sh"),
        # starts our dockerd and stops it when done: its tier waits for the prefetch to
        # finish it (tier_builds_ready) so the daemon is never stopped under the tests
        Build("kind node image", 8.5, ("kind/v0.33.0/bin/kind", f"{K8S}/kubeadm",
                                       f"{K8S}/kube-proxy", "kind/images/v1.36.3"),
              "e2e/kind/build-kind.sh > /dev/null && e2e/kind/build-node-image.sh"),
        # its crimson-osd, and the marker build-ceph-root.sh leaves once the root is whole
        # (crimson-osd lands first, its libraries after)
        Build("crimson", 120, ("ceph-root/20.2.4/rootfs/usr/bin/crimson-osd",
                               "ceph-root/20.2.4/.done-crimson"),
              "e2e/build-crimson.sh 20.2.4 && e2e/crimson/build-ceph-root.sh 20.2.4",
              prefetch=False),
        # for the static checks (scripts/lint-dashboards.sh): first in the prefetch, the
        # static checks wait for it
        Build("dashboard linter", 1.5, ("dashboard-linter/v0.2.0/bin/dashboard-linter",),
              "e2e/build-dashboard-linter.sh"),
    )
}  # fmt: skip

# A test belongs to the tier of the heaviest marker it carries.
HEAVIEST_FIRST = ("crimson", "kind", "k8s", "ceph")


@dataclass(frozen=True)
class Tier:
    name: str
    minutes: float  # the tests alone, everything built (warm)
    builds: tuple[str, ...]

    @property
    def marker(self) -> str:
        if self.name == "quick":
            return f"not ({' or '.join(HEAVIEST_FIRST)})"
        heavier = HEAVIEST_FIRST[: HEAVIEST_FIRST.index(self.name)]
        return f"{self.name} and not ({' or '.join(heavier)})" if heavier else self.name

    def missing(self) -> list[Build]:
        return [BUILDS[b] for b in self.builds if not BUILDS[b].cached()]

    def need_minutes(self, prefetch: Prefetch | None = None) -> float:
        """The tests + what is left of its uncached builds (less what the background
        prefetch has done of them already)."""
        left = (prefetch.minutes_left(b) if prefetch else b.minutes for b in self.missing())
        return self.minutes + sum(left)


# Run order = priority: what tells most about the product per minute first. minutes: the
# tests alone, measured cold beside the background builds (bench/RESULTS.md), rounded up.
TIERS = (
    Tier("quick", 4, ()),
    Tier("ceph", 14, ()),
    # the real API server, and the chart through the real helm
    Tier("k8s", 4, ("k8s control plane", "helm")),
    # Rook in kind with our chart: what Rook does with a CephCluster, our operator's faults
    # and a BenchmarkRun across two nodes, on one shared stack (took over the real-node
    # tiers "node" and "rook")
    Tier("kind", 32, ("k8s control plane", "kubelet", "helm", "our images", "rook",
                      "rook image", "monitoring images", "kube-network-policies",
                      "kind node image")),
    # a cold crimson build alone is longer than CI: built by hand, then this tier runs
    # (tests/crimson, and crimson on Rook in kind: tests/kind/test_kind_rook_crimson.py,
    # test_kind_rook_crimson_stores.py: cyanstore and seastore, bench/RESULTS.md)
    Tier("crimson", 30, ("crimson", "k8s control plane", "kubelet", "helm", "our images",
                         "kube-network-policies", "kind node image")),
)  # fmt: skip


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


PREFETCH_PGID = "CB_PREFETCH_PGID"


class Prefetch:
    """The builds the tiers will need, one after another, in tier order (the static checks'
    first), at idle priority."""

    def __init__(self, tiers: list[Tier], log: Path, static: bool = False) -> None:
        names: list[str] = [b for _, _, builds in STATIC for b in builds] if static else []
        for t in tiers:
            names += [b for b in t.builds if b not in names and BUILDS[b].prefetch]
        self.names = [n for n in names if not BUILDS[n].cached()]
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if not self.names:
            return
        script = [
            f'echo "== prefetch {n}: $(date +%s)"; ( {BUILDS[n].command} ) >/dev/null || '
            f"echo '!! prefetch {n} failed: its tier builds it again and says why'; "
            f'echo "== done {n}: $(date +%s)"'
            for n in self.names
        ]
        print(f"== prefetch, in the background at idle priority (log {self.log}): "
              f"{', '.join(self.names)}", flush=True)  # fmt: skip
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                ["nice", "-n", "19", "ionice", "-c", "3", "bash", "-c", "; ".join(script)],
                cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        # the tests that need a quiet machine (tests/helpers/quiet.py) pause it meanwhile
        os.environ[PREFETCH_PGID] = str(self.proc.pid)

    def _lines(self) -> list[str]:
        try:
            return self.log.read_text(errors="replace").splitlines()
        except OSError:
            return []

    def minutes_left(self, build: Build) -> float:
        """Its cold estimate less the time the prefetch has spent on it (at least 1)."""
        if build.name not in self.names or self.proc is None:
            return build.minutes
        prefix = f"== prefetch {build.name}: "
        started = [float(ln[len(prefix) :]) for ln in self._lines() if ln.startswith(prefix)]
        if not started:
            return build.minutes
        return max(build.minutes - (time.time() - started[-1]) / 60, 1.0)

    def wait(self, builds: tuple[str, ...]) -> None:
        """Until the prefetch is done with BUILDS (or ended): a tier never starts beside a
        background build of its own inputs (the kind node image's build stops the dockerd
        it started)."""
        pending = [b for b in builds if b in self.names]
        if not pending or self.proc is None:
            return
        t0 = time.time()
        while self.proc.poll() is None and not all(
            any(ln.startswith(f"== done {b}: ") for ln in self._lines()) for b in pending
        ):
            time.sleep(5)
        if time.time() - t0 > 10:
            print(f"== waited {_minutes(time.time() - t0)} for the prefetch of "
                  f"{', '.join(pending)}", flush=True)  # fmt: skip

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            # the build scripts stop on SIGTERM and pick up where they were on the next call
            os.killpg(self.proc.pid, signal.SIGTERM)
            os.killpg(self.proc.pid, signal.SIGCONT)  # a test killed while it paused it
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


# (name, command, the builds it needs)
STATIC: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("ruff", ("ruff", "check", "operator", "tests", "bench", "e2e", "dashboards", "scripts"), ()),
    ("mypy", ("mypy",), ()),
    ("import-linter", ("lint-imports",), ()),
    # Grafana's own dashboard linter on dashboards/*.json (exclusions: dashboards/.lint)
    ("dashboard-linter", ("scripts/lint-dashboards.sh",), ("dashboard linter",)),
)


@dataclass(frozen=True)
class OptionalSkip:
    """A skip make test accepts. Each is named in the README ("Optional here"), and holds
    only where `applies()` finds its cause on this machine; its reason is printed."""

    name: str
    tiers: tuple[str, ...]  # where it may happen
    reasons: tuple[str, ...]  # one is in pytest's skip reason ("budget": the tier was cut)
    why: str  # printed in the summary
    applies: Callable[[], bool]

    def allows(self, tier: str, reason: str) -> bool:
        return tier in self.tiers and any(r in reason for r in self.reasons) and self.applies()


def _crimson_missing() -> bool:
    return not BUILDS["crimson"].cached()


_CRIMSON = "the crimson tier without its build"
_CRIMSON_WHY = (
    "no Debian package ships crimson-osd and building it takes ~2 h on 2 cores, never inside "
    f"make test's budget: `{BUILDS['crimson'].command}`, then scripts/test.sh --tier crimson"
)
BUDGET = "<cut by the time budget>"  # the reason budget_skip() asks about
OPTIONAL = (
    OptionalSkip(_CRIMSON, ("crimson",), (BUDGET,), _CRIMSON_WHY, _crimson_missing),
    OptionalSkip(
        _CRIMSON, ("crimson",), ("no crimson Ceph root at",), _CRIMSON_WHY, _crimson_missing
    ),
    # tests/plan/test_knee_search.py: the blog's tables are project input beside the
    # repository (../shared/seeds), not in it: a clone elsewhere has none
    OptionalSkip(
        "the published-curves test without ../shared/seeds",
        ("quick",),
        ("the published tables (shared/seeds/001_*)",),
        "the published tables are not beside this clone (../shared/seeds)",
        lambda: not list((REPO.parent / "shared" / "seeds").glob("001_*.txt")),
    ),
    # tests/local: tests of crimson's absence, on a machine with a crimson-osd on PATH
    OptionalSkip(
        "the tests of crimson's absence where a crimson-osd is on PATH",
        ("quick", "ceph"),
        ("a crimson binary is installed here", "a crimson OSD binary is installed here"),
        "a crimson OSD binary is on PATH here: the tests of its absence cannot run",
        lambda: any(shutil.which(b) for b in ("crimson-osd", "ceph-osd-crimson")),
    ),
)


def optional(tier: str, reason: str) -> OptionalSkip | None:
    return next((o for o in OPTIONAL if o.allows(tier, reason)), None)


@dataclass
class Outcome:
    """A tier's tests as pytest's junit XML report counts them."""

    passed: int = 0
    failed: int = 0  # failures and errors (collection errors included)
    xfailed: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (test, reason)


def read_report(path: Path) -> Outcome | None:
    """The outcome in a junit XML report pytest wrote, or None if it wrote none."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    out = Outcome()
    for case in root.iter("testcase"):
        test = "::".join(x for x in (case.get("classname"), case.get("name")) if x)
        tags = {child.tag: child for child in case}
        if "failure" in tags or "error" in tags:
            out.failed += 1
        elif "skipped" in tags and tags["skipped"].get("type") == "pytest.xfail":
            out.xfailed += 1
        elif "skipped" in tags:
            out.skipped.append((test, tags["skipped"].get("message", "")))
        else:
            out.passed += 1
    return out


def judge(
    tier: str, rc: int, outcome: Outcome | None, narrowed: bool
) -> tuple[str, bool, list[str]]:
    """(the summary's word for the tier, whether it fails make test, lines saying why)."""
    if outcome is None:
        return "FAILED", True, [f"pytest exited {rc} and wrote no report"]
    allowed: dict[str, tuple[OptionalSkip, list[str]]] = {}
    refused: list[str] = []
    for test, reason in outcome.skipped:
        o = optional(tier, reason)
        if o:
            allowed.setdefault(o.name, (o, []))[1].append(test)
        else:
            refused.append(f"SKIP NOT ALLOWED: {test}: {reason}")
    notes = [
        f"optional skip ({o.name}), {len(tests)} test(s), e.g. {tests[0]}: {o.why}"
        for o, tests in allowed.values()
    ]
    counts = f"{outcome.passed} passed" + (
        f", {len(outcome.skipped)} skipped" if outcome.skipped else ""
    )
    if rc not in (0, 5) or outcome.failed:
        return f"FAILED ({outcome.failed} failed, {counts})", True, refused + notes
    if outcome.passed == 0 and not outcome.skipped:
        if narrowed:  # e.g. every test of the tier deselected by -k
            return "nothing selected", False, []
        return "FAILED (no tests ran)", True, ["a tier without tests: its marker selects nothing"]
    if outcome.passed == 0:
        word = "skipped" + (" (optional)" if not refused else "")
        return word, bool(refused), refused + notes
    if refused:
        return f"SKIPS NOT ALLOWED ({counts})", True, refused + notes
    return f"passed ({counts})", False, notes


def budget_skip(tier: Tier) -> tuple[str, bool, list[str]]:
    """A tier the budget cut: fails make test unless that is optional here."""
    allowed = optional(tier.name, BUDGET)
    if allowed:
        return "skipped (budget, optional)", False, [f"optional ({allowed.name}): {allowed.why}"]
    return "SKIPPED (budget)", True, ["a tier the budget cut was not tested: make test fails"]


def interruptible() -> None:
    """In the child before exec: SIGINT back to its default. A shell runs a background job
    (`make test &`, a CI step's wrapper) with SIGINT ignored, the child inherits that and
    Python then never turns SIGINT into KeyboardInterrupt: the hard stop would not stop it
    (seen: a pytest started from a background shell ignored two SIGINTs)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _pytest(marker: str, extra: list[str], seconds: float | None,
            report: Path | None = None) -> tuple[int, bool]:  # fmt: skip
    """(pytest's exit code, stopped at the hard limit). SIGINT makes pytest stop like ^C:
    the running test's fixtures still tear down what they started. report: where pytest
    writes its junit XML report (the outcome of every test)."""
    junit = [f"--junitxml={report}", "-o", "junit_family=xunit2"] if report else []
    cmd = [sys.executable, "-m", "pytest", "-rfEs", "-m", marker, *junit, *extra]
    proc = subprocess.Popen(cmd, cwd=REPO, preexec_fn=interruptible)
    try:
        return proc.wait(timeout=seconds), False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return 1, True


def skip_reason(tier: Tier, elapsed: float, budget: float, prefetch: Prefetch | None = None) -> str:
    """Why `tier` does not start `elapsed` seconds into a `budget` (0: none), or ''."""
    need = tier.need_minutes(prefetch) * 60
    if not budget or not tier.builds or elapsed + need <= budget:  # the core always runs
        return ""
    builds = ", ".join(f"{b.name} ~{b.minutes:g} min" for b in tier.missing())
    return (
        f"needs ~{_minutes(need)} ({'builds: ' + builds + '; ' if builds else ''}"
        f"tests ~{tier.minutes:g} min) and {_minutes(max(budget - elapsed, 0))} of the "
        f"{_minutes(budget)} budget are left; run it alone: scripts/test.sh --tier {tier.name}"
    )


def _exitfirst(argv: list[str]) -> bool:
    args = [*argv, *shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))]
    return "-x" in args or "--exitfirst" in args


def _static(prefetch: Prefetch | None = None) -> int:
    status = 0
    for name, cmd, builds in STATIC:
        print(f"== {name}", flush=True)
        if prefetch is not None:
            prefetch.wait(builds)  # a build the prefetch did not finish runs in the foreground
        status |= subprocess.run(cmd, cwd=REPO, check=False).returncode != 0
    return status


def _narrowed(argv: list[str]) -> bool:
    """pytest arguments that select fewer tests (a tier may then run none)."""
    addopts = shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
    select = ("-k", "-m", "--deselect", "--lf", "--last-failed")
    return any(
        a in select or a.startswith(("-k", "--deselect=")) for a in [*argv, *addopts]
    ) or any(
        not a.startswith("-")
        for a in argv  # paths or node ids
    )


def main(argv: list[str]) -> int:
    t0 = float(os.environ.get("CB_TEST_T0") or time.time())  # make test: before setup.sh
    # a tier starts when it can end by then (CI stops at 90; the hard stop below)
    budget = float(os.environ.get("CB_TEST_BUDGET_MIN", "84")) * 60
    hard = float(os.environ.get("CB_TEST_HARD_MIN", "86")) * 60  # CI stops at 90
    only: list[str] = []
    # CB_TEST_TIERS="quick k8s": make test limited to those tiers (static checks and the
    # budget kept), as tests/break_product.py runs it
    limit = os.environ.get("CB_TEST_TIERS", "").split()
    while argv[:1] == ["--tier"] and len(argv) >= 2:
        only.append(argv[1])
        argv = argv[2:]
    unknown = set(only + limit) - {t.name for t in TIERS}
    if unknown:
        print(f"unknown tier(s) {sorted(unknown)}: one of {[t.name for t in TIERS]}")
        return 2
    if os.environ.get("UPDATE_GOLDEN"):
        print("UPDATE_GOLDEN is set: the golden tests would rewrite their files instead of "
              "comparing them. Unset it; `make golden` rewrites them on purpose.")  # fmt: skip
        return 2
    if argv and not only:  # plain pytest arguments: static checks, then exactly that
        status = _static()
        return status | (subprocess.run([sys.executable, "-m", "pytest", "-rfEs", *argv],
                                        cwd=REPO, check=False).returncode != 0)  # fmt: skip
    if only:
        budget = hard = 0.0  # asked for by name: run it, however long
    tiers = [t for t in TIERS if (not only or t.name in only) and (not limit or t.name in limit)]
    rook_tiers = any(t.name in ("kind", "crimson") for t in tiers)
    chosen = "CRIMSONBENCH_ROOK_VERSION" in os.environ
    if rook_tiers and not chosen and (note := rook_release.fallback_note(ROOK.version)):
        print(f"== {note}", flush=True)
    if rook_tiers:  # the log of a run says what it proved
        print(f"== Rook {ROOK.version} with Ceph {ROOK.ceph} ({ROOK.suite})", flush=True)
    if rook_tiers and (why := rook_release.unavailable(ROOK)):
        print(f"== {why}", flush=True)  # the tier then skips with the same line
    # every pytest below runs the Rook the builds are keyed by, whatever appears meanwhile
    os.environ["CRIMSONBENCH_ROOK_VERSION"] = ROOK.version
    prefetch = Prefetch(tiers, Path(os.environ.get("TMPDIR", "/tmp")) / "crimsonbench-prefetch.log",
                        static=not only)  # fmt: skip
    prefetch.start()  # first: it uses the time the static checks leave idle too
    rows: list[tuple[str, str, float]] = []
    notes: list[tuple[str, str]] = []  # (tier, line) printed under the summary
    status = 0
    reports = Path(tempfile.mkdtemp(prefix="crimsonbench-tiers-"))
    try:
        if not only:
            start = time.time()
            rc = _static(prefetch)
            rows.append(("static", "passed" if rc == 0 else "FAILED", time.time() - start))
            status |= rc
        for tier in tiers if not (status and _exitfirst(argv)) else ():
            elapsed = time.time() - t0
            why = skip_reason(tier, elapsed, budget, prefetch)
            if why:
                print(f"\n== tier {tier.name}: SKIPPED: {why}", flush=True)
                result, failed, lines = budget_skip(tier)
                rows.append((tier.name, result, 0.0))
                notes += [(tier.name, why), *((tier.name, ln) for ln in lines)]
                status |= failed
                continue
            if tier.name == "crimson" and _crimson_missing() and not only:
                # its every test would skip (each after seconds of probing): said at once
                rows.append((tier.name, "skipped (not built, optional)", 0.0))
                notes.append((tier.name, f"optional ({_CRIMSON}): {_CRIMSON_WHY}"))
                continue
            print(f"\n== tier {tier.name} (-m '{tier.marker}'), "
                  f"{_minutes(elapsed)} after the start", flush=True)  # fmt: skip
            prefetch.wait(tier.builds)
            start = time.time()
            report = reports / f"{tier.name}.xml"
            rc, stopped = _pytest(tier.marker, argv, hard - (start - t0) if hard else None, report)
            took = time.time() - start
            result, failed, lines = judge(tier.name, rc, read_report(report), _narrowed(argv))
            if stopped:
                result, failed = f"STOPPED at the {_minutes(hard)} hard limit", True
            rows.append((tier.name, result, took))
            notes += [(tier.name, ln) for ln in lines]
            status |= failed
            if status and _exitfirst(argv):
                break  # pytest's -x: stop at the first failure, tiers included
    finally:
        prefetch.stop()
        shutil.rmtree(reports, ignore_errors=True)
    print("\n== tiers")
    for name, result, took in rows:
        print(f"   {name:8} {result:40} {_minutes(took) if took else ''}")
    total = _minutes(time.time() - t0)
    print(f"   total {total} since the start (budget {_minutes(budget) if budget else 'none'})")
    for name, line in notes:
        print(f"   {name}: {line}")
    if status:
        print("== FAILED: above, what failed, skipped or was cut by the budget")
    else:
        print("== every tier ran and passed" + (" (optional skips above)" if notes else ""))
    return int(bool(status))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
