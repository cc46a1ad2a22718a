"""INI text as fio job files and ceph.conf want it: [section] then key/value lines."""

from __future__ import annotations

from collections.abc import Mapping


def render_ini(
    sections: Mapping[str, Mapping[str, str | int]],
    *,
    sep: str = "=",
    indent: str = "",
    prefix: str = "",
) -> str:
    """fio: `key=value`; ceph.conf: render_ini(..., sep=" = ", indent="\\t").
    prefix: sections already rendered, kept in front."""
    lines: list[str] = [prefix] if prefix else []
    for name, opts in sections.items():
        lines.append(f"[{name}]")
        lines.extend(f"{indent}{k}{sep}{v}" for k, v in opts.items())
        lines.append("")
    return "\n".join(lines)
