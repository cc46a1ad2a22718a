"""Faults in the cluster log (the mons' cluster.log, or `ceph -w`'s lines): the health
checks raised and the errors logged while a step ran. Pure: the executor hands the lines
that appeared during the step.

Benign: the checks the method itself raises (noscrub/nodeep-scrub flags, pools of size
1) and the clearing of a check. Anything else raised during a step is a fault of that
step: an OSD down or slow, a crash recorded, a full disk, a clock skew."""

from __future__ import annotations

import re
from collections.abc import Iterable

from crimsonbench.results.checked_json import one_line

BENIGN_CHECKS = frozenset({"OSDMAP_FLAGS", "POOL_NO_REDUNDANCY", "POOL_APP_NOT_ENABLED"})
_CHECK = re.compile(r"Health check (?:failed|update): (?P<text>.*) \((?P<code>[A-Z0-9_]+)\)\s*$")
_ERROR = re.compile(r"cluster \[ERR\] (?P<text>.*)$")
MAX_FAULTS = 5  # a storm of lines is one reason, not a page


def health_faults(lines: Iterable[str]) -> tuple[str, ...]:
    """One line per check raised (by code, last text kept) or error logged."""
    found: dict[str, str] = {}
    for line in map(one_line, lines):  # the log's text is written into result.json
        m = _CHECK.search(line)
        if m and m["code"] not in BENIGN_CHECKS:
            found[m["code"]] = f"health check {m['code']}: {m['text'][:200]}"
            continue
        e = _ERROR.search(line)
        if e:
            found.setdefault(f"ERR {e['text'][:60]}", f"cluster error: {e['text'][:200]}")
    faults = list(found.values())
    if len(faults) > MAX_FAULTS:
        faults = faults[:MAX_FAULTS] + [f"and {len(found) - MAX_FAULTS} more in the cluster log"]
    return tuple(faults)
