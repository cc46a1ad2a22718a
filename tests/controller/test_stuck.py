"""Every run ends: the decisions of controller/decisions/stuck.py, from records and clocks
alone (the operator carries them out on a real API server: tests/k8s/test_run_ends.py)."""

from __future__ import annotations

import pytest

from crimsonbench.controller.decisions import stuck
from crimsonbench.controller.decisions.restore_steps import PATCHED_BY, UNDO_DIGEST
from crimsonbench.controller.kube_errors import Forbidden
from crimsonbench.spec.status import ERROR_CHARS, ErrorMark, MonChange, RestoreMarks, SpecChange


def test_an_api_refusal_is_said_by_its_status_and_the_servers_message() -> None:
    """As Kube raises it (controller/kube_errors.py: tests/controller/test_kube_errors.py)."""
    exc = Forbidden(403, "Forbidden", 'jobs.batch "a" is forbidden: exceeded quota: q')
    assert stuck.error_text(exc) == (
        'Forbidden: 403 Forbidden: jobs.batch "a" is forbidden: exceeded quota: q'
    )


def test_any_other_error_is_its_class_and_message_cut() -> None:
    assert stuck.error_text(ValueError("one step result is 2 MB")) == (
        "ValueError: one step result is 2 MB"
    )
    assert stuck.error_text(TimeoutError()) == "TimeoutError()"
    assert len(stuck.error_text(RuntimeError("x" * 10_000))) == ERROR_CHARS


def test_an_error_streak_keeps_its_first_time_and_its_latest_text() -> None:
    first = stuck.noted(None, "steps", "ApiException 500", now=1000.04)
    assert (first.since, first.stage, first.ticks) == (1000.0, "steps", 1)
    later = stuck.noted(first, "steps", "ApiException 403 Forbidden", now=1300.0)
    assert (later.since, later.text, later.ticks) == (1000.0, "ApiException 403 Forbidden", 2)
    assert not stuck.overdue(later, now=1600.0, bound_s=600)
    assert stuck.overdue(later, now=1600.1, bound_s=600)
    why = stuck.gave_up(later, now=1700.0, bound_s=600)
    assert why == ("ApiException 403 Forbidden (at stage steps, for 700 s, past "
                   "errorTimeoutSeconds 600 s)")  # fmt: skip
    shown = stuck.lasting(later, now=1100.0, bound_s=600)
    assert "for 100 s, 2 tick(s) in a row" in shown and "after errorTimeoutSeconds 600 s" in shown


def test_a_restore_is_over_its_bound_only_past_it() -> None:
    assert not stuck.restore_overdue(since=100.0, now=7300.0, bound_s=7200)
    assert stuck.restore_overdue(since=100.0, now=7300.5, bound_s=7200)


CHANGES = [
    SpecChange(path=["cephConfig", "osd.0", "crimson_seastar_cpu_cores"], after='"0-27"'),
    SpecChange(path=["resources", "osd"], before='{"limits": {"cpu": "2"}}',
               after='{"limits": {"cpu": "28"}}'),
]  # fmt: skip
MON = [MonChange(who="osd.0", key="crimson_seastar_cpu_cores", value="0-27"),
       MonChange(who="osd", key="osd_op_num_shards", value="8", before="4")]  # fmt: skip


def leftovers(**changes: object) -> stuck.Leftovers:
    base: dict[str, object] = dict(
        where="CephCluster rook-ceph/rook-ceph", spec_changes=CHANGES, mon_changes=MON,
        marks=RestoreMarks(), images="rbd/{img0,img1}",
        rook_objects=["cephblockpools/p", "cephclients/u"],
        jobs="delete the run's Jobs: kubectl ...",
    )  # fmt: skip
    base.update(changes)
    return stuck.Leftovers(**base)  # type: ignore[arg-type]


def test_a_restore_stopped_early_leaves_everything_named_in_order() -> None:
    todo = stuck.left_by_hand(leftovers())
    assert [t.split(" ")[0] for t in todo] == ["remove", "see", "where", "then", "remove", "delete"]
    assert "rbd/{img0,img1}" in todo[0] and "cephclients/u" in todo[1]
    assert "spec.cephConfig.osd.0.crimson_seastar_cpu_cores removed" in todo[2]
    assert 'spec.resources.osd = {"limits": {"cpu": "2"}}' in todo[2]
    assert "rolled every OSD back" in todo[2]
    assert todo[3] == ("then in the mon database: ceph config rm osd.0 crimson_seastar_cpu_cores; "
                       "ceph config set osd osd_op_num_shards 4")  # fmt: skip
    assert PATCHED_BY in todo[4] and UNDO_DIGEST in todo[4]
    message = stuck.restore_gave_up(7300, 7200, "removing 2 RBD images (Job x running)", todo)
    assert message.startswith("the restore did not finish in restoreTimeoutSeconds (7200 s; "
                              "7300 s since it began)")  # fmt: skip
    assert "stopped at: removing 2 RBD images" in message and "(6) delete" in message


def test_many_changes_are_counted_not_all_named() -> None:
    many = [SpecChange(path=["cephConfig", f"osd.{i}", "k"], after='"v"') for i in range(30)]
    (put, *_) = [t for t in stuck.left_by_hand(leftovers(spec_changes=many)) if "put back" in t]
    assert "spec.cephConfig.osd.19.k removed" in put and "osd.20" not in put
    assert "and 10 more (the run's status.record.undo)" in put


@pytest.mark.parametrize(
    ("marks", "expect"),
    [
        # the spec is back and the mon database's restore failed: its commands, the marks
        (RestoreMarks(started=1.0, config_cleaned="failed: ceph config rm osd.0 k"),
         ["in the mon database: ceph config rm osd.0 k",
          f"remove the annotations {PATCHED_BY}"]),
        # the mon database done, crimson OSDs not restarted yet: only the marks
        (RestoreMarks(started=1.0, config_cleaned="done"),
         [f"remove the annotations {PATCHED_BY}"]),
        # over: nothing on the cluster
        (RestoreMarks(started=1.0, config_cleaned="done", over="done"), []),
    ],
)  # fmt: skip
def test_what_is_left_follows_how_far_the_restore_got(
    marks: RestoreMarks, expect: list[str]
) -> None:
    todo = stuck.left_by_hand(leftovers(marks=marks, images="", rook_objects=[]))
    assert [t for t in todo if not t.startswith("delete the run's Jobs")] == [
        next(t for t in todo if t.startswith(e)) for e in expect
    ]
    assert len(todo) == len(expect) + 1


def test_a_run_that_never_patched_leaves_only_its_jobs() -> None:
    todo = stuck.left_by_hand(leftovers(spec_changes=[], images="", rook_objects=[]))
    assert todo == ["delete the run's Jobs: kubectl ..."]


def test_the_mark_is_the_records_bounded_model() -> None:
    mark = stuck.noted(None, "patch", "x" * 5000, now=1.0)
    assert isinstance(mark, ErrorMark) and len(mark.text) == ERROR_CHARS
