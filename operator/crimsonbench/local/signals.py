"""Stop signals of a local run: the first stops it, none cuts its cleanup short.

Ctrl-C (SIGINT), SIGTERM and a closed terminal (SIGHUP) all mean "stop now, keep what is
finished, tear the cluster down". Only the first one is raised (Interrupted); every later
one, and any signal while a teardown runs (shield()), is logged and otherwise ignored: a
second Ctrl-C that interrupted the teardown would leave daemons, loop devices and mounts
behind. A run killed outright (SIGKILL) leaves them anyway; the next run removes them
(local/leftovers.py).

Handlers are Python's, so they run in the main thread only; elsewhere both context
managers do nothing (a test driving a cluster from a thread keeps the defaults).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from crimsonbench.errors import CrimsonBenchError

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(CrimsonBenchError):
    """SIGINT, SIGTERM or SIGHUP: stop now, keep what is finished, clean up."""


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _hung_up() -> None:
    """The terminal is gone: later writes to it would fail (EIO) mid-cleanup, so stdout
    and stderr go to /dev/null from here on (the run's files still say how it ended)."""
    fd = os.open(os.devnull, os.O_WRONLY)
    try:
        for target in (1, 2):
            with contextlib.suppress(OSError):
                os.dup2(fd, target)
    finally:
        os.close(fd)


class StopOnce:
    """`with StopOnce():` raises Interrupted at the first stop signal, ignores the rest."""

    def __init__(self) -> None:
        self.received: list[str] = []
        self._armed = True
        self._previous: dict[signal.Signals, object] = {}

    def __enter__(self) -> StopOnce:
        if _main_thread():
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous.clear()

    def disarm(self) -> None:
        """From now on signals are only logged (the run is ending anyway)."""
        self._armed = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if signum == signal.SIGHUP:
            _hung_up()
        self.received.append(name)
        if self._armed:
            self._armed = False
            raise Interrupted(f"stopped by {name}")
        log.warning("%s: already stopping; the run ends once its cluster is gone", name)


@contextlib.contextmanager
def shield(what: str) -> Iterator[list[str]]:
    """Stop signals are logged, not raised, while the block runs (a teardown); yields the
    names of those received."""
    received: list[str] = []
    if not _main_thread():
        yield received
        return

    def note(signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGHUP:
            _hung_up()
        received.append(signal.Signals(signum).name)
        log.warning("%s during %s: ignored until it is done", received[-1], what)

    previous = {sig: signal.signal(sig, note) for sig in STOP_SIGNALS}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Stop signals wait until the block is done, then reach the handler they would have
    reached: for starting a process and keeping its handle (a stop between the two would
    leave a process nobody knows of)."""
    if not _main_thread():
        yield
        return
    received: list[int] = []

    def later(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, later) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum in received:
            signal.raise_signal(signum)


@contextlib.contextmanager
def stop_exits(code: int) -> Iterator[None]:
    """A stop signal ends the process at once with `code`, no traceback: around a command,
    outside the run's own handling (StopOnce), when there is nothing to tear down."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(code)

    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS} if _main_thread() else {}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
