"""Reading a spec file with bounds: YAML as kubectl would take it, minus what only an
attacker (or an accident) writes.

- At most MAX_SPEC_BYTES are read: a 50 MB file is refused before parsing.
- Aliases (`*name`) are refused: they let a few hundred bytes expand to gigabytes once
  the spec is walked (the "billion laughs"); a BenchmarkRun has no use for them.
- Nesting deeper than MAX_DEPTH is refused (deep nesting crashed the composer with a
  RecursionError); a real spec nests six levels.
- A key twice in one mapping is refused (PyYAML keeps the last silently, kubectl refuses).
- An integer of more than MAX_INT_DIGITS digits is refused (a 5000-digit integer raised
  ValueError from int(); no field takes more than 10 digits).
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode

MAX_SPEC_BYTES = 1 << 20  # 1 MiB: the API server's own limit for an object is ~1.5 MiB
MAX_DEPTH = 32
MAX_INT_DIGITS = 19  # int64, as the API server stores integers


class SpecLoader(yaml.SafeLoader):
    """yaml.SafeLoader with the bounds above; every refusal is a YAMLError with a mark."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:  # type: ignore[override]
        if self.check_event(AliasEvent):
            event = self.peek_event()
            raise ComposerError(
                None,
                None,
                f"aliases (*{event.anchor}) are not accepted in a BenchmarkRun; write the "
                "value out in full",
                event.start_mark,
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                event = self.peek_event()
                raise ComposerError(
                    None,
                    None,
                    f"nested more than {MAX_DEPTH} levels deep; a BenchmarkRun nests a few",
                    event.start_mark,
                )
            return super().compose_node(parent, index)  # type: ignore[no-any-return]
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            seen: dict[Any, Node] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: construct_mapping says so below
                    continue
                if first is not None:
                    raise ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found the key {key!r} twice (first on line "
                        f"{first.start_mark.line + 1}); write each key once",
                        key_node.start_mark,
                    )
                seen[key] = key_node
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]

    def construct_yaml_int(self, node: ScalarNode) -> int:
        text = str(self.construct_scalar(node))  # type: ignore[no-untyped-call]
        digits = sum(c.isdigit() for c in text)
        if digits > MAX_INT_DIGITS:
            raise ConstructorError(
                None,
                None,
                f"an integer of {digits} digits is too large; no field takes more than "
                f"{MAX_INT_DIGITS}",
                node.start_mark,
            )
        return super().construct_yaml_int(node)  # type: ignore[no-any-return]


SpecLoader.add_constructor("tag:yaml.org,2002:int", SpecLoader.construct_yaml_int)


def load_yaml(text: str) -> Any:
    """One YAML document, with the bounds above (yaml.YAMLError when one is broken)."""
    loader = SpecLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
