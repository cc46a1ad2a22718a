"""Break the product on purpose, six ways, and show `make test` fails for each.

Each breakage is applied to a fresh clone of this repository's HEAD (so the working tree is
never touched), then the README's test command runs there (`make test`, with pytest's -x
so it stops at the first failure, limited by CB_TEST_TIERS to the static checks and the
tiers up to the one that must catch it: the rest cannot change the outcome). A row passes
when make test FAILS, and says which test caught it. The suite can only be trusted if
every row does.

    .venv/bin/python tests/break_product.py [--only NAME] [--keep]

Not collected by pytest (no test_ prefix): it runs make test once per breakage (here,
2026-11-24, with the fio driver: dockerfile-typo 3.1 min, fio-process-dropped 1.1,
configmap-left-behind 17.0 — the kind run's leftovers check waits 5 min before it fails;
later that day handler-raises 3.0 and planner-refuses 0.9; dockerfile-mirror-unreachable,
added 2026-11-25, not timed yet), so it is a script you run, not a test. A breakage that
turns a test into a skip must fail too: make test fails on any skip the README does not
name as optional (scripts/test_tiers.py). Caches (~/.cache/crimsonbench) are shared, so
only the first run builds anything.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Breakage:
    name: str
    path: str
    old: str
    new: str
    why: str
    tiers: str  # CB_TEST_TIERS: the tiers up to the one that must catch it


BREAKAGES = (
    Breakage(
        "dockerfile-typo",
        "Dockerfile",
        "fio ceph-common util-linux procps ca-certificates",
        "fio ceph-comon util-linux procps ca-certificates",
        "a package name typo: the fio image cannot be built (must fail, never skip)",
        "quick kind",
    ),
    Breakage(
        "dockerfile-mirror-unreachable",
        "Dockerfile",
        "FROM ${BASE} AS fio\nRUN apt-get update \\\n",
        "FROM ${BASE} AS fio\nRUN echo 'deb http://deb.debian.invalid/debian bookworm main' "
        "> /etc/apt/sources.list \\\n && apt-get update \\\n",
        "our fio image's apt source cannot be resolved: its build fails with network words "
        "in its output (it used to become a skip; must fail)",
        "quick kind",
    ),
    Breakage(
        "handler-raises",
        "operator/crimsonbench/controller/stages.py",
        "def stage_observe(ctx: RunContext) -> str:\n",
        "def stage_observe(ctx: RunContext) -> str:\n    raise RuntimeError('planted')\n",
        "every reconcile of a run raises (kopf logs and retries; nothing moves)",
        "quick k8s",
    ),
    Breakage(
        "fio-process-dropped",
        "operator/crimsonbench/plan/fio_jobs.py",
        "    for job in fio.jobs_of(c.name):\n",
        "    for job in fio.jobs_of(c.name)[1:]:\n",
        "each client's step job file has one job section less: a step silently smaller",
        "quick",
    ),
    Breakage(
        "configmap-left-behind",
        "operator/crimsonbench/controller/stored_results.py",
        '            cm["metadata"]["ownerReferences"] = [ctx.owner_reference()]\n',
        "",
        "results ConfigMaps lose their owner: they outlive a deleted run",
        "quick k8s kind",
    ),
    Breakage(
        "planner-refuses",
        "operator/crimsonbench/plan/cpu.py",
        "    by_id = topology.by_id()\n    pools = _resolve_pools(",
        '    raise InvalidSpec("spec.osd", "planted: the planner refuses everything")\n'
        "    by_id = topology.by_id()\n    pools = _resolve_pools(",
        "the planner refuses every spec",
        "quick",
    ),
)


def clone(dest: Path) -> None:
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True)


def apply(repo: Path, b: Breakage) -> None:
    path = repo / b.path
    text = path.read_text()
    if b.old not in text:
        raise SystemExit(f"{b.name}: the text to break is not in {b.path} (update this script)")
    path.write_text(text.replace(b.old, b.new, 1))


def make_test(repo: Path, log: Path, tiers: str) -> tuple[int, str, float]:
    env = {**os.environ, "PYTEST_ADDOPTS": "-x -p no:cacheprovider", "CB_TEST_TIERS": tiers}
    t0 = time.monotonic()
    with log.open("w") as fh:
        rc = subprocess.run(["make", "test"], cwd=repo, env=env, stdout=fh,
                            stderr=subprocess.STDOUT, check=False).returncode  # fmt: skip
    text = log.read_text(errors="replace")
    caught = re.findall(r"^(?:FAILED|ERROR) (\S+)", text, re.MULTILINE)
    static = re.search(r"^\s+static\s+FAILED", text, re.MULTILINE)  # the tiers table
    what = caught[0] if caught else ("static checks" if static else "?")
    return rc, what, time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=[b.name for b in BREAKAGES])
    ap.add_argument("--keep", action="store_true", help="keep the clone and its logs")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="crimsonbench-break-"))
    repo = work / "repo"
    clone(repo)
    rows = []
    try:
        for b in BREAKAGES:
            if args.only and b.name != args.only:
                continue
            subprocess.run(["git", "checkout", "-q", "--", "."], cwd=repo, check=True)
            apply(repo, b)
            rc, caught, seconds = make_test(repo, work / f"{b.name}.log", b.tiers)
            rows.append((b, rc, caught, seconds))
            verdict = "make test FAILED (good)" if rc else "make test PASSED (the suite missed it)"
            print(f"{b.name}: {verdict} after {seconds / 60:.1f} min; caught by {caught}",
                  flush=True)  # fmt: skip
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("\n| breakage | what it does | make test | caught by |\n|---|---|---|---|")
    for b, rc, caught, _ in rows:
        print(f"| {b.name} | {b.why} | {'fails' if rc else 'PASSES'} (rc {rc}) | `{caught}` |")
    return 0 if all(rc for _, rc, _, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
