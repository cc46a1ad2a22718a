"""A step with several fio processes (one per client) starts every job together: each job
meets the others at a rendezvous (manifests/start_barrier.py) in exec_prerun, and the last
to arrive lets all go. The planner decides who meets and the cap; the job text carries the
address and token; the command runs as fio runs it (`sh -c`, like system()), here against
the real rendezvous, with jobs arriving seconds apart, a stranger, and a job that never
comes."""

from __future__ import annotations

import configparser
import io
import json
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from crimsonbench.manifests.start_barrier import listen, serve
from crimsonbench.plan.build import build_plan
from crimsonbench.plan.fio_jobs import (
    BARRIER_CAP_BASE_S,
    BARRIER_CAP_PER_JOB_S,
    step_job_file,
    step_job_files,
)
from crimsonbench.plan.ini import FIO, IniError, render_ini
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.plan.types import BarrierAddress, RunPlan
from crimsonbench.results.barrier_log import barrier_summary
from crimsonbench.spec.models import validate_spec

LSCPU = Path(__file__).parents[1] / "fixtures" / "lscpu" / "single-socket-8-noht.json"


def _plan(count: int, images: int = 5, processes: int = 2) -> RunPlan:
    spec = validate_spec({
        "target": {"local": {}}, "osd": {"flavor": "classic", "cpuSet": "6-7"},
        "client": {"images": images, "cpuSet": "0-3", "count": count,
                   "processesPerImage": processes},
        "workloads": [{"preset": "randread4k"}],
        "sweep": {"iodepths": [4], "runtimeSeconds": 3, "rampSeconds": 2},
    })  # fmt: skip
    return build_plan("barrier", spec, parse_lscpu_json(LSCPU.read_text()))


def _global(text: str) -> dict[str, str]:
    ini = configparser.ConfigParser(interpolation=None)
    ini.read_string(text)
    return dict(ini["global"])


def test_one_fio_process_starts_its_own_jobs_together_without_a_barrier() -> None:
    plan = _plan(count=1)
    assert (plan.timing.barrier_jobs, plan.timing.start_barrier_cap_s) == (0, 0)
    assert plan.timing.deadline_s == 3 + 2 + 120  # runtime + ramp + grace
    (text,) = step_job_files(plan, plan.steps[0]).values()
    assert "exec_prerun" not in _global(text)


def test_several_fio_processes_meet_at_the_rendezvous_the_step_names() -> None:
    plan = _plan(count=2)  # 5 images: 3 and 2 per client, x 2 processes
    biggest = max(len(c.images) for c in plan.clients) * 2
    assert plan.timing.barrier_jobs == 5 * 2  # every job of every client
    cap = BARRIER_CAP_BASE_S + BARRIER_CAP_PER_JOB_S * biggest
    assert plan.timing.start_barrier_cap_s == pytest.approx(cap)
    # the deadline allows a client that never comes; the expected end does not wait for it
    assert plan.timing.deadline_s == 3 + 2 + 120 + 33  # ceil(33.0 s)
    assert plan.timing.fio_s < 5 + 2
    meet = BarrierAddress("10.244.1.7", 8766, "00ff")
    files = step_job_files(plan, plan.steps[0], meet)
    assert sorted(files) == [c.name for c in plan.clients]
    for text in files.values():
        prerun = _global(text)["exec_prerun"]
        assert prerun.startswith("python3 -c ") and "('10.244.1.7', 8766)" in prerun
        assert "b'00ff'" in prerun
    # a client's file cannot be made without the rendezvous
    with pytest.raises(ValueError, match="rendezvous"):
        step_job_file(plan, plan.steps[0], plan.clients[0])


@pytest.mark.parametrize(
    ("host", "port", "token"),
    [("example.com", 1, "ab"), ("1.2.3.4'), ('x", 1, "ab"), ("1.2.3.4", 0, "ab"),
     ("1.2.3.4", 1, "a b"), ("1.2.3.4", 1, "ab';rm"), ("1.2.3.4", 1, "")],
)  # fmt: skip
def test_a_rendezvous_is_an_address_a_port_and_a_plain_token(
    host: str, port: int, token: str
) -> None:
    with pytest.raises(ValueError):
        BarrierAddress(host, port, token)


class Rendezvous:
    """The real rendezvous in a thread, as local mode serves it."""

    def __init__(self, expected: int, cap_s: float) -> None:
        self.listener = listen("127.0.0.1", 0)
        self.log = io.StringIO()
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=serve,
            args=(self.listener, expected, cap_s, b"c0ffee", self.log),
            kwargs={"stop": self.stop.is_set},
        )
        self.thread.start()
        self.meet = BarrierAddress("127.0.0.1", self.listener.getsockname()[1], "c0ffee")

    def close(self) -> dict[str, object]:
        self.stop.set()
        self.thread.join(timeout=60)
        self.listener.close()
        summary = barrier_summary(self.log.getvalue())
        assert summary is not None, self.log.getvalue()
        return summary


