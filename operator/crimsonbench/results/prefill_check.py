"""Whether a read step read what the prefill wrote: an RBD extent never written is
answered by librbd/the OSD without touching the store (no object: zeros), so reads of an
image not fully written are faster than the store can be (benchmark-operator users found
"reads faster than the device" that way). The images' use comes from `rbd du` after the
prefill; a read step over an image not fully written gets a `fault` (results/validity)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from crimsonbench.plan.types import RunPlan, Step

READING = frozenset({"read", "randread", "rw", "readwrite", "randrw"})  # fio's rw values


def reads(plan: RunPlan, step: Step) -> bool:
    return str(plan.fio.workloads.get(step.workload, {}).get("rw", "")) in READING


def written_shares(used: Mapping[str, int], images: Sequence[str], size: int) -> dict[str, float]:
    """image -> the share of it written, for each image not fully written (an image `rbd du`
    does not list: none of it)."""
    if size <= 0:
        return {}
    shares = {name: min(1.0, max(0, used.get(name, 0)) / size) for name in images}
    return {name: share for name, share in shares.items() if share < 1.0}


def prefill_faults(plan: RunPlan, step: Step, unwritten: Mapping[str, float]) -> tuple[str, ...]:
    """The fault of a read step over images not fully written; none for a write step."""
    if not unwritten or not reads(plan, step):
        return ()
    shown = sorted(unwritten.items())[:4]
    more = f" and {len(unwritten) - len(shown)} more" if len(unwritten) > len(shown) else ""
    which = ", ".join(f"{name} {share * 100:.0f} %" for name, share in shown)
    return (
        f"read from images not fully written (rbd du: {which}{more}): extents never written "
        "are answered without reading the store, faster than it can be",
    )
