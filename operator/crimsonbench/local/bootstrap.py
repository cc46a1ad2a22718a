"""Files of a throwaway cluster: directory layout, ceph.conf, keyrings, monmap, mon mkfs.

ceph.conf holds only what a daemon needs before it can reach the monitor (addresses, paths,
auth, object store choice, mkfs-time store options). Everything tunable goes to the mon
config database, because ceph.conf values override it (`ceph config set` would seem to do
nothing for a key that is also in ceph.conf).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from crimsonbench.errors import ExecutionError
from crimsonbench.local.ceph_cli import run
from crimsonbench.local.readiness import poll_until
from crimsonbench.local.userland import Userland
from crimsonbench.plan.ini import CEPH_CONF, render_ini

MON_ID = "a"
MGR_ID = "x"
# AF_UNIX paths are limited to 107 bytes; the longest socket is a client's
# "<run>/ceph-client.admin.<pid>.<cctid>.asok", up to 47 bytes past the run dir. A longer
# run dir is reached through a short symlink in /tmp (bind() resolves it).
MAX_RUN_DIR_LEN = 60


@dataclass(frozen=True)
class Layout:
    """Every path of one cluster, all under `root`."""

    root: Path
    run_alias: Path | None = None  # short symlink to root/run when root is a long path

    @property
    def conf(self) -> Path:
        return self.root / "ceph.conf"

    @property
    def client_conf(self) -> Path:
        return self.root / "client.conf"

    @property
    def admin_keyring(self) -> Path:
        return self.root / "ceph.client.admin.keyring"

    @property
    def mon_keyring(self) -> Path:
        return self.root / "mon.keyring"

    @property
    def monmap(self) -> Path:
        return self.root / "monmap"

    @property
    def run(self) -> Path:
        """The run dir as daemons see it (sockets, pid files)."""
        return self.run_alias or self.root / "run"

    @property
    def log(self) -> Path:
        return self.root / "log"

    @property
    def mon_data(self) -> Path:
        return self.root / f"mon.{MON_ID}"

    @property
    def mgr_data(self) -> Path:
        return self.root / f"mgr.{MGR_ID}"

    def osd_data(self, osd_id: int) -> Path:
        return self.root / f"osd.{osd_id}"

    def block_file(self, osd_id: int) -> Path:
        """Backing file of a loop device (bluestore on loop)."""
        return self.root / f"osd.{osd_id}.img"

    def make_dirs(self) -> None:
        for d in (self.root, self.root / "run", self.log, self.root / "crash"):
            d.mkdir(parents=True, exist_ok=True)
        if self.run_alias is not None:
            self.run_alias.symlink_to(self.root / "run")


def layout_for(root: Path) -> Layout:
    if len(str(root / "run")) <= MAX_RUN_DIR_LEN:
        return Layout(root)
    return Layout(root, Path("/tmp") / f"cbr-{uuid.uuid4().hex[:12]}")


def render_conf(
    layout: Layout,
    fsid: str,
    mon_port: int,
    osd_sections: dict[int, dict[str, str]],
    global_extra: dict[str, str] | None = None,
) -> str:
    r = layout.root
    sections: dict[str, dict[str, str]] = {
        "global": {
            "fsid": fsid,
            "mon_host": f"[v2:127.0.0.1:{mon_port}]",
            "public_addr": "127.0.0.1",
            "cluster_addr": "127.0.0.1",
            "ms_bind_msgr1": "false",  # msgr2 only: one port per daemon, all clients speak it
            "auth_cluster_required": "cephx",
            "auth_service_required": "cephx",
            "auth_client_required": "cephx",
            "run_dir": str(layout.run),
            "admin_socket": "$run_dir/$cluster-$name.asok",
            "pid_file": "$run_dir/$name.pid",
            "log_file": f"{layout.log}/$cluster-$name.log",
            "crash_dir": f"{r}/crash",
            "mon_data": f"{r}/mon.$id",
            "mgr_data": f"{r}/mgr.$id",
            "osd_data": f"{r}/osd.$id",
            "osd_crush_chooseleaf_type": "0",  # read when the mon creates the crush map
            **(global_extra or {}),
        },
        "mon": {
            "keyring": "$mon_data/keyring",
            "mon_cluster_log_file": f"{layout.log}/cluster.log",
            "mgr_initial_modules": "iostat",  # mkfs-time; skips restful/nfs on 2 cores
        },
        "mgr": {"keyring": "$mgr_data/keyring"},
        "osd": {"keyring": "$osd_data/keyring"},
        "client": client_section(layout),
    }
    for osd_id, opts in sorted(osd_sections.items()):
        sections[f"osd.{osd_id}"] = opts
    return ini(sections)


def client_section(layout: Layout) -> dict[str, str]:
    return {
        "keyring": str(layout.admin_keyring),
        "admin_socket": "$run_dir/$cluster-$name.$pid.$cctid.asok",
        "log_to_file": "false",  # errors reach the caller on stderr; no log per CLI call
    }


def render_client_conf(layout: Layout, fsid: str, mon_port: int) -> str:
    """The minimum a librados client (fio, rbd) needs: where the mon is and the key."""
    return ini(
        {
            "global": {
                "fsid": fsid,
                "mon_host": f"[v2:127.0.0.1:{mon_port}]",
                "run_dir": str(layout.run),
            },
            "client": client_section(layout),
        }
    )


def ini(sections: dict[str, dict[str, str]]) -> str:
    return render_ini(sections, CEPH_CONF)


def make_keyrings(layout: Layout, ul: Userland) -> None:
    """admin and mgr keys, imported into the mon keyring so mon mkfs registers them."""
    admin = str(layout.admin_keyring)
    mgr_keyring = layout.mgr_data / "keyring"
    layout.mgr_data.mkdir(parents=True, exist_ok=True)
    tool = ["ceph-authtool", "--create-keyring", "--gen-key"]
    all_caps = ["--cap", "mon", "allow *", "--cap", "osd", "allow *"]
    all_caps += ["--cap", "mgr", "allow *", "--cap", "mds", "allow *"]
    run([*tool, admin, "-n", "client.admin", *all_caps], userland=ul)
    mgr_caps = ["--cap", "mon", "allow profile mgr", "--cap", "osd", "allow *"]
    mgr_caps += ["--cap", "mds", "allow *"]
    run([*tool, str(mgr_keyring), "-n", f"mgr.{MGR_ID}", *mgr_caps], userland=ul)
    mon = str(layout.mon_keyring)
    run([*tool, mon, "-n", "mon.", "--cap", "mon", "allow *"], userland=ul)
    run(["ceph-authtool", mon, "--import-keyring", admin], userland=ul)
    run(["ceph-authtool", mon, "--import-keyring", str(mgr_keyring)], userland=ul)


def mkfs_mon(layout: Layout, fsid: str, mon_port: int, ul: Userland) -> None:
    monmap = str(layout.monmap)
    addr = f"[v2:127.0.0.1:{mon_port}]"
    run(
        ["monmaptool", "--create", "--clobber", "--fsid", fsid, "--addv", MON_ID, addr, monmap],
        userland=ul,
    )
    layout.mon_data.mkdir(parents=True, exist_ok=True)
    keyring = ["--keyring", str(layout.mon_keyring)]
    mkfs = ["ceph-mon", "-c", str(layout.conf), "--mkfs", "-i", MON_ID, "--monmap", monmap]
    run([*mkfs, *keyring], userland=ul)


def gen_key(ul: Userland) -> str:
    return run(["ceph-authtool", "--gen-print-key"], userland=ul).strip()


def write_osd_keyring(layout: Layout, osd_id: int, secret: str) -> None:
    path = layout.osd_data(osd_id) / "keyring"
    path.write_text(f"[osd.{osd_id}]\n\tkey = {secret}\n")
    path.chmod(0o600)


def new_osd_json(layout: Layout, osd_id: int, secret: str) -> Path:
    """Input of `ceph osd new`, which registers the OSD with this cephx secret (vstart.sh)."""
    path = layout.osd_data(osd_id) / "new.json"
    path.write_text(json.dumps({"cephx_secret": secret}))
    path.chmod(0o600)
    return path


def losetup(backing: Path, size_bytes: int) -> str:
    """Attach a sparse file as a loop device; returns /dev/loopN."""
    with open(backing, "wb") as fh:
        fh.truncate(size_bytes)
    return run(["losetup", "--find", "--show", "--direct-io=on", str(backing)]).strip()


def loop_devices_of(backing: Path) -> list[str]:
    """Loop devices still attached to `backing` (empty once detached)."""
    res = subprocess.run(
        ["losetup", "--associated", str(backing), "--noheadings", "--output", "NAME"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        start_new_session=True,
    )
    return [line.strip() for line in res.stdout.splitlines() if line.strip()]


def detach_loop(dev: str, backing: Path, timeout: float = 30.0) -> list[str]:
    """Detach a loop device; the OSD may hold it a moment after exiting, so retry.
    Returns what could not be detached (empty on success)."""

    def detached() -> list[str]:
        if not loop_devices_of(backing):
            return []
        try:
            run(["losetup", "--detach", dev], timeout=15)
        except ExecutionError as exc:
            return [f"loop device {dev} ({backing}): {exc}"]
        still = loop_devices_of(backing)
        return [f"loop device {dev} ({backing}): still attached"] if still else []

    return poll_until(detached, timeout, interval=0.5)
