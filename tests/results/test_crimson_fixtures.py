"""What crimson 20.2.4 really printed (tests/fixtures/crimson, captured by make_fixtures.sh
from real clusters) read by the product: reactor utilization, thread placement checks,
OSD identity, option names."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

from crimsonbench.controller.decisions.decide import ClusterFacts
from crimsonbench.errors import ParseError
from crimsonbench.plan.ceph_options import family_from_known_options, option_family
from crimsonbench.plan.types import OsdCpus
from crimsonbench.results.crimson_threads import Thread, check_crimson_threads
from crimsonbench.results.resources import with_reactor_log
from crimsonbench.results.seastar_metrics import parse_reactor_log, parse_reactor_utilization
from crimsonbench.results.types import ResourceSummary
from crimsonbench.spec.cpuset import parse_cpuset
from crimsonbench.spec.models import OptionNaming

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "crimson"


def task_table(name: str) -> tuple[int, list[Thread]]:
    """(pid, threads) of a `tid comm Cpus_allowed_list` capture; the first row is the
    main thread (tid == pid)."""
    rows = [line.split() for line in (FIX / name).read_text().splitlines()[1:] if line.strip()]
    threads = [Thread(int(r[0]), " ".join(r[1:-1]), parse_cpuset(r[-1])) for r in rows]
    return threads[0].tid, threads


@pytest.mark.parametrize(
    ("store", "shards"),
    [
        ("cyanstore", 1),
        ("seastore", 1),
        ("bluestore", 1),
        ("bluestore-alien-unpinned", 1),
        ("cyanstore-2reactors", 2),
    ],  # fmt: skip
)
def test_reactor_utilization_one_value_per_shard(store: str, shards: int) -> None:
    text = (FIX / f"dump-metrics-reactor_utilization-{store}.json").read_text()
    util = parse_reactor_utilization(text)
    assert sorted(util) == list(range(shards))
    # captured under rbd bench load: busy, and a percentage
    assert all(0.0 < v <= 100.0 for v in util.values()), util


def test_reactor_utilization_rejects_other_output() -> None:
    with pytest.raises(ParseError, match="reactor_utilization"):
        parse_reactor_utilization('{"metrics": []}')
    with pytest.raises(ParseError):
        parse_reactor_utilization("Error ENOENT: no such command")


def test_one_reactor_on_its_cpu() -> None:
    pid, threads = task_table("proc-task-comm-crimson-cyanstore.txt")
    seen, problems = check_crimson_threads(pid, threads, OsdCpus(0, (0,)))
    assert problems == []
    assert seen == {"reactor-0": "0"}
    # the same threads against a plan that put the reactor elsewhere
    _, problems = check_crimson_threads(pid, threads, OsdCpus(0, (3,)))
    assert problems and "planned 3" in problems[-1]


def test_two_reactors_one_per_cpu_and_helpers_ignored() -> None:
    pid, threads = task_table("proc-task-comm-crimson-cyanstore-2reactors.txt")
    seen, problems = check_crimson_threads(pid, threads, OsdCpus(0, (0, 1)))
    assert problems == [] and seen == {"reactor-0": "0", "reactor-1": "1"}
    _, problems = check_crimson_threads(pid, threads, OsdCpus(0, (0,)))
    assert problems[0] == "2 reactors running, 1 planned"


def test_alien_threads_in_their_own_set() -> None:
    pid, threads = task_table("proc-task-comm-crimson-bluestore.txt")
    seen, problems = check_crimson_threads(pid, threads, OsdCpus(0, (0,), alien=(1,)))
    assert problems == [] and seen == {"reactor-0": "0", "alien": "1"}
    # a plan without an alien set: the alien threads must stay on the reactors' CPUs
    _, problems = check_crimson_threads(pid, threads, OsdCpus(0, (0,)))
    assert problems == ["alien threads on 1, planned 0"]


def test_osd_identity_from_osd_metadata() -> None:
    """crimson OSDs say osd_type crimson (and no osd_objectstore); classic ones neither."""
    docs = {
        name: (FIX / f"osd-metadata-{name}.json").read_text()
        for name in ("crimson-bluestore", "crimson-seastore", "classic-bluestore")
    }
    for name, text in docs.items():
        facts = ClusterFacts.from_sections(
            {
                "config-ls": "[]",
                "osd-metadata": f"[{text}]",
                "pool-ls": "[]",
                "config-dump": "[]",
                "fsid": '{"fsid": "x"}',
            }  # fmt: skip
        )
        meta = facts.osds[0]
        assert meta.crimson == name.startswith("crimson"), name
        assert meta.object_store == ("" if meta.crimson else "bluestore"), name


def test_option_names_are_what_the_20_2_4_mon_knows() -> None:
    known = (FIX / "config-ls-crimson.txt").read_text().split()
    assert family_from_known_options(known) == "legacy"
    assert option_family(OptionNaming.AUTO, "20.2.4") == "legacy"
    assert "crimson_seastar_cpu_cores" in known and "crimson_cpu_set" not in known
    # the mon refuses the Ceph 21 name: the reason the family matters
    assert (
        "unrecognized config option 'crimson_cpu_set'"
        in (FIX / "config-set-crimson_cpu_set.stderr").read_text()
    )


# The fio driver pod's reactor.log on Rook (kind, crimson 20.2.4 OSD, the run's cephx
# user's `ceph tell`), one per step; captured by tests/kind/test_kind_rook_crimson.py
# with CB_CAPTURE_DIR set.
DRIVER_LOGS = sorted(FIX.glob("driver-reactor-*-rook-kind.log"))


def _values(text: str) -> list[float]:
    return [float(v) for v in re.findall(r'"value": ([0-9.]+)', text)]


def test_the_driver_reactor_logs_are_there() -> None:
    assert len(DRIVER_LOGS) == 3, DRIVER_LOGS


@pytest.mark.parametrize("path", DRIVER_LOGS, ids=lambda p: p.name)
def test_the_drivers_reactor_log_gives_the_steps_reactor_columns(path: Path) -> None:
    text = path.read_text()
    log = parse_reactor_log(text)
    assert log.problems == []
    assert len(log.rounds) == text.count("\n# ") + 1 == 4
    assert all(list(r) == [0] and len(r[0]) == 1 for r in log.rounds)  # osd.0, 1 reactor
    want = statistics.fmean(_values(text))
    metrics = ResourceSummary(osd_cpu=101.0, osd_mem_mib=2048.0, fio_cpu=55.0, samples=3)
    got, problem = with_reactor_log(metrics, text)
    assert problem is None
    assert (got.osd_cpu, got.osd_mem_mib, got.fio_cpu, got.samples) == (101.0, 2048.0, 55.0, 3)
    assert got.reactor_util == pytest.approx(want) and 0 < want < 100
    assert got.reactor_util_max == pytest.approx(want)  # one reactor: the busiest is it
    assert got.reactor_util_osd == {"osd.0": pytest.approx(want)}


def test_a_reactor_log_cut_short_keeps_the_whole_rounds() -> None:
    """The driver killed mid-answer (a dropped step): the cut answer is named, not fatal."""
    text = DRIVER_LOGS[0].read_text()
    cut = text[: text.rindex('"value"')]
    log = parse_reactor_log(cut)
    assert len(log.rounds) == 3
    assert len(log.problems) == 1 and log.problems[0].startswith("ceph tell osd.0 dump_metrics")
    summary, problem = with_reactor_log(ResourceSummary(0.0, 0.0, 0.0, 0), cut)
    assert summary.reactor_util == pytest.approx(statistics.fmean(_values(cut)))
    assert problem == log.problems[0]


def test_a_reactor_log_with_a_foreign_header_is_refused() -> None:
    text = DRIVER_LOGS[0].read_text().replace("osd.0 rc=0", "osd.zero", 1)
    with pytest.raises(ParseError, match="not a reactor.log entry"):
        parse_reactor_log(text)
    # the step keeps its figures; only the reactor columns are lost, the cause named
    metrics = ResourceSummary(osd_cpu=1.0, osd_mem_mib=2.0, fio_cpu=3.0, samples=1)
    got, problem = with_reactor_log(metrics, text)
    assert got == metrics and problem is not None and "osd.zero" in problem
