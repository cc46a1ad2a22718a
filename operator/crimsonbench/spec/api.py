"""The BenchmarkRun API's coordinates: one home for the group, version and names."""

from __future__ import annotations

GROUP = "bench.crimson.ceph.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "BenchmarkRun"
PLURAL = "benchmarkruns"
SINGULAR = "benchmarkrun"
SHORT_NAMES = ("br",)

# A study: a base run, the axes it varies, one BenchmarkRun per variant and repeat.
STUDY_KIND = "BenchmarkStudy"
STUDY_PLURAL = "benchmarkstudies"
STUDY_SINGULAR = "benchmarkstudy"
STUDY_SHORT_NAMES = ("bs",)
