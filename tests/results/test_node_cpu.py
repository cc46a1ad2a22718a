"""A fio server pod's CPU log read into a step's load (results/node_cpu.py). The logs are
real: manifests/cpu-sampler.sh in a PID namespace of its own beside a real fio pinned to
CPU 1, a hog pinned to CPU 1 outside it for 3 s in the middle of the hog log, written by
the run its test makes (`PYTHONPATH=tests/helpers python tests/manifests/test_cpu_sampler.py
tests/fixtures/driver`). A log from a shared node is outside text: a torn line, a counter
gone back, a CPU it does not cover, a window too short are each said, never a figure."""

from __future__ import annotations

import random
from pathlib import Path

from crimsonbench.results.node_cpu import load_in_window, parse_line, samples
from crimsonbench.results.validity import CpuSetLoad

DRIVER = Path(__file__).resolve().parents[1] / "fixtures" / "driver"
HOG = (DRIVER / "cpu-sampler-hog.log").read_text()
QUIET = (DRIVER / "cpu-sampler-quiet.log").read_text()


def _whole(text: str) -> CpuSetLoad:
    got = samples(text)
    load = load_in_window("client c", [1], text, got[0].t, got[-1].t)
    assert isinstance(load, CpuSetLoad), load
    return load


def test_every_line_of_a_real_log_parses_in_time_order() -> None:
    for text in (HOG, QUIET):
        lines = text.splitlines()
        got = samples(text)
        assert len(got) == len(lines) >= 5
        assert [s.t for s in got] == sorted(s.t for s in got)
        assert all(s.hz > 0 and 1 in s.cpus for s in got)
        # one a second, as the sampler sleeps
        gaps = [b.t - a.t for a, b in zip(got, got[1:], strict=False)]
        assert all(0.9 < g < 2.5 for g in gaps), gaps


def test_the_hog_is_others_and_the_quiet_run_is_not() -> None:
    hog, quiet = _whole(HOG), _whole(QUIET)
    assert hog.cpus == quiet.cpus == (1,)
    # the hog had CPU 1 for about half of 3 s against a busy fio: ~1.5 s of the run's ~8 s
    assert hog.others_s >= 1.0, hog
    assert hog.others_pct - quiet.others_pct >= 10, (hog, quiet)
    # and only while it ran: the first two seconds of the hog log (before it) look quiet
    got = samples(HOG)
    before = load_in_window("client c", [1], HOG, got[0].t, got[2].t)
    assert isinstance(before, CpuSetLoad) and before.others_pct < hog.others_pct, before


def test_a_torn_or_foreign_line_is_skipped_not_trusted() -> None:
    whole = _whole(HOG)
    # fio's own lines in the same container log, a line torn by a reader mid-write
    fio_said = "fio: server listening on ip:10.244.1.7,8765\n"
    torn = fio_said + HOG + HOG.splitlines()[-1][:24]
    assert _whole(torn) == whole
    junk = ["x y z", "1 0 5 1:2:3", "cpu-sample nan 100 0 1:1:1", "cpu-sample 1.0 100 -4 1:1:1",
            "cpu-sample 1 2", "cpu-sample 1.0 0 4 1:1:1"]  # fmt: skip
    assert samples("\n".join(junk)) == []
    assert parse_line("cpu-sample 17.5 100 40 1:900:3 2:a:b") is None
    assert parse_line("cpu-sample 17.5 100 40 1:900:3") is not None


def test_a_rotated_log_read_in_any_order_gives_the_same_load() -> None:
    lines = HOG.splitlines()
    random.Random(7).shuffle(lines)
    assert _whole("\n".join(lines)) == _whole(HOG)


def test_what_cannot_be_said_is_a_sentence_not_a_figure() -> None:
    got = samples(HOG)
    short = load_in_window("client c", [1], HOG, got[0].t, got[0].t + 0.5)
    assert isinstance(short, str) and "fewer than two" in short
    other_cpu = load_in_window("client c", [1, 5], HOG, got[0].t, got[-1].t)
    assert isinstance(other_cpu, str) and "CPU 5" in other_cpu
    first, *rest = HOG.splitlines()
    mark, t, hz, own, *cpus = first.split()
    ahead = " ".join([mark, t, hz, str(int(own) + 10**6), *cpus])  # the pod restarted since
    back = load_in_window("client c", [1], "\n".join([ahead, *rest]), got[0].t, got[-1].t)
    assert isinstance(back, str) and "went back" in back


def test_the_load_is_the_difference_of_the_window_ends() -> None:
    got = samples(QUIET)
    a, b = got[1], got[-2]
    load = load_in_window("client c", [1], QUIET, a.t - 0.01, b.t + 0.01)
    assert isinstance(load, CpuSetLoad)
    busy = (b.cpus[1][0] - a.cpus[1][0]) / a.hz
    own = (b.own - a.own) / a.hz
    assert load.wall_s == round(b.t - a.t, 3)
    assert load.others_s == round(max(0.0, busy - own), 3)
    assert load.steal_s == round((b.cpus[1][1] - a.cpus[1][1]) / a.hz, 3)
