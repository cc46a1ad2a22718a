"""The real-node e2e (see e2e/harness/stack.py): skipped, with the reason printed, only
where the machine cannot run it: not root, no containerd/runc, no Go (Kubernetes, helm and
the pause image are built from source), no Ceph packages, or image builds that fail here.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import pytest
from harness.stack import Stack, StackUnavailable, e2e_stack

TIMINGS: dict[str, float] = {}  # the stack's timings (tests add theirs to s.timings)


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    try:
        with e2e_stack() as s:
            yield s
            TIMINGS.update(s.timings)
    except StackUnavailable as exc:
        print(f"\ntests/e2e skipped: {exc}", file=sys.stderr)
        pytest.skip(str(exc))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TIMINGS:
        terminalreporter.section("real-node e2e")
        terminalreporter.write_line(json.dumps({k: round(v, 1) for k, v in TIMINGS.items()}))
