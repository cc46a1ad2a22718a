"""Resource samples taken while fio runs -> the OSD_cpu / OSD_mem / FIO_cpu columns."""

from __future__ import annotations

import math
from collections.abc import Sequence

from crimsonbench.results.types import ResourceSample, ResourceSummary


def summarize_samples(samples: Sequence[ResourceSample]) -> ResourceSummary:
    """Means over the samples (as `top` averages in the published tables).

    No samples (a step shorter than one interval) gives zeros with samples=0, so the row
    still renders and readers can tell the figures are missing.
    """
    n = len(samples)
    if n == 0:
        return ResourceSummary(osd_cpu=0.0, osd_mem_mib=0.0, fio_cpu=0.0, samples=0)
    return ResourceSummary(
        osd_cpu=math.fsum(s.osd_cpu for s in samples) / n,
        osd_mem_mib=math.fsum(s.osd_mem_mib for s in samples) / n,
        fio_cpu=math.fsum(s.fio_cpu for s in samples) / n,
        samples=n,
    )
