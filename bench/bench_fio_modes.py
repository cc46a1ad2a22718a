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
    args = ap.parse_args()
    direct: list[float] = []
    client: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp) / "null.fio"
        job.write_text(JOB.format(runtime=args.runtime))
        port = free_port()
        server = subprocess.Popen(
            ["fio", f"--server=ip:127.0.0.1,{port}"],
            cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            time.sleep(1)
            for _ in range(args.pairs):
                direct.append(timed(["fio", "--output-format=json", str(job)], tmp))
                client.append(
                    timed(
                        ["fio", "--output-format=json", f"--client=ip:127.0.0.1,{port}", str(job)],
                        tmp,
                    )  # fmt: skip
                )
        finally:
            server.terminate()
            server.wait(timeout=30)
    version = subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip()
    print(f"## bench_fio_modes on {platform.node()} ({os.cpu_count()} CPUs), {version}, "
          f"null engine, runtime {args.runtime} s, {args.pairs} interleaved pairs")  # fmt: skip
    print("| mode | median wall beyond runtime (s) | min | max |")
    print("|---|---|---|---|")
    for name, xs in (("fio", direct), ("fio --client -> fio --server", client)):
        beyond = [x - args.runtime for x in xs]
        print(f"| {name} | {statistics.median(beyond):.2f} | {min(beyond):.2f} "
              f"| {max(beyond):.2f} |")  # fmt: skip
    extra = [c - d for c, d in zip(client, direct, strict=True)]
    print(f"| client/server minus plain, per pair | {statistics.median(extra):.2f} "
          f"| {min(extra):.2f} | {max(extra):.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
