"""Free TCP ports for a monitor, reserved across concurrent runs on the same machine.

Only the monitor needs a fixed port (it is written into the monmap). mgr and OSDs bind the
first free port in ms_bind_port_min..max (6800-7300) and retry on EADDRINUSE, so two
clusters coexist there without help. The mon port is drawn from 20000-32767: below the
kernel's ephemeral range (32768-60999, used for client source ports, which could grab our
port between the check and the mon's bind) and outside Ceph's 6800-7300.
"""

from __future__ import annotations

import logging
import random
import socket
from dataclasses import dataclass

from crimsonbench.errors import ExecutionError

log = logging.getLogger(__name__)

PORT_RANGE = (20000, 32767)
MAX_ATTEMPTS = 200


@dataclass
class PortLease:
    """A port no other crimsonbench run will pick while the lease is held.

    The lock is an abstract unix socket named after the port: the kernel frees it when the
    holder closes it or dies, so no lock files are left behind.
    """

    port: int
    _lock: socket.socket | None

    def release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def _bindable(port: int, host: str) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _lock(port: int) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(f"\0crimsonbench-mon-port-{port}")
    except OSError:  # EADDRINUSE: another run holds this port
        sock.close()
        return None
    return sock


def reserve_port(host: str = "127.0.0.1") -> PortLease:
    """Pick a random free port and hold a lock on it until release()."""
    rng = random.SystemRandom()
    for _ in range(MAX_ATTEMPTS):
        port = rng.randint(*PORT_RANGE)
        lock = _lock(port)
        if lock is None:
            continue
        if _bindable(port, host):
            log.debug("reserved port %d", port)
            return PortLease(port, lock)
        lock.close()
    raise ExecutionError(
        f"no free TCP port on {host} in {PORT_RANGE[0]}-{PORT_RANGE[1]} after "
        f"{MAX_ATTEMPTS} tries; stop other clusters or free ports"
    )
