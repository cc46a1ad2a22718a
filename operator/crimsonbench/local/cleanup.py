"""Removing what a cluster left: its directory, and a whole cluster left running."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

from crimsonbench.local import bootstrap as bs
from crimsonbench.local import procs
from crimsonbench.local.readiness import poll_until


def remove_dir(root: Path, made_it: bool) -> None:
    """Remove what we put there; a directory the caller handed us empty stays (empty)."""
    if made_it:
        shutil.rmtree(root, ignore_errors=True)
        return
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def destroy(root: Path) -> list[str]:
    """Stop a cluster left running (keepCluster, or a crashed run): SIGKILL every process
    naming `root`, detach its loop devices, remove `root`. Returns what could not be undone."""
    for pid in procs.processes_mentioning(str(root)):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
    # a SIGKILLed process in uninterruptible I/O dies only once that I/O ends: on a disk
    # loaded by builds that took more than 10 s (a cold `make test`, 2026-11-29)
    poll_until(lambda: [str(p) for p in procs.processes_mentioning(str(root))], 30, 0.2)
    left: list[str] = []
    note = root / "ceph-root-mount"  # cluster.MOUNT_NOTE: its Ceph root's private mount
    if note.is_file():
        left.extend(_unmount_tree(Path(note.read_text().strip())))
    for img in sorted(root.glob("osd.*.img")):
        for dev in bs.loop_devices_of(img):
            left.extend(bs.detach_loop(dev, img))
    for alias in Path("/tmp").glob("cbr-*"):  # short run-dir symlinks (bootstrap.layout_for)
        if alias.is_symlink() and alias.readlink() == root / "run":
            alias.unlink()
    shutil.rmtree(root, ignore_errors=True)
    left.extend(f"process {p} still uses {root}" for p in procs.processes_mentioning(str(root)))
    return left + ([f"directory {root} remains"] if root.exists() else [])


def _unmount_tree(mount_point: Path) -> list[str]:
    """umount -R a Ceph root's private mount point (cbroot-*) and remove it."""
    if not mount_point.name.startswith("cbroot-") or not mount_point.is_dir():
        return []
    res = subprocess.run(["umount", "-R", str(mount_point)], capture_output=True, text=True,
                         start_new_session=True)  # fmt: skip
    if res.returncode != 0:
        subprocess.run(["umount", "-R", "-l", str(mount_point)], capture_output=True,
                       start_new_session=True)  # fmt: skip
    try:
        mount_point.rmdir()
    except OSError as exc:
        return [f"Ceph root mount {mount_point}: {exc}"]
    return []
