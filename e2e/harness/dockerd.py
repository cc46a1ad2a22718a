"""Our own dockerd (e2e/kind/dockerd.sh: state under ~/.cache/crimsonbench/docker and
/run/crimsonbench-docker, no iptables, no docker0) and the docker network kind's nodes join."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

from harness.builds import REPO
from harness.processes import run

SCRIPT = REPO / "e2e" / "kind" / "dockerd.sh"
# Our own docker network for the nodes (kind uses an existing network of the name given in
# KIND_EXPERIMENTAL_DOCKER_NETWORK): a fixed bridge name and subnet, so the host check can
# tell our interfaces and rules from anybody else's.
NETWORK = "crimsonbench-kind"
BRIDGE = "cb-kind0"
SUBNET = "172.30.77.0/24"


@dataclass
class Dockerd:
    """Our dockerd (e2e/kind/dockerd.sh); `started` tells whether we must stop it."""

    env: dict[str, str]
    started: bool

    @classmethod
    def start(cls) -> Dockerd:
        base = {**os.environ}
        script = str(SCRIPT)
        status = subprocess.run([script, "status"], capture_output=True, text=True, env=base)
        started = status.returncode != 0
        proc = run([script, "start"], base, timeout=1200)
        host = proc.stdout.split()[-1]
        bin_dir = run([script, "bin"], base, timeout=30).stdout.split()[-1]
        env = {**base, "DOCKER_HOST": host, "PATH": f"{bin_dir}:{base.get('PATH', '')}"}
        return cls(env=env, started=started)

    def stop(self) -> None:
        if self.started:
            run([str(SCRIPT), "stop"], self.env, timeout=300)

    def docker(self, *args: str, timeout: float = 120, check: bool = True) -> str:
        return run(["docker", *args], self.env, timeout=timeout, check=check).stdout

    def ensure_network(self) -> None:
        """Our network for the nodes (kind joins it: KIND_EXPERIMENTAL_DOCKER_NETWORK)."""
        if self.docker("network", "ls", "-q", "--filter", f"name=^{NETWORK}$").strip():
            return
        self.docker(
            "network", "create", "--driver", "bridge", "--subnet", SUBNET,
            "-o", f"com.docker.network.bridge.name={BRIDGE}",
            "-o", "com.docker.network.bridge.enable_ip_masquerade=false",
            "-o", "com.docker.network.driver.mtu=1500",
            NETWORK,
        )  # fmt: skip

    def remove_network(self) -> str:
        """Our network removed; what went wrong ("" nothing)."""
        if not self.docker("network", "ls", "-q", "--filter", f"name=^{NETWORK}$",
                           check=False).strip():  # fmt: skip
            return ""
        proc = run(["docker", "network", "rm", NETWORK], self.env, 120, check=False)
        return f"docker network rm {NETWORK}: {proc.stderr.strip()}" if proc.returncode else ""
