"""What fio's client/server mode costs per run, apart from the I/O: the same short job run
by plain `fio` and by `fio --client` against a local `fio --server`, interleaved.

The operator runs every step as one `fio --client` (manifests/fio.py), so this is a floor
under its per-step overhead that no change of ours can remove. The job uses fio's null
engine: no Ceph, no disk, so the difference is fio's own.

    .venv/bin/python bench/bench_fio_modes.py [--pairs 5] [--runtime 2]
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

JOB = """\
[null]
ioengine=null
size=1g
rw=randread
bs=4k
time_based=1
runtime={runtime}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def timed(cmd: list[str], cwd: str) -> float:
    t0 = time.monotonic()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, timeout=120)
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--runtime", type=int, default=2)
    ap.add_argument(
        "--server-fio",
        metavar="BIN",
        help="also time `fio --client` against a `BIN --server` (e.g. the fio runner image's "
        "patched build, images/fio/): the rounds interleave every mode",
    )
    args = ap.parse_args()
    servers = {"fio --client -> fio --server": "fio"}
    if args.server_fio:
        servers[f"fio --client -> {args.server_fio} --server"] = args.server_fio
    times: dict[str, list[float]] = {"fio": [], **{name: [] for name in servers}}
    with tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp) / "null.fio"
        job.write_text(JOB.format(runtime=args.runtime))
        ports = {name: free_port() for name in servers}
        procs = [
            subprocess.Popen(
                [binary, f"--server=ip:127.0.0.1,{ports[name]}"],
                cwd=tmp,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for name, binary in servers.items()
        ]
        try:
            time.sleep(1)
            for _ in range(args.pairs):
                times["fio"].append(timed(["fio", "--output-format=json", str(job)], tmp))
                for name in servers:
                    client = f"--client=ip:127.0.0.1,{ports[name]}"
                    times[name].append(
                        timed(["fio", "--output-format=json", client, str(job)], tmp)
                    )
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=30)
    version = subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip()
    print(f"## bench_fio_modes on {platform.node()} ({os.cpu_count()} CPUs), {version}, "
          f"null engine, runtime {args.runtime} s, {args.pairs} interleaved rounds")  # fmt: skip
    print("| mode | median wall beyond runtime (s) | min | max |")
    print("|---|---|---|---|")
    for name, xs in times.items():
        beyond = [x - args.runtime for x in xs]
        print(f"| {name} | {statistics.median(beyond):.2f} | {min(beyond):.2f} "
              f"| {max(beyond):.2f} |")  # fmt: skip
    for name in servers:
        extra = [c - d for c, d in zip(times[name], times["fio"], strict=True)]
        print(f"| {name} minus plain fio, per round | {statistics.median(extra):.2f} "
              f"| {min(extra):.2f} | {max(extra):.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
