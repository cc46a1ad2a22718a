"""The one interpreter of the operator's decisions (controller/carry_out.py): an answer's
actions are carried out in order, Again asks the decision anew with what was learnt,
Finished ends with its value, an answer carried out to its end is settled, and answers
that never settle are bounded (NotReady: the next tick tries afresh)."""

from __future__ import annotations

import pytest

from crimsonbench.controller.carry_out import Again, Finished, carry_out
from crimsonbench.errors import ExecutionError, NotReady


def decide(seen: int) -> list[str]:
    """Poll until 3 answers were seen, then note it and store."""
    return ["poll"] if seen < 3 else ["note", "store"]


def test_again_asks_anew_and_finished_ends_with_its_value() -> None:
    done: list[str] = []

    def act(action: str, seen: int) -> int | Again[int] | Finished[str]:
        done.append(f"{action}@{seen}")
        if action == "poll":
            return Again(seen + 1)
        if action == "note":
            return seen + 10  # the next action of the same answer sees the update
        return Finished(f"stored at {seen}")

    assert carry_out(decide, act, 0, most=5) == "stored at 13"
    assert done == ["poll@0", "poll@1", "poll@2", "note@3", "store@13"]


def test_an_answer_carried_out_to_its_end_is_settled_or_asked_again() -> None:
    def act(action: str, seen: int) -> int | Again[int] | Finished[str]:
        return seen + 1

    assert carry_out(lambda v: ["a", "b"], act, 0, most=3, settled=lambda v: f"at {v}") == "at 2"
    assert carry_out(lambda v: [], act, 7, most=3, settled=lambda v: f"at {v}") == "at 7"
    with pytest.raises(NotReady, match="never settles"):  # no `settled`: asked again, bounded
        carry_out(lambda v: ["a"], act, 0, most=3, contradiction="never settles")


def test_answers_that_contradict_each_other_are_bounded() -> None:
    asked: list[int] = []

    def keep_polling(v: int) -> list[str]:
        asked.append(v)
        return ["poll"]

    with pytest.raises(NotReady, match="the driver contradicts itself"):
        carry_out(keep_polling, lambda a, v: Again(v + 1), 0, most=4,
                  contradiction="the driver contradicts itself")  # fmt: skip
    assert asked == [0, 1, 2, 3]


def test_what_an_action_raises_goes_through() -> None:
    def act(action: str, seen: int) -> int:
        raise ExecutionError(f"{action} failed")

    with pytest.raises(ExecutionError, match="store failed"):
        carry_out(lambda v: ["store"], act, 0, most=2)
