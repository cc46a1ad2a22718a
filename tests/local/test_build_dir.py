"""target.local.cephBinDir: a Ceph build's bin directory (vstart.sh's build/bin) comes
first. The build here is a directory of wrappers that log their use and exec this
machine's real daemons, so the test shows which programs the cluster really ran."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crimsonbench.errors import InvalidSpec
from crimsonbench.local.cluster import LocalCluster
from crimsonbench.spec.models import Flavor, LocalTarget, ObjectStore, OsdSpec

PROGRAMS = ("ceph-mon", "ceph-mgr", "ceph-osd", "ceph-authtool", "monmaptool")


def build_dir(tmp_path: Path) -> tuple[Path, Path]:
    bin_dir, log = tmp_path / "build" / "bin", tmp_path / "used.log"
    bin_dir.mkdir(parents=True)
    for name in PROGRAMS:
        wrapper = bin_dir / name
        wrapper.write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\nexec /usr/bin/{name} "$@"\n')
        wrapper.chmod(0o755)
    return bin_dir, log


@pytest.mark.ceph
def test_cluster_runs_the_build_dirs_programs(tmp_path: Path) -> None:
    bin_dir, log = build_dir(tmp_path)
    target = LocalTarget(ceph_bin_dir=str(bin_dir), bluestore_size="1Gi")
    osd = OsdSpec(flavor=Flavor.CLASSIC, object_store=ObjectStore.MEMSTORE)
    with LocalCluster(target, osd) as c:
        assert c.binary == str(bin_dir / "ceph-osd")
        c.create_pool("rbd", 8)
        daemons = {name: os.readlink(f"/proc/{pid}/exe") for name, pid in c.pids().items()}
    used = {line.split()[0] for line in log.read_text().splitlines()}
    assert used == set(PROGRAMS), used
    # the wrappers exec'd: the pids we track are the daemons themselves
    assert all(exe.startswith("/usr/bin/ceph-") for exe in daemons.values()), daemons


def test_a_bin_dir_without_the_osd_is_refused_by_name(tmp_path: Path) -> None:
    target = LocalTarget(ceph_bin_dir=str(tmp_path))
    crimson = OsdSpec(flavor=Flavor.CRIMSON, object_store=ObjectStore.CYANSTORE)
    with pytest.raises(InvalidSpec, match="has no crimson-osd") as err:
        LocalCluster(target, crimson, root=tmp_path / "c")
    assert err.value.field == "spec.target.local.cephBinDir"
    assert not (tmp_path / "c").exists()
