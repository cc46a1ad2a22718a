"""Check a running crimson OSD's threads against its planned CPUs, from what /proc shows
(tid, comm, Cpus_allowed). Read on crimson 20.2.4: reactor 0 is the main thread (tid ==
pid, comm "crimson-osd"), reactor N is the lowest tid named "reactor-N"; each reactor also
starts an idle helper of the same name and CPU; "syscall-N" serve reactor N. The alien
store's threads (crimson bluestore) are "alien-store-tp", "bstore_*", "rocksdb:*", "cfin".

Seastar may hand out the CPUs of the set in its own order, so the check is that the
reactors and the planned CPUs match one to one, not reactor N on the N-th CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from crimsonbench.plan.types import OsdCpus
from crimsonbench.spec.cpuset import format_cpuset

ALIEN_PREFIXES = ("alien-store-tp", "bstore_", "rocksdb:", "cfin")


@dataclass(frozen=True)
class Thread:
    tid: int
    comm: str
    cpus: frozenset[int]


def reactor_threads(pid: int, threads: Sequence[Thread]) -> dict[int, Thread]:
    """reactor number -> its thread."""
    out: dict[int, Thread] = {}
    for t in sorted(threads, key=lambda t: t.tid):
        if t.tid == pid:
            out[0] = t
        elif t.comm.startswith("reactor-") and t.comm[8:].isdigit():
            out.setdefault(int(t.comm[8:]), t)
    return out


def check_crimson_threads(
    pid: int, threads: Sequence[Thread], plan: OsdCpus
) -> tuple[dict[str, str], list[str]]:
    """({"reactor-0": "3", ..., "alien": "8-9"}, problems); no problems when every
    reactor runs alone on one planned CPU, one reactor per planned CPU, and the alien
    threads stay on the alien CPUs."""
    reactors = reactor_threads(pid, threads)
    seen = {f"reactor-{n}": format_cpuset(t.cpus) for n, t in sorted(reactors.items())}
    problems: list[str] = []
    if len(reactors) != len(plan.reactors):
        problems.append(f"{len(reactors)} reactors running, {len(plan.reactors)} planned")
    cpus: list[int] = []
    for n, t in sorted(reactors.items()):
        if len(t.cpus) != 1:
            problems.append(f"reactor-{n} (tid {t.tid}) may run on {format_cpuset(t.cpus)}")
        cpus.extend(t.cpus)
    if sorted(cpus) != sorted(plan.reactors):
        problems.append(
            f"reactors on {format_cpuset(cpus)} (some CPU twice: {len(cpus) != len(set(cpus))}), "
            f"planned {plan.cpuset}"
        )
    alien = [t for t in threads if t.comm.startswith(ALIEN_PREFIXES)]
    if alien:
        on = frozenset().union(*(t.cpus for t in alien))
        seen["alien"] = format_cpuset(on)
        allowed = frozenset(plan.alien) if plan.alien else frozenset(plan.reactors)
        if not on <= allowed:
            problems.append(
                f"alien threads on {format_cpuset(on)}, planned {format_cpuset(allowed)}"
            )
    return seen, problems
