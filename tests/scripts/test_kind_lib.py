"""e2e/kind/lib.sh's exit hooks, run by bash: the first cold node-image build failed
because a `$(rootfs_image ...)` subshell, ending, ran every hook it had inherited from
its script — killing the script's background CoreDNS build and removing its files."""

from __future__ import annotations

import subprocess
from pathlib import Path

LIB = Path(__file__).resolve().parents[2] / "e2e" / "kind" / "lib.sh"


def bash(script: str, tmp: Path) -> list[str]:
    subprocess.run(["bash", "-c", f"source {LIB}; {script}"], capture_output=True,
                   text=True, timeout=60, check=True, cwd=tmp)  # fmt: skip
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
