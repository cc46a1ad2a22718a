"""The fio server pod's CPU sampler, for real: the server script's own sampler function
(manifests/cpu-sampler.sh) in a PID namespace of its own, as in a container, beside a real
fio pinned to one CPU, while a hog pinned to the same CPU runs outside it for part of the
time. The log it writes, read by results/node_cpu.py, must charge the hog's CPU time (as
the kernel accounted it to the hog: its rusage) to "others", not to the run, and the same
run without the hog must show far less."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from quiet import prefetch_paused

from crimsonbench.manifests import fio
from crimsonbench.results.node_cpu import load_in_window, samples
from crimsonbench.results.validity import INTERFERENCE, CpuSetLoad, Evidence, judge
from crimsonbench.spec.sweep import ValiditySpec

NULL_JOB = """\
[global]
ioengine=null
size=16m
time_based=1
runtime={runtime}
[busy]
rw=randread
bs=4k
"""
HOG_S = 3.0


def _namespaced_run(tmp: Path, cpu: int, hog: bool) -> tuple[CpuSetLoad, float, str]:
    """(the load the log shows over the whole run, the hog's CPU seconds, the log)."""
    tmp.mkdir()
    log = tmp / "cpu.log"
    job = tmp / "busy.fio"
    job.write_text(NULL_JOB.format(runtime=int(HOG_S + 3)))
    sampler = fio.cpu_sampler_script()  # the function the server pod's script runs
    script = (f'{sampler}cpu_sampler "{cpu}" < /dev/null >> {log} 2>&1 &\n'
              f"sleep 1.2\nexec taskset -c {cpu} fio --output=/dev/null {job}\n")  # fmt: skip
    run = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script])
    hog_s = 0.0
    try:
        time.sleep(2.7)  # fio busy for a second and more
        if hog:
            spin = subprocess.Popen(["taskset", "-c", str(cpu), "sh", "-c", "while :; do :; done"])
            time.sleep(HOG_S)
            spin.kill()
            _, _, usage = os.wait4(spin.pid, 0)
            hog_s = usage.ru_utime + usage.ru_stime
        assert run.wait(timeout=60) == 0
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    text = log.read_text()
    got = samples(text)
    assert len(got) >= 5, text
    load = load_in_window("client c", [cpu], text, got[0].t, got[-1].t)
    assert isinstance(load, CpuSetLoad), load
    return load, hog_s, text


def test_the_sampler_charges_a_hog_on_the_run_cpus_to_others(tmp_path: Path) -> None:
    for tool in ("fio", "unshare", "taskset", "awk"):
        if not shutil.which(tool):
            pytest.fail(f"{tool} is not installed: scripts/setup.sh installs it")
    cpu = max(os.sched_getaffinity(0))
    with prefetch_paused():
        quiet, _, _ = _namespaced_run(tmp_path / "quiet", cpu, hog=False)
        hogged, hog_s, text = _namespaced_run(tmp_path / "hog", cpu, hog=True)
    # the hog's own CPU time, as the kernel gave it (rusage), is what the log calls others:
    # not charged to the run (fio's time in its namespace), not lost
    assert hog_s > 0.5, f"the hog ran {hog_s:.2f} s of {HOG_S} s"
    assert hogged.others_s >= 0.85 * hog_s, (hogged, hog_s, text)
    assert hogged.others_s - quiet.others_s <= hog_s + 0.15 * hogged.wall_s, (quiet, hogged)
    assert hogged.others_pct - quiet.others_pct >= 10, (quiet, hogged)
    limits = ValiditySpec()
    verdict = judge(Evidence(interference=(hogged,)), limits)
    assert INTERFERENCE in {r.code for r in verdict.reasons}, verdict


if __name__ == "__main__":  # the fixtures of tests/results/test_node_cpu.py, captured
    import sys
    import tempfile

    out = Path(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        for name, hog in (("quiet", False), ("hog", True)):
            log = _namespaced_run(Path(tmp) / name, 1, hog=hog)[2]
            (out / f"cpu-sampler-{name}.log").write_text(log)
