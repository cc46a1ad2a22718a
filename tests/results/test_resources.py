from __future__ import annotations

import statistics

import pytest

from crimsonbench.results.resources import summarize_samples
from crimsonbench.results.types import ResourceSummary
from crimsonbench.spec.status import StepSample


def test_means_of_the_samples() -> None:
    samples = [
        StepSample(t=0.0, osd_cpu=400.0, osd_mem_mib=3000.0, fio_cpu=20.0),
        StepSample(t=1.0, osd_cpu=450.5, osd_mem_mib=3100.0, fio_cpu=30.0),
        StepSample(t=2.0, osd_cpu=10.0, osd_mem_mib=3200.0, fio_cpu=0.0),
    ]
    s = summarize_samples(samples)
    assert s.samples == 3
    assert s.osd_cpu == pytest.approx(statistics.fmean(x.osd_cpu for x in samples))
    assert s.osd_mem_mib == pytest.approx(3100.0)
    assert s.fio_cpu == pytest.approx(50.0 / 3)


def test_no_samples_is_zeros_not_an_error() -> None:
    assert summarize_samples([]) == ResourceSummary(0.0, 0.0, 0.0, samples=0)
