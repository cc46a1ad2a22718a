"""Where the Ceph and fio programs of a local run come from: this machine's packages, or a
Ceph root filesystem (target.local.cephRoot), e.g. the one e2e/crimson/build-ceph-root.sh
makes around a crimson-osd built from source, since no Debian package ships crimson.

A root is used through `chroot`, in the host's network and PID namespaces, so the pid we
record is the daemon's own (chroot and env exec it), taskset outside still pins it, and
/proc sampling works unchanged. Each run mounts the root privately at a mount point of its
own (proc, sys, dev and every directory the run shares, at the same paths), so two runs on
one root never unmount each other's /proc, and closing the session unmounts all of it.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from crimsonbench.errors import ExecutionError, InvalidSpec
from crimsonbench.local.fio_program import host_fio
from crimsonbench.local.signals import deferred

log = logging.getLogger(__name__)

ROOT_FIELD = "spec.target.local.cephRoot"
ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# what a root must hold for a cluster and its clients
ROOT_PROGRAMS = ("ceph", "ceph-mon", "ceph-mgr", "ceph-authtool", "monmaptool", "rbd", "fio")
BUILD_HINT = (
    "build one with e2e/build-crimson.sh && e2e/crimson/build-ceph-root.sh "
    "(~2 h cold; it lands in ~/.cache/crimsonbench/ceph-root/<version>/rootfs)"
)


class Userland:
    """This machine's programs: commands run as they are."""

    root: Path | None = None

    def wrap(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: Path | None = None
    ) -> tuple[list[str], dict[str, str] | None, Path | None]:
        """(argv, env, cwd) for subprocess: `env` is added to this process's environment."""
        return list(argv), ({**os.environ, **env} if env else None), cwd

    def which(self, name: str) -> str | None:
        """The program's path as the command will see it, or None."""
        return shutil.which(name)

    def fio(self) -> str:
        """The fio the run's clients start (local/fio_program.py)."""
        return host_fio()

    def path(self, inside: str) -> Path:
        """Where a path of the userland is on this machine."""
        return Path(inside)

    def share(self, directory: Path) -> None:
        """Make a host directory visible at the same path to the commands (no-op here)."""

    def close(self) -> list[str]:
        """Undo what the session set up; returns what could not be undone."""
        return []

    def describe(self) -> str:
        return "this machine's packages"


class CephRoot(Userland):
    """A Ceph root filesystem, entered with chroot. Use open(), then close() (or `with`)."""

    def __init__(self, rootfs: Path) -> None:
        self.rootfs = rootfs
        self.root: Path | None = None  # the run's private mount of rootfs, once opened
        self._mounts: list[Path] = []
        self._made: list[Path] = []  # mount points and links we created inside rootfs

    # ------------------------------------------------------------ checks

    @classmethod
    def checked(cls, rootfs: str, crimson: bool) -> CephRoot:
        """The root, after checking it holds what a run needs; InvalidSpec names the field."""
        path = Path(rootfs).expanduser()
        if not path.is_dir():
            raise InvalidSpec(ROOT_FIELD, f"{path} is not a directory; {BUILD_HINT}")
        missing = [p for p in ROOT_PROGRAMS if _program(path, p) is None]
        if crimson and _program(path, "crimson-osd") is None:
            missing.append("crimson-osd")
        if not crimson and _program(path, "ceph-osd") is None:
            missing.append("ceph-osd")
        if missing:
            raise InvalidSpec(
                ROOT_FIELD,
                f"{path} has no {', '.join(missing)} in /usr/bin or /usr/sbin; it must be a "
                f"whole Ceph root filesystem; {BUILD_HINT}",
            )
        if os.geteuid() != 0:
            raise InvalidSpec(ROOT_FIELD, "running from a Ceph root needs root (chroot, mount)")
        return cls(path.resolve())

    # ------------------------------------------------------------ session

    def __enter__(self) -> CephRoot:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        for item in self.close():
            log.error("ceph root left behind: %s", item)

    def open(self) -> None:
        """Mount rootfs privately at a fresh mount point, with proc, sys and dev."""
        mnt = Path(tempfile.mkdtemp(prefix="cbroot-"))
        try:
            self._mount_at(mnt, "--bind", str(self.rootfs))
            # private: what we mount below never propagates to rootfs's other mounts
            _mount("--make-private", str(mnt))
            self.root = mnt
            self._mount_at(mnt / "proc", "-t", "proc", "proc")
            self._mount_at(mnt / "sys", "-t", "sysfs", "sysfs")
            self._mount_at(mnt / "dev", "--bind", "/dev")
        except BaseException:
            self.close()
            raise
        log.info("ceph root %s mounted at %s", self.rootfs, mnt)

    def share(self, directory: Path) -> None:
        """Bind-mount a host directory at the same path in the root (cluster and results
        directories: every path in ceph.conf and the fio job files is valid on both sides)."""
        if self.root is None:
            raise ExecutionError("the ceph root is not open")
        directory = directory.resolve()
        target = self.root / directory.relative_to("/")
        self._make_dirs(target)
        self._mount_at(target, "--bind", str(directory))

    def _mount_at(self, target: Path, *args: str) -> None:
        """Mount and remember it for close(), with no stop signal in between."""
        with deferred():
            _mount(*args, str(target))
            self._mounts.append(target)

    def link(self, link: Path, to: Path) -> None:
        """The same symlink inside the root (the short run-dir alias in /tmp)."""
        if self.root is None:
            raise ExecutionError("the ceph root is not open")
        inside = self.root / link.relative_to("/")
        self._make_dirs(inside.parent)
        inside.symlink_to(to)
        self._made.append(inside)

    def _make_dirs(self, target: Path) -> None:
        missing = []
        p = target
        while not p.exists():
            missing.append(p)
            p = p.parent
        for d in reversed(missing):
            d.mkdir()
            self._made.append(d)

    def close(self) -> list[str]:
        left: list[str] = []
        for m in reversed(self._mounts):
            if _umount(m):
                continue
            left.append(f"mount {m}")
        self._mounts.clear()
        # mount points and links we made inside rootfs: through the now unmounted private
        # mount they are gone from view, so remove them in rootfs itself
        for made in reversed(self._made):
            real = self.rootfs / made.relative_to(self.root) if self.root else made
            try:
                if real.is_symlink() or real.is_file():
                    real.unlink()
                else:
                    real.rmdir()
            except FileNotFoundError:
                pass
            except OSError as exc:
                left.append(f"{real}: {exc}")
        self._made.clear()
        if self.root is not None:
            try:
                self.root.rmdir()
            except OSError as exc:
                left.append(f"mount point {self.root}: {exc}")
            self.root = None
        return left

    # ------------------------------------------------------------ commands

    def wrap(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: Path | None = None
    ) -> tuple[list[str], dict[str, str] | None, Path | None]:
        # before open(): the root as it is, enough for `ceph --version`; daemons and
        # clients run only after open() (they need proc, sys, dev and the shared paths)
        root = self.root or self.rootfs
        # env -i: nothing of the host's environment (PYTHONPATH, LD_*) leaks into the root;
        # -C: chroot changes to / first, so the working directory is set inside
        pre = ["chroot", str(root), "/usr/bin/env", "-i"]
        if cwd is not None:
            pre += ["-C", str(cwd)]
        pre += ["HOME=/root", "LANG=C.UTF-8", f"PATH={ROOT_PATH}"]
        pre += [f"{k}={v}" for k, v in (env or {}).items()]
        return [*pre, *argv], None, None

    def which(self, name: str) -> str | None:
        return _program(self.rootfs, name)

    def fio(self) -> str:
        """The root's own fio: ours is built against this machine's librbd."""
        return "fio"

    def path(self, inside: str) -> Path:
        return self.rootfs / inside.lstrip("/")

    def describe(self) -> str:
        return f"the Ceph root {self.rootfs}"


