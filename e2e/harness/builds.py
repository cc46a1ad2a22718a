"""Every build the harness starts, one way: a script of e2e/ that prints what it made last
(`run_build`), and a Go module from the proxy (`go_module_dir`). Where a failure is the
machine's (no mirror, no module proxy), the caller's `unavailable` exception says so (the
test skips, the reason printed); any other failure is ours and raises `failure`."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Substrings of build errors caused by the machine (no Go, no module proxy, no package
# mirror, full disk), not by our scripts: tests skip on these, with the reason printed, and
# fail on anything else.
ENVIRONMENTAL = (
    "Go is not installed", "dial tcp", "no such host", "connection refused", "i/o timeout",
    "TLS handshake timeout", "403 Forbidden", "no space left on device", "not root",
    # apt, debootstrap and pip without a mirror; a module the proxy does not serve
    "Temporary failure resolving", "Could not resolve", "Failed getting release file",
    "Couldn't download packages", "Unable to connect to", "Failed to fetch",
    "Max retries exceeded", "Network is unreachable", "not served by the Go module proxy",
)  # fmt: skip


def environmental(exc: BaseException) -> bool:
    """True when a failure comes from the machine (no network, no Go, no disk), not from
    our own files: only such failures may turn a test into a skip."""
    return any(marker in str(exc) for marker in ENVIRONMENTAL)


def cache_root() -> Path:
    """Where built binaries and images are cached, outside the repository:
    $CRIMSONBENCH_CACHE, default ~/.cache/crimsonbench (the build scripts use the same)."""
    return Path(os.environ.get("CRIMSONBENCH_CACHE", Path.home() / ".cache" / "crimsonbench"))


# podman/buildah pulling an image: "initializing source docker://REF: <why>" (also
# "reading manifest TAG in REF: <why>"); the registry unreachable or refusing.
_PULL = re.compile(
    r"(?:initializing source (?:docker://)?(?P<ref>\S+)"
    r"|reading manifest \S+ in (?P<ref2>\S+)):\s+(?P<why>[^\n]*)"
)
_REFUSED = ("pinging container registry", "dial tcp", "no such host", "connection refused",
            "i/o timeout", "TLS handshake timeout", "403 Forbidden", "401 Unauthorized",
            "unauthorized", "denied", "toomanyrequests")  # fmt: skip


def ours(ref: str) -> bool:
    """An image this repository builds: every one of them is named localhost/... (ours are
    never pulled: a pull of one is a broken build script)."""
    name = ref.removeprefix("docker://").removeprefix("containers-storage:")
    return name.startswith("localhost/") or "crimsonbench" in name


def registry_pull_refusal(stderr: str) -> str:
    """'' unless `stderr` proves a registry refused (or could not be reached) to pull a
    third-party image; then why, for the skip message. Anything else from a build of our
    files is ours to fix."""
    for m in _PULL.finditer(stderr):
        ref, why = m["ref"] or m["ref2"], m["why"]
        if not ours(ref) and any(r in why for r in _REFUSED):
            return f"the registry refused the third-party image {ref}: {why.strip()[:300]}"
    return ""


def run_build(script: Path, unavailable: type[Exception], *, timeout: float,
              failure: type[Exception] = RuntimeError, image: bool = False,
              env: dict[str, str] | None = None, lock: Path | None = None,
              slow_is_environmental: bool = False) -> str:  # fmt: skip
    """`bash SCRIPT` (one at a time per `lock` file); its stdout. image: it builds one of
    our images (files of ours): a failure whatever its output says, unless a registry
    refused a third-party image (images.registry_pull_refusal)."""
    name = script.relative_to(REPO) if script.is_relative_to(REPO) else script.name
    with open(lock, "w") if lock else contextlib.nullcontext() as held:
        if held:
            fcntl.flock(held, fcntl.LOCK_EX)  # a second caller waits for the first's result
        try:
            proc = subprocess.run(["bash", str(script)], env={**os.environ, **(env or {})},
                                  capture_output=True, text=True, timeout=timeout)  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            slow = unavailable if slow_is_environmental else failure
            raise slow(f"{name} took over {timeout:.0f}s on this machine") from exc
    if proc.returncode != 0:
        msg = f"{name} failed (rc={proc.returncode}):\n{proc.stderr[-4000:]}"
        refused = registry_pull_refusal(proc.stderr) if image else ""
        if refused:
            raise unavailable(f"{refused}\n{msg}")
        if not image and any(m in proc.stderr for m in ENVIRONMENTAL):
            raise unavailable(msg)
        raise failure(msg)
    if not proc.stdout.strip():
        raise failure(f"{name} printed nothing on stdout:\n{proc.stderr[-2000:]}")
    return proc.stdout


def go_module_dir(module: str, version: str, unavailable: type[Exception]) -> Path:
    """The extracted MODULE@VERSION (Go's module cache, outside the repository)."""
    if shutil.which("go") is None:
        raise unavailable(f"Go is not installed; it fetches {module} through the module proxy")
    # GOSUMDB off: the checksum database is not reachable from every machine
    env = {**os.environ, "GOSUMDB": "off", "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    # outside any module, so a go.mod in the working directory cannot interfere
    with tempfile.TemporaryDirectory(prefix="go-dl-") as cwd:
        argv = ["go", "mod", "download", "-json", f"{module}@{version}"]
        proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True,
                              timeout=600, check=False)  # fmt: skip
    try:
        info = json.loads(proc.stdout)
    except json.JSONDecodeError:
        info = {}
    if proc.returncode != 0 or "Dir" not in info:
        raise unavailable(f"go mod download {module}@{version} failed (rc={proc.returncode}): "
                          f"{info.get('Error') or proc.stderr.strip()}")  # fmt: skip
    return Path(info["Dir"])


def ensure_helm(timeout: float = 30 * 60) -> Path:
    """helm, built once per machine from the Go module proxy by e2e/build-helm.sh (cached in
    ~/.cache/crimsonbench/helm/<version>); RuntimeError says why there is none."""
    cache = cache_root()
    if shutil.which("go") is None and not any(cache.glob("helm/*/bin/helm")):
        raise RuntimeError("Go is not installed, so helm cannot be built (e2e/build-helm.sh)")
    cache.mkdir(parents=True, exist_ok=True)
    out = run_build(REPO / "e2e" / "build-helm.sh", RuntimeError, timeout=timeout,
                    lock=cache / "helm-build.lock")  # fmt: skip
    return Path(out.split()[-1])
