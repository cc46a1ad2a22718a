"""The whole test suite as tiers, cheapest and most telling first, inside a time budget.

Why tiers and a budget: on a fresh 2-core machine the real parts are built first (Kubernetes
~13 min, helm 4, our images 5, Rook ~10, kind's images ~25, a crimson OSD ~2 h), and with
the tests (the Rook tier alone ~24 min) that is more than CI's 90 minutes. Rather than
time out and report nothing, each heavy tier is started only when its builds (those not
cached yet) plus its tests fit in what is left of the budget; otherwise it is skipped with
the reason and the command that runs it.
Every figure below is measured (bench/RESULTS.md, "cold make test").

The builds a run will need are started at once in the background at the lowest CPU and I/O
priority (`nice 19`, `ionice idle`): they soak up the CPU the quick and Ceph tiers leave
idle without slowing them. Each build script takes a lock and is idempotent, so a tier
that reaches a build still running waits for it instead of building twice.

    scripts/test.sh                       # static checks + every tier that fits
    scripts/test.sh --tier rook           # one tier, no budget (also: --tier quick ...)
    scripts/test.sh tests/plan -k topo    # plain pytest arguments: no tiers
    CB_TEST_BUDGET_MIN=0 scripts/test.sh  # every tier, however long it takes
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("CRIMSONBENCH_CACHE", Path.home() / ".cache" / "crimsonbench"))
K8S = "k8s/v1.36.3/bin"
NODE_LOCK = "/run/crimsonbench-node.lock"  # e2e/harness/node.py: one real-node stack at a time


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
BUILDS = {
    b.name: b
    for b in (
        Build("k8s control plane", 13, tuple(f"{K8S}/{c}" for c in ("etcd", *_K8S_CP.split())),
              f"K8S_COMPONENTS='{_K8S_CP}' e2e/build-k8s-binaries.sh"),
        Build("kubelet", 2, (f"{K8S}/kubelet",),
              f"K8S_COMPONENTS='{_K8S_CP} kubelet' e2e/build-k8s-binaries.sh"),
        Build("helm", 4, ("helm/v3.22.0/bin/helm",), "e2e/build-helm.sh"),
        Build("our images", 5, ("images/crimsonbench-fio-dev.tar",
                                "images/crimsonbench-operator-dev.tar"), "e2e/build-images.sh"),
        Build("rook", 5, ("rook/v1.17.8/bin/rook",), "e2e/build-rook.sh"),
        Build("rook image", 5, ("images/rook-ceph-v1.17.8-18.2.7.tar",),
              "e2e/rook/build-image.sh"),
        # starts our dockerd and stops it when done: its tier waits for the prefetch to
        # finish it (tier_builds_ready) so the daemon is never stopped under the tests.
        # Under the real node's lock: its containerd shims share /run/containerd with a
        # real node's, whose teardown checks the host (a cold run failed the Rook tier on
        # it). Cold, with the Kubernetes binaries built: 4.2 min (bench/RESULTS.md)
        Build("kind node image", 8, ("kind/v0.33.0/bin/kind", f"{K8S}/kubeadm",
                                     f"{K8S}/kube-proxy", "kind/images/v1.36.3"),
              f"flock -o {NODE_LOCK} sh -c "
              "'e2e/kind/build-kind.sh > /dev/null && e2e/kind/build-node-image.sh'"),
        Build("crimson", 120, ("ceph-root/20.2.4/rootfs/usr/bin/crimson-osd",),
              "e2e/build-crimson.sh 20.2.4 && e2e/crimson/build-ceph-root.sh 20.2.4",
              prefetch=False),
    )
}  # fmt: skip

# A test belongs to the tier of the heaviest marker it carries.
HEAVIEST_FIRST = ("crimson", "kind", "rook", "k8s", "ceph")


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


# Run order = priority: what tells most about the product per minute first.
TIERS = (
    Tier("quick", 1.5, ()),
    Tier("ceph", 11, ()),
    Tier("k8s", 3, ("k8s control plane", "helm")),
    Tier("rook", 24, ("k8s control plane", "kubelet", "helm", "our images", "rook",
                      "rook image")),
    # a BenchmarkRun across two nodes: Rook in kind with our chart (took over the single
    # real-node e2e of tier "node")
    Tier("kind", 14, ("k8s control plane", "kubelet", "helm", "our images", "rook image",
                      "kind node image")),
    # a cold crimson build alone is longer than CI: built by hand, then this tier runs
    # (tests/crimson, and crimson on Rook in kind: tests/kind/test_kind_rook_crimson.py)
    Tier("crimson", 14, ("crimson", "k8s control plane", "kubelet", "helm", "our images",
                         "kind node image")),
)  # fmt: skip


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


class Prefetch:
    """The builds the tiers will need, one after another, in tier order, at idle priority."""

    def __init__(self, tiers: list[Tier], log: Path) -> None:
        names: list[str] = []
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
            f'echo "== done {n}"'
            for n in self.names
        ]
        print(f"== prefetch, in the background at idle priority (log {self.log}): "
              f"{', '.join(self.names)}", flush=True)  # fmt: skip
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                ["nice", "-n", "19", "ionice", "-c", "3", "bash", "-c", "; ".join(script)],
                cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

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
            f"== done {b}" in self._lines() for b in pending
        ):
            time.sleep(5)
        if time.time() - t0 > 10:
            print(f"== waited {_minutes(time.time() - t0)} for the prefetch of "
                  f"{', '.join(pending)}", flush=True)  # fmt: skip

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            # the build scripts stop on SIGTERM and pick up where they were on the next call
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


STATIC = (
    ("ruff", ("ruff", "check", "operator", "tests", "bench", "e2e", "dashboards", "scripts")),
    ("mypy", ("mypy",)),
    ("import-linter", ("lint-imports",)),
)


def interruptible() -> None:
    """In the child before exec: SIGINT back to its default. A shell runs a background job
    (`make test &`, a CI step's wrapper) with SIGINT ignored, the child inherits that and
    Python then never turns SIGINT into KeyboardInterrupt: the hard stop would not stop it
    (seen: a pytest started from a background shell ignored two SIGINTs)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _pytest(marker: str, extra: list[str], seconds: float | None) -> tuple[int, bool]:
    """(pytest's exit code, stopped at the hard limit). SIGINT makes pytest stop like ^C:
    the running test's fixtures still tear down what they started."""
    cmd = [sys.executable, "-m", "pytest", "-rfEs", "-m", marker, *extra]
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


def _static() -> int:
    status = 0
    for name, cmd in STATIC:
        print(f"== {name}", flush=True)
        status |= subprocess.run(cmd, cwd=REPO, check=False).returncode != 0
    return status


def main(argv: list[str]) -> int:
    t0 = float(os.environ.get("CB_TEST_T0") or time.time())  # make test: before setup.sh
    budget = float(os.environ.get("CB_TEST_BUDGET_MIN", "75")) * 60
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
    if argv and not only:  # plain pytest arguments: static checks, then exactly that
        status = _static()
        return status | (subprocess.run([sys.executable, "-m", "pytest", "-rfEs", *argv],
                                        cwd=REPO, check=False).returncode != 0)  # fmt: skip
    if only:
        budget = hard = 0.0  # asked for by name: run it, however long
    tiers = [t for t in TIERS if (not only or t.name in only) and (not limit or t.name in limit)]
    prefetch = Prefetch(tiers, Path(os.environ.get("TMPDIR", "/tmp")) / "crimsonbench-prefetch.log")
    prefetch.start()  # first: it uses the time the static checks leave idle too
    rows: list[tuple[str, str, float]] = []
    status = 0
    try:
        if not only:
            start = time.time()
            rc = _static()
            rows.append(("static", "passed" if rc == 0 else "FAILED", time.time() - start))
            status |= rc
        for tier in tiers if not (status and _exitfirst(argv)) else ():
            elapsed = time.time() - t0
            why = skip_reason(tier, elapsed, budget, prefetch)
            if why:
                print(f"\n== tier {tier.name}: SKIPPED: {why}", flush=True)
                rows.append((tier.name, "skipped (budget)", 0.0))
                continue
            print(f"\n== tier {tier.name} (-m '{tier.marker}'), "
                  f"{_minutes(elapsed)} after the start", flush=True)  # fmt: skip
            prefetch.wait(tier.builds)
            start = time.time()
            rc, stopped = _pytest(tier.marker, argv, hard - (start - t0) if hard else None)
            took = time.time() - start
            if rc == 5:  # nothing collected: e.g. every test of the tier deselected by -k
                rc = 0
            result = "passed" if rc == 0 else "FAILED"
            if stopped:
                result = f"STOPPED at the {_minutes(hard)} hard limit"
            rows.append((tier.name, result, took))
            status |= rc != 0
            if status and _exitfirst(argv):
                break  # pytest's -x: stop at the first failure, tiers included
    finally:
        prefetch.stop()
    print("\n== tiers")
    for name, result, took in rows:
        print(f"   {name:8} {result:24} {_minutes(took) if took else ''}")
    total = _minutes(time.time() - t0)
    print(f"   total {total} since the start (budget {_minutes(budget) if budget else 'none'})")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
