"""INI text as fio job files and ceph.conf want it: [section] then key/value lines.

The writer refuses, rather than escapes, anything that would change the file's shape:
neither fio nor Ceph has an escape for a line break, and a value that could start a line
could add an option (`exec_prerun=...`), a section (`[job]`) or a directive (fio's
`include FILE`). Every string that reaches a job file or a ceph.conf goes through here,
so a value the spec's validation missed still cannot become a line of its own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass


class IniError(ValueError):
    """A section, key or value that would change the structure of the file written."""


# fio job names, Ceph sections (global, osd.3, client.admin, client.run-fio)
_SECTION = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$")
# fio options; Ceph options (spaces and underscores are the same to Ceph)
_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(?: [A-Za-z0-9_]+)*$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Dialect:
    name: str
    sep: str
    indent: str
    # characters a value may not hold beyond control characters. fio: `[`/`]` have no use
    # in an option value (fio's own syntax is `a:b,c/d`), `$` expands environment
    # variables and expressions, `;` and `#` end the value silently (parse.c,
    # strip_blank_end: a comment). ceph.conf needs `[v2:ADDR]` and `$run_dir` in our own
    # values: both are kept, a line break cannot get in either way.
    forbidden_in_values: str


FIO = Dialect("fio job file", "=", "", "[]$;#")
CEPH_CONF = Dialect("ceph.conf", " = ", "\t", "")


def _check(dialect: Dialect, section: str, key: str, value: object) -> str:
    where = f"{dialect.name} [{section!r}] {key!r}"
    if not _KEY.match(key) or key.lower().startswith("include"):
        raise IniError(f"{where}: not an option name (letters, digits, '_')")
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise IniError(f"{where}: value {value!r} is not a string or an integer")
    text = str(value)
    if _CONTROL.search(text):
        raise IniError(f"{where}: value {text[:60]!r} holds a line break or control character")
    bad = sorted(set(text) & set(dialect.forbidden_in_values))
    if bad:
        raise IniError(f"{where}: value {text[:60]!r} may not contain {' '.join(bad)}")
    if text != text.strip():
        raise IniError(f"{where}: value {text[:60]!r} starts or ends with white space")
    return text


def render_ini(
    sections: Mapping[str, Mapping[str, str | int]], dialect: Dialect = FIO, *, prefix: str = ""
) -> str:
    """prefix: sections already rendered by this function, kept in front."""
    lines: list[str] = [prefix] if prefix else []
    for name, opts in sections.items():
        if not _SECTION.match(name):
            raise IniError(f"{dialect.name}: {name[:60]!r} is not a section name")
        lines.append(f"[{name}]")
        for key, value in opts.items():
            lines.append(f"{dialect.indent}{key}{dialect.sep}{_check(dialect, name, key, value)}")
        lines.append("")
    return "\n".join(lines)