class BuildDir(Userland):
    """A Ceph build tree's programs (vstart.sh's `build/bin`, libraries in `build/lib`)
    first on PATH, everything else from this machine."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.lib_dir = bin_dir.parent / "lib"

    @classmethod
    def checked(cls, bin_dir: str, crimson: bool) -> BuildDir:
        path = Path(bin_dir).expanduser().resolve()
        osd = "crimson-osd" if crimson else "ceph-osd"
        if not (path / osd).is_file():
            raise InvalidSpec(
                "spec.target.local.cephBinDir",
                f"{path} has no {osd}; point cephBinDir at a Ceph build's bin directory "
                "(e.g. ceph/build/bin after `ninja crimson-osd` / vstart's targets)",
            )
        return cls(path)

    def wrap(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: Path | None = None
    ) -> tuple[list[str], dict[str, str] | None, Path | None]:
        extra = {"PATH": f"{self.bin_dir}:{os.environ.get('PATH', '')}"}
        if self.lib_dir.is_dir():  # a build's shared libraries, as vstart.sh sets them
            old = os.environ.get("LD_LIBRARY_PATH")
            extra["LD_LIBRARY_PATH"] = f"{self.lib_dir}:{old}" if old else str(self.lib_dir)
        full = [self.which(argv[0]) or argv[0], *argv[1:]] if argv else []
        return full, {**os.environ, **extra, **(env or {})}, cwd

    def which(self, name: str) -> str | None:
        own = self.bin_dir / name
        if own.is_file() and os.access(own, os.X_OK):
            return str(own)
        return shutil.which(name)

    def class_dir(self) -> str | None:
        return str(self.lib_dir) if (self.lib_dir / "libcls_rbd.so").exists() else None

    def describe(self) -> str:
        return f"the build directory {self.bin_dir} (then this machine)"


def userland_for(ceph_root: str | None, crimson: bool, bin_dir: str | None = None) -> Userland:
    """The userland target.local names, checked (a CephRoot is not opened yet)."""
    if ceph_root:
        return CephRoot.checked(ceph_root, crimson)
    if bin_dir:
        return BuildDir.checked(bin_dir, crimson)
    return Userland()


def _program(rootfs: Path, name: str) -> str | None:
    for d in ("usr/bin", "usr/sbin", "bin", "sbin"):
        p = rootfs / d / name
        if p.is_file() and os.access(p, os.X_OK):
            return "/" + d + "/" + name
    return None


def _mount(*args: str) -> None:
    res = subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30,
                         start_new_session=True)  # fmt: skip
    if res.returncode != 0:
        raise ExecutionError(f"`mount {' '.join(args)}` failed: {res.stderr.strip()}")


def _umount(path: Path) -> bool:
    for args in (["umount", str(path)], ["umount", "-l", str(path)]):
        # its own session: a Ctrl-C at the terminal must not kill an unmount mid-teardown
        res = subprocess.run(args, capture_output=True, text=True, timeout=30,
                             start_new_session=True)  # fmt: skip
        if res.returncode == 0:
            return True
    return False
