"""fio as the host sees it, for the kind tests: kind's nodes are containers, their pods'
processes are processes of this machine. Independent of the product: it reads
/proc (psutil), never the operator's records."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil


class FioProcesses:
    """Polls every `interval` s (from a thread of its own, as a context manager):
    - clients_by_step: step key -> every `fio --client` seen running in that step's
      directory on the fio driver (/results/steps/<key>), as (pid, start time): a step
      whose fio client ran twice shows two. An attempt the operator dropped (its directory
      renamed <key>.dropped.<ns>, the client perhaps still ending) stays under <key>;
    - running_steps: the step keys with a fio client running at the last poll;
    - server_affinity: host thread id -> CPUs allowed, for every thread of every
      `fio --server`; servers_seen: their pids."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.clients_by_step: dict[str, set[tuple[int, float]]] = defaultdict(set)
        self.running_steps: set[str] = set()
        self.server_affinity: dict[int, set[int]] = {}
        self.servers_seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> FioProcesses:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=15)

    def _poll(self) -> None:
        while not self._stop.is_set():
            running = set()
            for proc in psutil.process_iter(["name", "cmdline", "create_time"]):
                if proc.info.get("name") != "fio":
                    continue
                cmd = proc.info.get("cmdline") or []
                try:
                    if any(c.startswith("--client=") for c in cmd):
                        step = Path(proc.cwd()).name.split(".dropped.")[0]
                        self.clients_by_step[step].add((proc.pid, proc.info["create_time"]))
                        running.add(step)
                    elif any("--server" in c for c in cmd):
                        for th in proc.threads():
                            affinity = set(psutil.Process(th.id).cpu_affinity())
                            self.server_affinity[th.id] = affinity
                        self.servers_seen.add(proc.pid)
                except psutil.Error:
                    continue
            self.running_steps = running
            self._stop.wait(self.interval)

    def runs_per_step(self) -> dict[str, int]:
        return {step: len(procs) for step, procs in self.clients_by_step.items()}


def expected_runs(run: Mapping[str, Any], steps: Sequence[str]) -> dict[str, int]:
    """fio clients each step should have run: once, plus once per retry the run recorded.
    A retry is only legitimate for an OSD that restarted or went down during the step (a
    loaded machine can fail an OSD's liveness probe): any other reason fails here."""
    record = ((run.get("status") or {}).get("record")) or {}  # what the operator remembers
    retries: dict[str, list[str]] = record.get("stepRetries") or {}
    for step, reasons in retries.items():
        assert step in steps and all(r.startswith("osd.") for r in reasons), (step, reasons)
    return {"prefill": 1, **{s: 1 + len(retries.get(s, [])) for s in steps}}
