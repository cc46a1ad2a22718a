"""What the kind harness reads of the host to leave it as it found it: its mounts and its
loop devices."""

from __future__ import annotations

import contextlib
from pathlib import Path


def mounts(under: str = "/") -> list[str]:
    """Mount points at or below `under`, in mount order."""
    out = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        target = line.split()[1].replace("\\040", " ")
        if under == "/" or target == under or target.startswith(under.rstrip("/") + "/"):
            out.append(target)
    return out


def loop_devices() -> dict[str, str]:
    """Attached loop devices: loopN -> backing file (" (deleted)" dropped)."""
    out = {}
    for d in Path("/sys/block").glob("loop*"):
        backing = d / "loop" / "backing_file"
        with contextlib.suppress(OSError):  # detached meanwhile
            out[d.name] = backing.read_text().strip().removesuffix(" (deleted)")
    return out
