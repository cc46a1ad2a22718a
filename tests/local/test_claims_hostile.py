"""The machine-wide claims of local runs against hostile neighbours, without a cluster
(quick tier): the lock directory is world-writable, so a record there may be planted,
edited or still alive; the next run acts only on a dead run's own record, and only on
what looks like what a run made. CPU claims are all or nothing and name their holder.
Real flocks, real processes; the lock directory is a temporary one."""

from __future__ import annotations

import fcntl
import json
import os
import select
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crimsonbench.errors import ExecutionError, InvalidSpec
from crimsonbench.local import claims
from crimsonbench.local.claims import CpuClaim, RunRecord
from crimsonbench.local.leftovers import reap_dead_runs

CPU = 4093  # no run pins it: the machine's real runs never see these claims


@pytest.fixture(autouse=True)
def lock_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "locks"
    monkeypatch.setattr(claims, "LOCK_DIR", where)
    return where


@pytest.fixture
def bystander(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """A process whose command line names a directory with a file in it: what a reaper
    fooled by a record would kill and delete."""
    victim = tmp_path / "precious"
    victim.mkdir()
    (victim / "thesis.tex").write_text("keep me\n")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", str(victim)])
    yield proc, victim
    proc.kill()
    proc.wait()


def plant(lock_dir: Path, record: dict[str, Any], mode: int = 0o600) -> Path:
    lock_dir.mkdir(exist_ok=True)
    path = lock_dir / "run-1-deadbeef.json"
    path.write_text(json.dumps(record))
    path.chmod(mode)
    return path


def untouched(proc: subprocess.Popen[bytes], victim: Path) -> bool:
    return proc.poll() is None and (victim / "thesis.tex").read_text() == "keep me\n"


@pytest.mark.parametrize(
    "shape",
    ["root-slash", "root-tmp", "root-relative", "root-dotdot", "foreign-files", "results-unmarked"],
)
def test_a_record_pointing_at_something_no_run_made_is_not_acted_on(
    lock_dir: Path, bystander: tuple[subprocess.Popen[bytes], Path], shape: str
) -> None:
    proc, victim = bystander
    record = {
        "root-slash": {"root": "/"},
        "root-tmp": {"root": str(victim.parent.parent)},  # shallow? no: holds non-cluster files
        "root-relative": {"root": "precious"},
        "root-dotdot": {"root": f"{victim}/../{victim.name}"},
        "foreign-files": {"root": str(victim)},
        "results-unmarked": {"results": str(victim)},
    }[shape]
    plant(lock_dir, {"pid": 1, **record})
    reap_dead_runs()
    assert untouched(proc, victim)


def test_a_record_another_user_could_write_is_ignored(
    lock_dir: Path, bystander: tuple[subprocess.Popen[bytes], Path]
) -> None:
    proc, victim = bystander
    writable = plant(lock_dir, {"pid": 1, "root": str(victim)}, mode=0o666)
    assert reap_dead_runs() == [] and untouched(proc, victim) and writable.exists()
    if os.geteuid() == 0:  # planted by someone else (chown needs root)
        writable.chmod(0o600)
        os.chown(writable, 65534, 65534)
        assert reap_dead_runs() == [] and untouched(proc, victim)


UP_THEN_SLEEP = "import time; print('up', flush=True); time.sleep(600)"


def test_a_live_runs_record_is_left_alone_and_a_dead_ones_cluster_removed(
    tmp_path: Path, lock_dir: Path
) -> None:
    cluster = tmp_path / "cbc-dead"
    (cluster / "log").mkdir(parents=True)
    (cluster / "ceph.conf").write_text("[global]\n")
    daemon = subprocess.Popen([sys.executable, "-c", UP_THEN_SLEEP, f"{cluster}/ceph.conf"],
                              stdout=subprocess.PIPE)  # fmt: skip
    try:
        # Reaped once it runs: SIGKILL is taken only when a process leaves uninterruptible
        # I/O, and a Python still starting up (paging itself in) under a cold `make test`'s
        # builds stayed there past 150 s (2026-11-29), while a running daemon dies at once.
        assert daemon.stdout is not None
        assert select.select([daemon.stdout], [], [], 600)[0], "the daemon never started"
        assert daemon.stdout.readline() == b"up\n"
        alive = RunRecord({"root": str(cluster), "made_root": True})  # held: its run lives
        assert reap_dead_runs() == [] and daemon.poll() is None and cluster.exists()
        alive.close(keep=True)  # its run is gone (the lock with it), the record stays
        (done,) = reap_dead_runs()
        assert done.startswith(f"pid {os.getpid()}, root {cluster}")
        assert daemon.wait(timeout=120) == -9 and not cluster.exists()
        assert list(lock_dir.glob("run-*.json")) == []
    finally:
        daemon.kill()


def test_garbage_in_a_record_is_skipped(lock_dir: Path) -> None:
    path = plant(lock_dir, {})
    path.write_text('{"root": ')
    assert reap_dead_runs() == [] and path.exists()


def test_cpus_are_claimed_all_or_none_naming_the_holder() -> None:
    first = CpuClaim({CPU: "spec.osd.cpuSet"}, "crimsonbench pid 1 (spec a.yaml, results r)")
    first.acquire()
    second = CpuClaim({CPU - 1: "spec.osd.cpuSet", CPU: "spec.client.cpuSet"}, "pid 2")
    with pytest.raises(InvalidSpec) as info:
        second.acquire()
    assert info.value.field == "spec.client.cpuSet"
    assert info.value.message.startswith(
        f"CPU {CPU} is pinned by crimsonbench pid 1 (spec a.yaml, results r): two runs"
    )
    third = CpuClaim({CPU - 1: "spec.osd.cpuSet"}, "pid 3")
    assert third.acquire()  # the second kept nothing it got
    third.release()
    first.release()
    assert second.acquire()
    second.release()


def test_a_queued_run_gets_the_cpus_once_the_holder_lets_go() -> None:
    holder = CpuClaim({CPU: "spec.osd.cpuSet"}, "pid 1")
    holder.acquire()
    told: list[str] = []
    timer = threading.Timer(1.5, holder.release)
    timer.start()
    waiter = CpuClaim({CPU: "spec.osd.cpuSet"}, "pid 2")
    assert waiter.acquire(wait_s=60, waiting=told.append) is False  # it waited
    assert told == [f"waiting for CPUs: CPU {CPU} is pinned by pid 1"]
    waiter.release()
    timer.join()


def test_a_cpu_lock_file_made_a_link_is_not_followed(tmp_path: Path, lock_dir: Path) -> None:
    lock_dir.mkdir()
    target = tmp_path / "elsewhere"
    (lock_dir / f"cpu-{CPU}").symlink_to(target)
    with pytest.raises(ExecutionError, match=f"cannot open the lock file {lock_dir}/cpu-{CPU}"):
        CpuClaim({CPU: "spec.osd.cpuSet"}, "pid 1").acquire()
    assert not target.exists()


@pytest.mark.parametrize("planted", ["link", "open-to-all"])
def test_a_lock_directory_someone_else_planted_is_not_used(
    tmp_path: Path, lock_dir: Path, planted: str
) -> None:
    elsewhere = tmp_path / "etc"
    elsewhere.mkdir()
    if planted == "link":
        lock_dir.symlink_to(elsewhere)
    else:
        lock_dir.mkdir()
        lock_dir.chmod(0o777)  # writable by all, not sticky: anyone may swap the files
    with pytest.raises(ExecutionError, match="runs cannot claim CPUs there"):
        CpuClaim({CPU: "spec.osd.cpuSet"}, "pid 1").acquire()
    assert list(elsewhere.iterdir()) == []


def test_a_killed_holder_frees_its_cpus(lock_dir: Path) -> None:
    """The kernel drops a dead process's flock: nothing to clean up, nothing stale."""
    lock_dir.mkdir()
    script = (f"import fcntl, os, time; fd = os.open({str(lock_dir / f'cpu-{CPU}')!r}, "
              "os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); print(1, flush=True); "
              "time.sleep(600)")  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"1\n"
    with pytest.raises(InvalidSpec):
        CpuClaim({CPU: "spec.osd.cpuSet"}, "pid 2").acquire()
    proc.kill()
    proc.wait()
    claim = CpuClaim({CPU: "spec.osd.cpuSet"}, "pid 2")
    assert claim.acquire()
    with (lock_dir / f"cpu-{CPU}").open() as fh:  # and says who holds it now
        with pytest.raises(BlockingIOError):
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert fh.read() == "pid 2"
    claim.release()
