"""A cold `make test`, as a fresh machine runs it: every cache moved aside, a clean clone,
`make demo` then `make test`, timed per tier and per build; the caches put back after.

    .venv/bin/python bench/bench_cold.py [--ref HEAD] [--keep-new] [--skip-demo]

As root run it as is; as another user, `sudo -E env PATH="$PATH" ...`: sudo's secure_path
drops /usr/local/go/bin, and every Go build then fails with "Go is not installed" (a
cold run of 2026-11-29 died of it in 13 minutes).

What is moved aside (and restored, whatever happens): the build cache
($CRIMSONBENCH_CACHE, default ~/.cache/crimsonbench: Kubernetes, helm, Rook, kind, our
images, podman's and our dockerd's stores, the crimson build), Go's build and module caches
(`go env GOCACHE GOMODCACHE`) and pip's cache. Debian's packages stay installed: on a new
machine setup.sh's apt adds ~3.5 min (bench/RESULTS.md). With the crimson build moved aside
the crimson tier takes its optional skip, as on a fresh machine.

Prints one table (markdown) with the wall time of setup + demo, each tier, each build in the
background prefetch, and the total; the whole `make test` output is kept in the log printed
at the end. Re-run it whenever a tier's tests or builds change (README, "Testing").
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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIER_ROW = re.compile(r"^\s{3}(\w+)\s+(.+?)(?:\s+([\d.]+ min))?\s*$")
PREFETCH = re.compile(r"^== (prefetch|done) (.+?)(?:: (\d+))?$")


def _go_env(name: str) -> Path | None:
    go = shutil.which("go")
    if go is None:
        return None
    out = subprocess.run([go, "env", name], capture_output=True, text=True, check=False)
    return Path(out.stdout.strip()) if out.stdout.strip() else None


def caches() -> list[Path]:
    home = Path.home()
    found = [
        Path(os.environ.get("CRIMSONBENCH_CACHE", home / ".cache" / "crimsonbench")),
        _go_env("GOCACHE"),
        _go_env("GOMODCACHE"),
        home / ".cache" / "pip",
    ]
    return [p for p in found if p is not None]


def _mounts_under(path: Path) -> list[str]:
    """Mount points under path, deepest first (an interrupted podman build leaves its
    storage's overlays mounted: rmtree cannot remove them, and the restore would fail)."""
    inside = str(path.resolve()) + "/"
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point.startswith(inside):
            points.append(point)
    return sorted(points, key=len, reverse=True)


def _remove(path: Path) -> None:
    """Go's module cache is read-only by design: make it writable first."""
    if not path.exists():
        return
    for point in _mounts_under(path):
        if subprocess.run(["umount", point], check=False).returncode != 0:
            subprocess.run(["umount", "-l", point], check=False)
    subprocess.run(["chmod", "-R", "u+w", str(path)], check=False)
    shutil.rmtree(path, ignore_errors=True)


@contextmanager
def moved_aside(paths: list[Path], keep_new: bool) -> Iterator[None]:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = {p: p.with_name(f"{p.name}.aside-{stamp}") for p in paths if p.exists()}
    for p, a in aside.items():
        print(f"== moving {p} aside to {a}", flush=True)
        p.rename(a)
    try:
        yield
    finally:
        for p, a in aside.items():
            if keep_new and p.exists():
                print(f"== keeping the new {p}; removing the old one", flush=True)
                _remove(a)
                continue
            _remove(p)
            a.rename(p)
            print(f"== restored {p}", flush=True)


def _timed(cmd: list[str], cwd: Path, log: Path, env: dict[str, str]) -> tuple[int, float]:
    t0 = time.time()
    with log.open("ab") as out:
        out.write(f"\n$ {' '.join(cmd)}\n".encode())
        out.flush()
        rc = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env,
                            check=False).returncode  # fmt: skip
    return rc, time.time() - t0


def tier_rows(text: str) -> list[tuple[str, str, str]]:
    """(tier, result, minutes) from make test's summary ("== tiers" on)."""
    rows = []
    summary = text[text.rfind("== tiers") :] if "== tiers" in text else ""
    for line in summary.splitlines()[1:]:
        m = TIER_ROW.match(line)
        if m and not line.strip().startswith("total"):
            rows.append((m[1], m[2].strip(), m[3] or ""))
    return rows


def build_rows(prefetch_log: str) -> list[tuple[str, str]]:
    """(build, minutes) from the prefetch log: each build from its start to the next's."""
    starts: list[tuple[str, int]] = []
    for line in prefetch_log.splitlines():
        m = PREFETCH.match(line)
        if m and m[1] == "prefetch" and m[3]:
            starts.append((m[2], int(m[3])))
    rows = []
    for i, (name, t) in enumerate(starts):
        end = starts[i + 1][1] if i + 1 < len(starts) else None
        rows.append((name, f"{(end - t) / 60:.1f} min" if end else "(last)"))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", default="HEAD", help="the commit to clone (default HEAD)")
    ap.add_argument("--keep-new", action="store_true",
                    help="keep the caches this run built instead of the old ones")  # fmt: skip
    ap.add_argument("--skip-demo", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("run as root (make test starts dockerd, kind, loop devices)")
        return 2
    commit = subprocess.run(["git", "rev-parse", args.ref], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.strip()  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="crimsonbench-cold-"))
    clone, log = work / "clone", work / "make.log"
    tmpdir = work / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir)}  # the prefetch log lands here
    # the clone is not beside ../shared: point it at the sources this checkout sees, so it
    # runs the Rook this checkout would (e2e/harness/rook.py default_version)
    sources = REPO.parent / "shared" / "sources"
    if sources.is_dir():
        env.setdefault("CRIMSONBENCH_SOURCES", str(sources))
    print(f"== cold make test of {commit[:12]} in {clone} (log {log})", flush=True)
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    subprocess.run(["git", "checkout", "-q", commit], cwd=clone, check=True)
    with moved_aside(caches(), args.keep_new):
        demo = (0, 0.0) if args.skip_demo else _timed(["make", "demo"], clone, log, env)
        test = _timed(["make", "test"], clone, log, env)
    text = log.read_text(errors="replace")
    prefetch = tmpdir / "crimsonbench-prefetch.log"
    builds = build_rows(prefetch.read_text(errors="replace")) if prefetch.exists() else []
    print(f"\n| cold, {commit[:12]}, {time.strftime('%Y-%m-%d')} | result | minutes |")
    print("|---|---|---|")
    if not args.skip_demo:
        print(f"| make demo (setup.sh + the quick example) | rc {demo[0]} | {demo[1] / 60:.1f} |")
    for tier, result, minutes in tier_rows(text):
        print(f"| tier {tier} | {result} | {minutes.removesuffix(' min')} |")
    print(f"| **make test** | rc {test[0]} | **{test[1] / 60:.1f}** |")
    for name, minutes in builds:
        print(f"| build {name} (background) | | {minutes.removesuffix(' min')} |")
    print(f"\nlog: {log}; prefetch log: {prefetch}")
    return test[0]


if __name__ == "__main__":
    sys.exit(main())
