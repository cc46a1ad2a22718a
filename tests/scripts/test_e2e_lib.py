"""e2e/lib.sh, what every build script shares, run by bash.

Exit hooks: the first cold node-image build failed because a `$(rootfs_image ...)`
subshell, ending, ran every hook it had inherited from its script — killing the script's
background CoreDNS build and removing its files. The chroot mounts of the crimson builds
are undone whatever way the script ends; a failed smoke check shows what the command said;
a cached Go build answers without Go."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[2] / "e2e" / "lib.sh"
BASH = shutil.which("bash") or "/bin/bash"


def run(
    script: str, tmp: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BASH, "-c", f"set -euo pipefail; LOG_TAG=t; source {LIB}; {script}"],
                          capture_output=True, text=True, timeout=60, cwd=tmp,
                          env={**os.environ, **(env or {})})  # fmt: skip


def bash(script: str, tmp: Path) -> list[str]:
    proc = run(script, tmp)
    assert proc.returncode == 0, proc.stderr
    return (tmp / "log").read_text().split()


def test_a_subshell_runs_only_its_own_hooks(tmp_path: Path) -> None:
    log = bash(
        """
        on_exit "echo parent >> log"
        x=$(on_exit "echo substitution >> log"; echo value)
        ( on_exit "echo background >> log"; exit 0 ) &
        wait
        echo "got-$x" >> log
        """,
        tmp_path,
    )
    assert sorted(log[:2]) == ["background", "substitution"]
    assert log[2:] == ["got-value", "parent"]  # the parent's hook ran once, at its end


def test_a_subshell_hook_does_not_stop_a_sibling_build(tmp_path: Path) -> None:
    log = bash(
        """
        sleep 3 & sibling=$!
        on_exit "kill $sibling 2>/dev/null; echo parent >> log"
        ignored=$(on_exit "true"; echo done)
        if wait "$sibling"; then echo sibling-finished >> log; else echo sibling-killed >> log; fi
        """,
        tmp_path,
    )
    assert log == ["sibling-finished", "parent"]


def test_a_failed_check_fails_the_build_showing_its_output(tmp_path: Path) -> None:
    proc = run('verify "our fio" sh -c "echo fio-3.33; echo broken >&2; exit 3"; echo reached',
               tmp_path)  # fmt: skip
    assert proc.returncode == 1 and "reached" not in proc.stdout
    assert "verify FAILED: our fio" in proc.stderr and "broken" in proc.stderr
    ok = run('verify "our fio" sh -c "echo fio-3.33"; echo "out=$VERIFY_OUT"', tmp_path)
    assert ok.returncode == 0 and ok.stdout == "out=fio-3.33\n", ok.stderr
    assert "verify ok (our fio): fio-3.33" in ok.stderr


def test_a_built_go_binary_is_printed_and_a_missing_one_needs_go(tmp_path: Path) -> None:
    no_go = tmp_path / "bin"  # a PATH with what the script uses, and no Go
    no_go.mkdir()
    for tool in ("dirname", "mkdir", "flock", "date", "mktemp", "rm"):
        (no_go / tool).symlink_to(shutil.which(tool) or tool)
    binary = tmp_path / "cache" / "bin" / "tool"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    script = f"go_build_once {tmp_path / 'cache'} {binary} tool; echo not-reached"
    proc = run(script, tmp_path, env={"PATH": str(no_go)})
    assert proc.returncode == 0 and proc.stdout == f"{binary}\n", proc.stderr
    binary.unlink()
    proc = run(script, tmp_path, env={"PATH": str(no_go)})
    assert proc.returncode == 1 and "not-reached" not in proc.stdout
    # the words the harness reads as "this machine cannot" (builds.ENVIRONMENTAL)
    assert "Go is not installed; tool is built from the module proxy" in proc.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting proc, sys and /dev in a chroot needs root")
@pytest.mark.parametrize("end", ["exit 0", "exit 3", "kill -TERM $$"])
def test_chroot_mounts_are_undone_however_the_build_ends(tmp_path: Path, end: str) -> None:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    try:
        proc = run(f"""LOG={tmp_path}/build.log; mounted=(); trap resumable_exit EXIT
            trap 'exit 143' TERM
            chroot_mounts {root}
            grep -c " {root}/" /proc/mounts > {tmp_path}/during
            {end}""", tmp_path)  # fmt: skip
        left = [ln.split()[1] for ln in Path("/proc/mounts").read_text().splitlines()
                if ln.split()[1].startswith(f"{root}/")]  # fmt: skip
    finally:  # never leave the host's /dev bound under a directory pytest will delete
        for target in sorted(ln.split()[1] for ln in Path("/proc/mounts").read_text().splitlines()
                             if ln.split()[1].startswith(f"{root}/")):  # fmt: skip
            subprocess.run(["umount", "-l", target], check=False)
    assert (tmp_path / "during").read_text().strip() == "3"  # proc, sys, dev
    assert not left
    if end != "exit 0":
        assert (
            f"failed (rc={proc.returncode}); log: {tmp_path}/build.log; re-run to resume"
            in proc.stderr
        )
