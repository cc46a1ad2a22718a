"""The start barrier of a step run by several fio processes: every job waits, in fio's
exec_prerun (the last thing a job does before its clock starts), until every job of every
client has come that far, then all are let go at once.

Why a rendezvous and not an instant: fio sets up one process's jobs one after another (a
librbd connect and image open each) before starting any, so each client's jobs become
ready when its own setup ends. An instant fixed at the launch (launch + an allowance) was
outrun on a loaded machine (kind: one client's setup 1 s late, every job together for 2
of the step's 3 s). Here the last job to be ready starts everyone, however long setups take,
and no clock of one node is compared with another's.

One program for both executors, standard library only: local mode calls serve() in a
thread; on Kubernetes the fio driver runs this file with python3 in its pod
(fio-driver.sh, `python3 start_barrier.py EXPECTED CAP_S PORT TOKEN HOST`): it is package data
the operator sends with every start, like the job files, so any runner image works.

A job's prerun (plan/fio_jobs.py) connects, sends the step's token and waits for one byte.
Only connections that send the token count (a stray connection does not start the step).
Nobody arriving after CAP_S (a client whose setup failed) does not hold the others for
ever: they are let go at the cap, and any job arriving later is let go at once. The log
(one JSON object per line) says when each job arrived and when they were let go; the
step's results read it (results/step_log.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from typing import IO, Any

GO = b"g"
TOKEN_WAIT_S = 2.0  # a connection that does not send the token at once is not a job


def _token_of(conn: socket.socket, size: int) -> bytes:
    conn.settimeout(TOKEN_WAIT_S)
    got = b""
    try:
        while len(got) < size:
            chunk = conn.recv(size - len(got))
            if not chunk:
                break
            got += chunk
    except OSError:
        return b""
    return got


def _accept(listener: socket.socket, token: bytes, until: float | None) -> socket.socket | None:
    """The next connection that sends the token (None: `until` passed, monotonic)."""
    while True:
        left = None if until is None else until - time.monotonic()
        if left is not None and left <= 0:
            return None
        listener.settimeout(left)
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            return None
        if _token_of(conn, len(token)) == token:
            return conn
        conn.close()


def _go(conns: list[socket.socket]) -> None:
    for conn in conns:
        with contextlib.suppress(OSError):  # that job is gone: fio reports it
            conn.sendall(GO)
        conn.close()


def serve(
    listener: socket.socket,
    expected: int,
    cap_s: float,
    token: bytes,
    log: IO[str],
    stop: Callable[[], bool] = lambda: False,
) -> dict[str, Any]:
    """Let `expected` jobs go at once when all have arrived, or at `cap_s` whoever has;
    then, if some were missing, each late one at once until `stop()` (looked at twice a
    second; a stop before everyone came lets go whoever waits). The release record is
    written to `log` as soon as it happens (and returned)."""
    until = time.monotonic() + cap_s
    waiting: list[socket.socket] = []
    arrivals: list[float] = []
    while len(waiting) < expected and time.monotonic() < until and not stop():
        conn = _accept(listener, token, min(until, time.monotonic() + 0.5))
        if conn is not None:
            arrivals.append(time.time())
            waiting.append(conn)
    released = time.time()
    _go(waiting)
    record = {"event": "released", "expected": expected, "arrived": len(arrivals),
              "first": min(arrivals, default=released), "last": max(arrivals, default=released),
              "released": released, "timed_out": len(arrivals) < expected}  # fmt: skip
    log.write(json.dumps(record) + "\n")
    log.flush()
    while record["timed_out"] and not stop():  # late jobs go at once
        conn = _accept(listener, token, time.monotonic() + 0.5)
        if conn is None:
            continue
        log.write(json.dumps({"event": "late", "at": time.time()}) + "\n")
        log.flush()
        _go([conn])
    return record


def listen(host: str, port: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(1024)
    return listener


def main(argv: list[str]) -> int:
    """python3 start_barrier.py EXPECTED CAP_S PORT TOKEN HOST: listens on HOST:PORT (the
    pod's own address), writes `barrier.ready` once it does (the driver starts fio then),
    the log on stdout; runs until killed if a job was missing at the cap."""
    expected, cap_s, port, token, host = argv[0], argv[1], argv[2], argv[3], argv[4]
    listener = listen(host, int(port))
    with open("barrier.ready.part", "w") as ready:
        ready.write(f"{host} {port}\n")
    os.replace("barrier.ready.part", "barrier.ready")  # whole or not at all
    serve(listener, int(expected), float(cap_s), token.encode(), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
