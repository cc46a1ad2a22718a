"""The one interpreter of the operator's decisions: ask a pure decision (controller/
decisions/) what to do for what was observed, carry each action out, and ask again when
an action says so, a bounded number of times. The step loop and the restore both run
through it; the decisions never act, the actions never decide.

An action's carrying out (`act`) answers with one of:
- the view, updated (the next action of the same answer is carried out);
- Again(view): ask the decision again with this view (what was carried out changed what
  it would decide: a poll's answer, a Job's outcome);
- Finished(value): done, carry_out returns value;
or raises (NotReady: the tick waits; ExecutionError: the run fails).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from crimsonbench.errors import NotReady

V = TypeVar("V")  # what the decision reads
A = TypeVar("A")  # an action
R = TypeVar("R")  # what carrying it out ends with


@dataclass(frozen=True)
class Again(Generic[V]):
    view: V


@dataclass(frozen=True)
class Finished(Generic[R]):
    value: R


def carry_out(
    decide: Callable[[V], Sequence[A]],
    act: Callable[[A, V], V | Again[V] | Finished[R]],
    view: V,
    *,
    most: int,
    settled: Callable[[V], R] | None = None,
    contradiction: str = "the decisions do not settle",
) -> R:
    """Decide, act, until an action finishes. An answer all carried out without Again
    or Finished ends with settled(view) (None: ask again). More than `most` answers in
    one call means what is observed contradicts itself: NotReady(contradiction), the next
    tick tries afresh."""
    for _ in range(most):
        for action in decide(view):
            step = act(action, view)
            if isinstance(step, Finished):
                return step.value
            if isinstance(step, Again):
                view = step.view
                break
            view = step
        else:
            if settled is not None:
                return settled(view)
    raise NotReady(contradiction)
