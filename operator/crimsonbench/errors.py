"""Domain errors. They know nothing of kopf or the CLI; the edges map them.

Every message names the field at fault and says how to fix it, because the user reads it
in `kubectl describe` or a terminal, far from the code.
"""

from __future__ import annotations


class CrimsonBenchError(Exception):
    """Base of all errors this package raises on purpose. Equal when of the same type and
    message: the operator's pure decisions return NotReady and ExecutionError among their
    actions (an exception is a value too) for its shell to raise, and tests compare them."""

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.args == getattr(other, "args", None)

    def __hash__(self) -> int:
        return hash((type(self), self.args))


class InvalidSpec(CrimsonBenchError):
    """The spec cannot be run as written; retrying will not help.

    `field` and `message` are the first problem; `problems` holds every one found (a
    spec with three bad fields says so at once instead of one at a time)."""

    def __init__(self, field: str, message: str, *, more: tuple[tuple[str, str], ...] = ()) -> None:
        self.field = field
        self.message = message
        self.problems = ((field, message), *more)
        super().__init__("\n".join(f"{f}: {m}" if f else m for f, m in self.problems))


class NotReady(CrimsonBenchError):
    """Not yet: a dependency is not ready; retrying later may help. The one way the
    operator says "not yet": its I/O shell raises it, its pure decisions return it."""


class TargetMissing(NotReady):
    """The run's target is not there (its CephCluster: not made yet, or deleted). Not yet,
    but not for ever: the operator fails the run once it has been missing longer than
    errorTimeoutSeconds (and restores what the run changed, if anything is left)."""


class ParseError(CrimsonBenchError):
    """Output of an external tool (fio, lscpu, ceph) could not be understood."""


class ExecutionError(CrimsonBenchError):
    """A step failed while running (a daemon died, fio exited non-zero, ...)."""
