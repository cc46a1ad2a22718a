"""A local step's start barrier: the rendezvous of manifests/start_barrier.py served from
this process (a thread on 127.0.0.1), for a step with several fio processes. The fio of
every client (also in a Ceph root: it shares the host's network) reaches it there."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from crimsonbench.manifests.start_barrier import listen, serve
from crimsonbench.plan.types import BarrierAddress, RunPlan

LOG_NAME = "barrier.log"


@contextmanager
def start_barrier(plan: RunPlan, step_dir: Path) -> Iterator[BarrierAddress | None]:
    """Where the step's jobs meet (None: one fio, no barrier) while the step runs; the
    barrier's log in step_dir/barrier.log."""
    timing = plan.timing
    if not timing.barrier_jobs:
        yield None
        return
    listener = listen("127.0.0.1", 0)
    token = secrets.token_hex(8)
    stop = threading.Event()
    step_dir.mkdir(parents=True, exist_ok=True)
    with listener, (step_dir / LOG_NAME).open("w") as log:
        thread = threading.Thread(
            target=serve,
            args=(listener, timing.barrier_jobs, timing.start_barrier_cap_s, token.encode(), log),
            kwargs={"stop": stop.is_set},
            name="start-barrier",
            daemon=True,
        )
        thread.start()
        try:
            yield BarrierAddress("127.0.0.1", listener.getsockname()[1], token)
        finally:
            stop.set()
            thread.join(timeout=timing.start_barrier_cap_s + 5)
