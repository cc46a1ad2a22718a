"""Linux AIO contexts for crimson OSDs: each Seastar reactor reserves ~11,000 of the
host-wide fs.aio-max-nr (65,536 by default) and crimson bluestore's alien store ~2,048
more (measured on 20.2.4: fs.aio-nr before and after one OSD). Past the limit a reactor
fails at start with EAGAIN, deep in Seastar's log; checked here first instead.
"""

from __future__ import annotations

import logging
from pathlib import Path

from crimsonbench.errors import ExecutionError
from crimsonbench.spec.models import ObjectStore, OsdSpec

log = logging.getLogger(__name__)

AIO_NR = Path("/proc/sys/fs/aio-nr")
AIO_MAX_NR = Path("/proc/sys/fs/aio-max-nr")
PER_REACTOR = 11_100  # 11,026 measured
ALIEN_BLUESTORE = 2_100  # 2,048 measured


def aio_needed(osd: OsdSpec) -> int:
    per_osd = PER_REACTOR * osd.reactors_per_osd
    if osd.object_store == ObjectStore.BLUESTORE:
        per_osd += ALIEN_BLUESTORE
    return per_osd * osd.count


class AioLimit:
    """Makes room for `needed` AIO contexts: raises fs.aio-max-nr when it must (as root)
    and puts the old value back on restore(), unless someone changed it meanwhile."""

    def __init__(self) -> None:
        self._old: int | None = None
        self._set: int | None = None

    def ensure(self, needed: int) -> None:
        used, limit = _read(AIO_NR), _read(AIO_MAX_NR)
        if used + needed <= limit:
            return
        wanted = used + needed + PER_REACTOR  # one reactor's worth of slack
        try:
            AIO_MAX_NR.write_text(f"{wanted}\n")
        except OSError as exc:
            raise ExecutionError(
                f"the crimson OSDs need ~{needed} AIO contexts, but fs.aio-max-nr is {limit} "
                f"with {used} in use, and raising it failed ({exc}); run as root or "
                f"`sysctl fs.aio-max-nr={wanted}`"
            ) from None
        self._old, self._set = limit, wanted
        log.info("fs.aio-max-nr %d -> %d for the crimson OSDs (restored afterwards)", limit, wanted)

    @property
    def changed(self) -> tuple[int, int] | None:
        """(the value before, the value set) while raised; a dead run's successor puts the
        value back from its record (local/leftovers.py)."""
        return None if self._old is None or self._set is None else (self._old, self._set)

    def restore(self) -> list[str]:
        """Returns what could not be restored."""
        if self._old is None or self._set is None:
            return []
        old, was_set, self._old = self._old, self._set, None
        return put_back(old, was_set)


def put_back(old: int, was_set: int) -> list[str]:
    """fs.aio-max-nr back to `old` unless someone changed it from `was_set` meanwhile."""
    try:
        if _read(AIO_MAX_NR) == was_set:
            AIO_MAX_NR.write_text(f"{old}\n")
        else:
            log.warning("fs.aio-max-nr was changed by someone else meanwhile; left as is")
    except OSError as exc:
        return [f"fs.aio-max-nr not restored to {old}: {exc}"]
    return []


def _read(path: Path) -> int:
    return int(path.read_text().split()[0])
