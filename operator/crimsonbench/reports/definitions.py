"""What each column of the step table is, here and in the published Crimson tables.

The published tables come from ceph-aprg's fio-parse-jsons.py (CBT's fio output reduced
per step). It parses fio as we do, but reduces some figures differently; where the
difference matters for a reader putting our table next to a published one, the table
shows the published definition (usr/sys_cpu) or both (bw and bw_pub), and the rest differ
by far less than run-to-run noise (clat_ms, clat_stdev). Rendered into every
report/summary.md and, between the markers, into the README (a test keeps them equal).
"""

from __future__ import annotations

# 1.024: fio's bw is KiB/s; fio-parse-jsons.py divides by 1000 and calls it MiB/s
PUBLISHED_BW_PER_MIB = 1024 / 1000

# (column, what this table shows, what ceph-aprg's fio-parse-jsons.py computes)
COLUMNS: tuple[tuple[str, str, str], ...] = (
    (
        "iodepth",
        "fio's `iodepth` of every job: I/Os in flight per job (a step with J jobs keeps up "
        "to J × iodepth in flight)",
        "the same (`global options.iodepth`)",
    ),
    (
        "iops",
        "fio's per-job `iops` summed over every job, fio client and direction",
        "the same: summed over jobs",
    ),
    (
        "bw",
        "sequential workloads, instead of iops: fio's per-job `bw` (KiB/s) summed, ÷ 1024: MiB/s",
        "summed KiB/s ÷ 1000, labelled MiB/s: 2.4 % above MiB/s. The table shows it too, "
        "as **bw\\_pub** (= bw × 1.024), so a row compares with a published one",
    ),
    (
        "total\\_ios",
        "fio's per-job `total_ios` summed: I/Os completed after the ramp",
        "the same",
    ),
    (
        "clat\\_ms",
        "mean completion latency of every I/O of the step: each job's `clat_ns.mean` "
        "weighted by its `clat_ns.N` (the latencies fio measured)",
        "weighted by `total_ios` instead. A job's N exceeds its total_ios by up to "
        "iodepth − 1 (I/Os in flight when fio resets its statistics after the ramp), so the "
        "two means agree to about (iodepth − 1) / total_ios (exactly, with one job): the "
        "table keeps ours",
    ),
    (
        "clat\\_stdev",
        "standard deviation of every I/O's latency, pooled from the jobs' `clat_ns.stddev` "
        "(sᵢ), `clat_ns.mean` (mᵢ) and `clat_ns.N` (Nᵢ) as population deviations: "
        "sqrt(Σ Nᵢ (sᵢ² + (mᵢ − m)²) / N)",
        "pooled as sample deviations, with nᵢ = total_ios: "
        "sqrt((Σ ((nᵢ − 1) sᵢ² + nᵢ mᵢ²) − n m²) / (n − 1)). The two agree to within "
        "1 / (2 (nᵢ − 1)) of the job with the fewest I/Os: under 0.05 % once every job "
        "completed 1,000, so the table keeps ours",
    ),
    (
        "usr\\_cpu, sys\\_cpu",
        "**as published**: fio's per-job `usr_cpu`/`sys_cpu` (% of one core, each fio job "
        "process) summed over the step's jobs. results.csv/json: `usr_cpu_sum`/"
        "`sys_cpu_sum` hold these, `usr_cpu`/`sys_cpu` the mean per job (the sum ÷ jobs)",
        "summed over jobs (with 32 jobs: 32 × the per-job mean)",
    ),
    (
        "OSD\\_cpu",
        "user + system CPU time of every OSD process over wall time, from /proc, in % of one "
        "core, summed over OSDs; the mean of the samples taken every "
        "sweep.sampleIntervalSeconds while fio runs (n/a: nothing sampled)",
        "from `top` samples of the OSD threads (ceph-aprg's parse-top.py): another "
        "instrument, compare with care (`top -H` can count a process on its main thread's "
        "row and again per thread)",
    ),
    (
        "OSD\\_mem",
        "resident memory (RSS) of the OSD processes summed, MiB, mean of the samples",
        "from `top`, as OSD\\_cpu",
    ),
    (
        "FIO\\_cpu",
        "as OSD\\_cpu, for the fio processes (every job and librbd thread in them)",
        "from `top`, as OSD\\_cpu",
    ),
)

EXTRA_COLUMNS: tuple[tuple[str, str], ...] = (
    (
        "clat\\_p99\\_ms, clat\\_p99.9\\_ms",
        "percentiles of every I/O's completion latency from fio's latency histograms of "
        "every job merged (exact); ~ marks the I/O-weighted mean of the jobs' own "
        "percentiles (results without histograms: an approximation)",
    ),
    (
        "sd, ±ci95",
        "with repeats: the rows are the means over repeats; sd is the sample standard "
        "deviation of the throughput over them and ±ci95 the half width of its 95 % "
        "Student-t interval (the same for clat\\_ms)",
    ),
)


def definitions_markdown() -> str:
    """The column definitions as a markdown section body (no heading)."""
    lines = [
        "| column | this table | published tables (ceph-aprg fio-parse-jsons.py) |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {name} | {ours} | {theirs} |" for name, ours, theirs in COLUMNS]
    lines += ["", "Also in the tables:", ""]
    lines += [f"- {name}: {what}" for name, what in EXTRA_COLUMNS]
    return "\n".join(lines) + "\n"
