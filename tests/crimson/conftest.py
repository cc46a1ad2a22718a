"""The crimson tier: real crimson-osd 20.2.4 daemons from the Ceph root that
e2e/build-crimson.sh + e2e/crimson/build-ceph-root.sh build (~2 h cold on 2 cores, cached
by version). Where that root is missing the tier is skipped, printing the command."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CEPH_VERSION = os.environ.get("CRIMSON_VERSION", "20.2.4")
CACHE = Path(os.environ.get("CRIMSONBENCH_CACHE", Path.home() / ".cache/crimsonbench"))
ROOT = Path(os.environ.get("CRIMSONBENCH_CEPH_ROOT", CACHE / "ceph-root" / CEPH_VERSION / "rootfs"))
BUILD = f"e2e/build-crimson.sh {CEPH_VERSION} && e2e/crimson/build-ceph-root.sh {CEPH_VERSION}"


@pytest.fixture(scope="session")
def ceph_root() -> Path:
    if not (ROOT / "usr/bin/crimson-osd").is_file():
        pytest.skip(
            f"no crimson Ceph root at {ROOT} (no Debian package ships crimson-osd); build it "
            f"once with `{BUILD}` (~2 h cold on 2 cores; it can run in the background)"
        )
    if os.geteuid() != 0:
        pytest.skip("running from a Ceph root needs root (chroot, mount)")
    return ROOT


@pytest.fixture
def machine_restored(ceph_root: Path):  # type: ignore[no-untyped-def]
    """What a crimson run touches on the host, before == after: the Ceph root's private
    mounts, the root's /tmp (mount points made there), fs.aio-max-nr."""

    def state() -> dict[str, object]:
        mounts = Path("/proc/mounts").read_text()
        return {
            "cbroot mounts": [line for line in mounts.splitlines() if "cbroot-" in line],
            "cbroot dirs": sorted(str(p) for p in Path("/tmp").glob("cbroot-*")),
            "root /tmp": sorted(p.name for p in (ceph_root / "tmp").iterdir()),
            "aio-max-nr": Path("/proc/sys/fs/aio-max-nr").read_text(),
        }

    before = state()
    yield
    assert state() == before
