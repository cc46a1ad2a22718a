"""A daemon's admin socket, spoken to directly: the command as JSON and a NUL, then a
big-endian 32-bit length and the reply. ~0.5 ms against crimson 20.2.4, where `ceph tell`
starts a Python CLI on the CPUs being measured."""

from __future__ import annotations

import json
import socket
import struct
from pathlib import Path
from typing import Any

from crimsonbench.errors import ExecutionError


def asok_command(path: Path, command: dict[str, Any], timeout: float = 5.0) -> str:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(path))
            s.sendall(json.dumps(command).encode() + b"\0")
            (size,) = struct.unpack(">I", _read(s, 4))
            return _read(s, size).decode()
    except (OSError, struct.error) as exc:
        raise ExecutionError(f"admin socket {path}: {command.get('prefix')}: {exc}") from None


def _read(s: socket.socket, size: int) -> bytes:
    buf = b""
    while len(buf) < size:
        chunk = s.recv(size - len(buf))
        if not chunk:
            raise OSError(f"closed after {len(buf)} of {size} bytes")
        buf += chunk
    return buf
