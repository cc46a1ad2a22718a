"""What the harnesses read of the host to leave it as they found it: its packet filter as
`iptables-save` prints it (and removal of the chains a kubelet leaves behind:
KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT outlive it), its mounts and its
loop devices."""

from __future__ import annotations

import contextlib
import shlex
import shutil
import subprocess
from pathlib import Path


def iptables_rules() -> list[str]:
    """The user chains and rules of every table, IPv4 and IPv6, as `iptables-save` prints
    them minus counters: "<cmd> <table> <line>". Built-in chains with the ACCEPT policy
    are left out, so an empty table equals no table (iptables-nft creates tables on first
    use, and nothing removes them)."""
    rules = []
    for cmd in ("iptables-save", "ip6tables-save"):
        if shutil.which(cmd) is None:
            continue
        out = subprocess.run([cmd], capture_output=True, text=True, check=True, timeout=60)
        table = ""
        for line in out.stdout.splitlines():
            if line.startswith("*"):
                table = line[1:]
            elif line.startswith(":"):  # ":CHAIN POLICY [packets:bytes]"
                chain, policy = line[1:].split()[:2]
                if policy != "ACCEPT":
                    rules.append(f"{cmd} {table} :{chain} {policy}")
            elif line.startswith("-"):
                rules.append(f"{cmd} {table} {line}")
    return rules


def remove_kubelet_chains(before: list[str]) -> None:
    """Remove the KUBE-* chains (and the jumps to them) a kubelet created since `before`
    (iptables_rules()): KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT outlive it.
    Call it once the kubelet is stopped (it re-creates them while it runs)."""
    now = iptables_rules()
    added = [r for r in now if r not in before]
    new_chains = {(r.split()[0], r.split()[1], r.split()[2][1:]) for r in added
                  if r.split()[2].startswith(":KUBE-")}  # fmt: skip
    for rule in added:  # jumps into a new chain, from any chain
        cmd, table, line = rule.split(" ", 2)
        argv = shlex.split(line)
        if argv[0] == "-A" and "-j" in argv:
            target = argv[argv.index("-j") + 1]
            if (cmd, table, target) in new_chains:
                iptables = cmd.replace("-save", "")
                subprocess.run([iptables, "-t", table, "-D", *argv[1:]], check=True, timeout=60)
    for cmd, table, chain in sorted(new_chains):
        iptables = cmd.replace("-save", "")
        subprocess.run([iptables, "-t", table, "-F", chain], check=True, timeout=60)
        subprocess.run([iptables, "-t", table, "-X", chain], check=True, timeout=60)


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
