"""Cross-field rules, declared once: CEL for the API server, a Python check for the CLI.

The CRD generator copies `cel`/`message` into `x-kubernetes-validations`, and the pydantic
validators run `check` with the same message, so `kubectl apply` and `crimsonbench run`
reject a bad spec with the same words.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Rule:
    cel: str  # evaluated by the API server against `self` (the object carrying the rule)
    message: str  # shown to the user by both the API server and the CLI
    field: str  # dotted camelCase path the message is about, relative to `self`
    check: Callable[[Any], bool]  # True when the object is valid

    def schema(self) -> dict[str, str]:
        out = {"rule": self.cel, "message": self.message}
        if self.field:
            out["fieldPath"] = "." + self.field
        return out


def cel_regex(pattern: str) -> str:
    """A regex as a CEL raw string literal (no escape processing: `\\.` stays `\\.`)."""
    if "'" in pattern or "\n" in pattern:
        raise ValueError(f"{pattern!r} cannot be a CEL raw string literal")
    return f"r'{pattern}'"


def map_keys_rule(field: str, attr: str, max_len: int, pattern: str, message: str) -> Rule:
    """Every key of the map `field` (`attr` in Python) at most max_len characters and
    matching pattern: the structural schema cannot constrain map keys, so CEL does (and
    Python the same)."""
    return Rule(
        cel=f"!has(self.{field}) || self.{field}.all(k, size(k) <= {max_len} && "
        f"k.matches({cel_regex(pattern)}))",
        message=message,
        field=field,
        check=lambda o: all(
            len(k) <= max_len and re.fullmatch(pattern, k) for k in getattr(o, attr)
        ),
    )


def cel_rules(rules: tuple[Rule, ...]) -> dict[str, Any]:
    """json_schema_extra for a model carrying these rules."""
    return {"x-kubernetes-validations": [r.schema() for r in rules]}


def violations(rules: tuple[Rule, ...], obj: Any) -> list[Rule]:
    """Every rule obj breaks, in declaration order."""
    return [rule for rule in rules if not rule.check(obj)]
