"""CPU list strings as used by taskset, cgroups and Ceph ("0-3,8,10-11")."""

from __future__ import annotations

import re
from collections.abc import Iterable

# Same grammar the kernel accepts in cpuset.cpus: comma separated ids or ascending ranges,
# spaces allowed around them. ASCII only: \d and \s would also take other scripts' digits
# and line breaks (in pydantic's Rust regex and in Python's re), and a CPU list is written
# into ceph.conf and fio job files.
CPUSET_PATTERN = r"^ *[0-9]+( *- *[0-9]+)?( *, *[0-9]+( *- *[0-9]+)?)* *$"
_CPUSET_RE = re.compile(CPUSET_PATTERN)
MAX_CPU_ID = 8191  # Linux NR_CPUS upper bound; guards against "0-99999999" eating memory


def parse_cpuset(text: str) -> frozenset[int]:
    """Parse "0-3,8" into {0,1,2,3,8}. Raises ValueError with the offending part."""
    if not _CPUSET_RE.match(text or ""):
        raise ValueError(f"{text!r} is not a CPU list; write ids and ranges like '0-3,8,10-11'")
    cpus: set[int] = set()
    for part in text.split(","):
        lo_s, _, hi_s = part.strip().partition("-")
        lo = int(lo_s)
        hi = int(hi_s) if hi_s else lo
        if hi < lo:
            raise ValueError(f"range {part.strip()!r} in {text!r} runs backwards; write {hi}-{lo}")
        if hi > MAX_CPU_ID:
            raise ValueError(f"CPU id {hi} in {text!r} is above the kernel limit {MAX_CPU_ID}")
        cpus.update(range(lo, hi + 1))
    return frozenset(cpus)


def format_cpuset(cpus: Iterable[int]) -> str:
    """Format {0,1,2,3,8} as "0-3,8" (sorted, ranges collapsed)."""
    ids = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(parts)
