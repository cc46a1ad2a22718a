"""What the kind harness reads of the host to leave it as it found it (HostState: a
snapshot before, one after, and what changed that is ours): interfaces, iptables rules,
nft tables, mounts, loop devices, global sysctls, cgroups, /dev."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.builds import cache_root
from harness.dockerd import BRIDGE, SUBNET

# Global (not per network namespace) sysctls that something in a kind node would write:
# the kubelet's kernel tunables and systemd's fs limits (the node image shields them:
# e2e/kind/base/crimsonbench-entrypoint), and what docker or kube-proxy could touch.
KUBELET_TUNABLES = (
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
)
GLOBAL_SYSCTLS = (
    *KUBELET_TUNABLES,
    "kernel.pid_max",
    "fs.file-max",
    "fs.nr_open",
    "fs.inotify.max_user_watches",
    "fs.inotify.max_user_instances",
    "net.ipv4.ip_forward",
    "net.bridge.bridge-nf-call-iptables",
    "net.netfilter.nf_conntrack_max",
)


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


@dataclass
class HostState:
    """What our kind cluster could leave on the host, as seen from the host."""

    links: set[str]
    iptables: set[str]
    nft_tables: set[str]
    mounts: set[str]
    loops: dict[str, str]
    sysctls: dict[str, str]
    cgroups: set[str]
    dev: set[str]
    run_containerd: bool  # the shims' sockets (/run/containerd/s): a compiled-in path
    # a kubelet on the host itself (another test's node) writes KUBELET_TUNABLES too
    host_kubelet: bool = False

    @classmethod
    def snapshot(cls) -> HostState:
        return cls(
            links=_links(),
            iptables=_iptables_lines(),
            nft_tables=_nft_tables(),
            mounts=set(mounts()),
            loops=loop_devices(),
            sysctls=_sysctls(),
            cgroups=_our_cgroups(),
            dev={p.name for p in Path("/dev").iterdir()},
            run_containerd=os.path.lexists("/run/containerd"),
            host_kubelet=_host_kubelet_running(),
        )

    def leaks_since(self, before: HostState) -> list[str]:
        """Differences that are ours (anything else on this shared machine is not judged)."""
        out = []
        ours = re.compile(r"^(br-|veth|docker|" + re.escape(BRIDGE) + ")")
        new_links = sorted(n for n in self.links - before.links if ours.match(n))
        if new_links:
            out.append(f"interfaces left: {new_links}")
        marks = ("DOCKER", BRIDGE, SUBNET.rsplit(".", 1)[0] + ".")
        new_rules = sorted(r for r in self.iptables - before.iptables if any(m in r for m in marks))
        if new_rules:
            out.append(f"iptables rules left: {new_rules}")
        new_tables = sorted(
            t for t in self.nft_tables - before.nft_tables
            if "crimsonbench" in t or "kube-proxy" in t or "docker" in t.lower()
        )  # fmt: skip
        if new_tables:
            out.append(f"nft tables left: {new_tables}")
        data = str(cache_root() / "docker")
        new_mounts = sorted(
            m for m in self.mounts - before.mounts
            if m.startswith((data, "/run/crimsonbench-docker")) or "/docker/" in m
        )  # fmt: skip
        if new_mounts:
            out.append(f"mounts left: {new_mounts}")
        new_loops = {
            dev: f for dev, f in self.loops.items()
            if dev not in before.loops and (f.startswith(data) or not Path(f).exists())
        }  # fmt: skip
        if new_loops:
            out.append(f"loop devices left (backing file ours or inside a node): {new_loops}")
        changed = self.sysctls_changed_since(before)
        if changed:
            out.append(f"global sysctls changed (before, after): {changed}")
        new_cgroups = sorted(self.cgroups - before.cgroups)
        if new_cgroups:
            out.append(f"cgroups left: {new_cgroups[:20]}")
        new_dev = sorted(self.dev - before.dev)
        if new_dev:
            out.append(f"new entries in /dev: {new_dev}")
        host_containerd = self.host_kubelet or before.host_kubelet  # its shims use it too
        if self.run_containerd and not before.run_containerd and not host_containerd:
            out.append("/run/containerd left (our dockerd's containerd shims made it)")
        return out

    def sysctls_changed_since(self, before: HostState) -> dict[str, tuple[str | None, str]]:
        """Global sysctls that changed, (before, after); the kubelet's tunables are not
        judged while a kubelet runs on the host itself (it may have written them)."""
        foreign = self.host_kubelet or before.host_kubelet
        return {
            k: (before.sysctls.get(k), v)
            for k, v in self.sysctls.items()
            if before.sysctls.get(k) != v and not (foreign and k in KUBELET_TUNABLES)
        }


def _host_kubelet_running() -> bool:
    """A kubelet process that is not in one of our node containers."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "comm").read_text().strip() != "kubelet":
                continue
            if "crimsonbench-docker" not in (proc / "cgroup").read_text():
                return True
        except OSError:
            continue
    return False


def _links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line}


def _iptables_lines() -> set[str]:
    lines: set[str] = set()
    for tool in ("iptables-save", "ip6tables-save", "iptables-legacy-save"):
        if shutil.which(tool):
            out = subprocess.run([tool], capture_output=True, text=True).stdout
            lines |= {f"{tool}: {x}" for x in out.splitlines() if x and not x.startswith("#")}
    return lines


def _nft_tables() -> set[str]:
    if shutil.which("nft") is None:
        return set()
    out = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    return {x.strip() for x in out.splitlines() if x.strip()}


def _sysctls() -> dict[str, str]:
    out = {}
    for key in GLOBAL_SYSCTLS:
        p = Path("/proc/sys", *key.split("."))
        if p.exists():
            out[key] = " ".join(p.read_text().split())
    return out


def _our_cgroups() -> set[str]:
    out: set[str] = set()
    for top in Path("/sys/fs/cgroup").glob("*/crimsonbench-docker"):
        out |= {str(d) for d in top.iterdir() if d.is_dir()}
    return out
