"""Domain errors. They know nothing of kopf or the CLI; the edges map them.

Every message names the field at fault and says how to fix it, because the user reads it
in `kubectl describe` or a terminal, far from the code.
"""

from __future__ import annotations


class CrimsonBenchError(Exception):
    """Base of all errors this package raises on purpose."""


class InvalidSpec(CrimsonBenchError):
    """The spec cannot be run as written; retrying will not help."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class NotReady(CrimsonBenchError):
    """A dependency is not ready yet; retrying later may help."""


class ParseError(CrimsonBenchError):
    """Output of an external tool (fio, lscpu, ceph) could not be understood."""


class ExecutionError(CrimsonBenchError):
    """A step failed while running (a daemon died, fio exited non-zero, ...)."""
