"""The run's name (metadata.name): the one rule, for the CRD and for every Python edge.

A run's name becomes the name of everything the run makes: local mode's results/<name>
directory; on Kubernetes its Jobs (`<name>-fio-driver`, `<name>-rbd-cleanup`,
`<name>-ceph-cleanup`, ...), ConfigMaps (`<name>-run`, `<name>-step-<step>`), the Rook
CephClient `<name>-fio` (cephx user client.<name>-fio, Secret rook-ceph-client-<name>-fio)
and the `bench.crimson.ceph.io/run` label on all of them. So it must be a DNS-1123 label
(lower case letters, digits, '-'; no '.', '/', NUL, nothing a path could climb with), short
enough that the longest fixed suffix, `-ceph-cleanup` (13 characters), still gives a valid
63-character Job name: at most 50 characters. (Names with a node name in them are shortened
with a hash by manifests.naming.dns_name.)
"""

from __future__ import annotations

import re

from crimsonbench.errors import InvalidSpec
from crimsonbench.spec.base import DNS_LABEL_PATTERN, PATTERN_HINTS, short
from crimsonbench.spec.rules import Rule, cel_regex

MAX_RUN_NAME = 50
LONGEST_SUFFIX = "-ceph-cleanup"  # manifests.maintenance: dns_name(run, "ceph", "cleanup")
DNS_LABEL_MAX = 63
JOB_NAME_LIMIT = DNS_LABEL_MAX  # a Job's name is its pods' job-name label value

NAME_FIELD = "metadata.name"
_KINDS = {dict: "a mapping", list: "a list", bool: "a boolean", int: "an integer",
          float: "a number"}  # fmt: skip

NAME_RULE = Rule(
    # Evaluated by the API server on the root of a BenchmarkRun, where CEL may read
    # metadata.name (and nothing else of metadata).
    cel=f"size(self.metadata.name) <= {MAX_RUN_NAME} && "
    f"self.metadata.name.matches({cel_regex(DNS_LABEL_PATTERN)})",
    message=f"a run's name must be a DNS-1123 label of at most {MAX_RUN_NAME} characters: "
    "lower case letters, digits and '-', starting and ending with a letter or digit "
    "(e.g. quick-crimson); its Jobs, ConfigMaps, CephClient and results directory are "
    "named after it",
    field=NAME_FIELD,
    check=lambda name: (
        isinstance(name, str)
        and len(name) <= MAX_RUN_NAME
        and re.fullmatch(DNS_LABEL_PATTERN, name) is not None
    ),
)


def validate_name(name: object, field: str = NAME_FIELD) -> str:
    """The run's name if it passes NAME_RULE; otherwise InvalidSpec naming `field`, what is
    wrong with this name, and the rule."""
    if NAME_RULE.check(name):
        assert isinstance(name, str)
        return name
    if name is None or name == "":
        raise InvalidSpec(
            field, f"give the run a name (metadata: {{name: ...}}); {NAME_RULE.message}"
        )
    if not isinstance(name, str):
        what = _KINDS.get(type(name), f"a {type(name).__name__}")
        raise InvalidSpec(field, f"is {what} ({short(name)}), not a string; {NAME_RULE.message}")
    if len(name) > MAX_RUN_NAME:
        problem = f"has {len(name)} characters, more than {MAX_RUN_NAME}"
    else:
        bad = sorted({c for c in name if not re.fullmatch("[a-z0-9-]", c)})
        if bad:
            problem = "may not contain " + ", ".join(repr(c) for c in bad[:8])
        else:
            problem = "must start and end with a letter or digit"
    raise InvalidSpec(field, f"{short(name)} {problem}; {NAME_RULE.message}")


def validate_namespace(namespace: str, field: str = "metadata.namespace") -> str:
    """A namespace name (a DNS-1123 label of at most 63 characters), or InvalidSpec."""
    if len(namespace) <= DNS_LABEL_MAX and re.fullmatch(DNS_LABEL_PATTERN, namespace):
        return namespace
    raise InvalidSpec(field, f"{short(namespace)} {PATTERN_HINTS[DNS_LABEL_PATTERN]}")


assert MAX_RUN_NAME + len(LONGEST_SUFFIX) == JOB_NAME_LIMIT