def _prerun_at(prerun: str, delay: float, ends: dict[int, tuple[float, int]], i: int) -> None:
    """One job: ready `delay` s after the others started, then fio's exec_string."""
    time.sleep(delay)
    proc = subprocess.run(["sh", "-c", f"{prerun} > /dev/null 2>&1"], timeout=120, check=False)
    ends[i] = (time.time(), proc.returncode)


def _jobs(prerun: str, delays: list[float]) -> dict[int, tuple[float, int]]:
    ends: dict[int, tuple[float, int]] = {}
    threads = [threading.Thread(target=_prerun_at, args=(prerun, d, ends, i))
               for i, d in enumerate(delays)]  # fmt: skip
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return {i: (end - t0, rc) for i, (end, rc) in ends.items()}


def test_the_last_job_to_be_ready_starts_every_job_together() -> None:
    plan = _plan(count=2, images=2, processes=1)  # 2 jobs; a third process is a stranger
    rv = Rendezvous(plan.timing.barrier_jobs, plan.timing.start_barrier_cap_s)
    try:
        prerun = _global(step_job_file(plan, plan.steps[0], plan.clients[0], rv.meet))
        # a stranger connects first and sends nothing, then a wrong token: neither counts
        with socket.create_connection(("127.0.0.1", rv.meet.port)) as stray:
            stray.sendall(b"bad000")
            ends = _jobs(prerun["exec_prerun"], [0.0, 2.5])
    finally:
        summary = rv.close()
    (first, rc0), (second, rc1) = ends[0], ends[1]
    assert rc0 == rc1 == 0
    assert first >= 2.5 and abs(first - second) < 0.5, ends  # together, after the last
    assert summary["arrived"] == 2 and not summary["timed_out"], summary
    assert 2.0 <= float(summary["setup_spread_s"]) <= 4.0, summary  # type: ignore[arg-type]


def test_a_job_that_never_comes_holds_the_others_only_until_the_cap() -> None:
    rv = Rendezvous(expected=3, cap_s=1.5)
    try:
        text = render_ini({"global": {"exec_prerun": _meet(rv.meet)}}, FIO)
        prerun = _global(text)["exec_prerun"]
        ends = _jobs(prerun, [0.0, 0.0])  # the third never comes
        late = _jobs(prerun, [0.0])  # after the cap: let go at once
    finally:
        summary = rv.close()
    assert all(rc == 0 for _, rc in [*ends.values(), *late.values()])
    assert all(1.4 <= t < 5 for t, _ in ends.values()), ends
    assert late[0][0] < 1.4, late
    assert summary["timed_out"] and summary["arrived"] == 2 and summary["late"] == 1, summary


def _meet(meet: BarrierAddress) -> str:
    """The planner's command for a rendezvous, from a two-client plan's file."""
    plan = _plan(count=2, images=2, processes=1)
    text = step_job_file(plan, plan.steps[0], plan.clients[0], meet)
    return _global(text)["exec_prerun"]


def test_an_unreachable_rendezvous_fails_the_job_instead_of_starting_it_alone() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nobody listens there once closed
    prerun = _meet(BarrierAddress("127.0.0.1", port, "ab"))
    proc = subprocess.run(["sh", "-c", f"{prerun} > /dev/null 2>&1"], timeout=60, check=False)
    assert proc.returncode != 0


@pytest.mark.parametrize(
    "text",
    ["", "not json\n", '{"event": "released"}\n', "[1, 2]\n",
     '{"event": "released", "expected": 2, "arrived": 2, "first": 1, "last": "x", '
     '"released": 3}\n',
     '{"event": "released", "expected": 2, "arrived": 2, "first": 1, "last": NaN, '
     '"released": 3}\n'],
)  # fmt: skip
def test_a_barrier_log_that_is_not_the_barriers_is_no_barrier(text: str) -> None:
    assert barrier_summary(text) is None


def test_a_barrier_log_read_as_the_rendezvous_wrote_it() -> None:
    released = {"event": "released", "expected": 4, "arrived": 3, "first": 100.0,
                "last": 101.25, "released": 130.0, "timed_out": True}  # fmt: skip
    text = json.dumps(released) + "\nnoise\n" + json.dumps({"event": "late", "at": 131}) + "\n"
    assert barrier_summary(text) == {
        "expected": 4, "arrived": 3, "setup_spread_s": 1.25, "first_wait_s": 30.0,
        "timed_out": True, "late": 1,
    }  # fmt: skip


@pytest.mark.parametrize("value", ["a;b", "a#b"])
def test_a_fio_value_fio_would_cut_at_a_comment_is_refused(value: str) -> None:
    # fio ends a value at ';' or '#' (parse.c strip_blank_end): the rest would be dropped
    with pytest.raises(IniError, match="may not contain"):
        render_ini({"global": {"filename": value}}, FIO)
