"""fio's status lines (`--eta=always --eta-newline=1`): the live IOPS of a running step."""

from __future__ import annotations

import re
from collections.abc import Iterable

# fio's status line: "Jobs: 1 (f=1): [r(1)][45.5%][r=10.5MiB/s][r=2690 IOPS][eta 00m:06s]"
_ETA_IOPS = re.compile(
    r"\[(?:r=(?P<r>[\d.]+)(?P<rk>[kM]?))?,?(?:w=(?P<w>[\d.]+)(?P<wk>[kM]?))? IOPS\]"
)
_SCALE = {"": 1.0, "k": 1e3, "M": 1e6}


def live_iops(eta_text: str) -> float:
    """IOPS from the last status line fio printed (0 before the first one)."""
    for line in reversed(eta_text.splitlines()):
        m = _ETA_IOPS.search(line)
        if m:
            r = float(m["r"] or 0) * _SCALE[m["rk"] or ""]
            w = float(m["w"] or 0) * _SCALE[m["wk"] or ""]
            return r + w
    return 0.0


def total_live_iops(eta_texts: Iterable[str]) -> float:
    """Live IOPS summed over the fio processes of a step."""
    return sum(live_iops(t) for t in eta_texts)
