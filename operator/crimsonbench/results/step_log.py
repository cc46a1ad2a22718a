"""What a fio client step (or a facts pod) prints: files between `==> name <==` lines.

A step on the fio driver prints fio's JSON (fio.json), fio's own messages (fio.log, when
it said anything), every job's IOPS log (<job>_iops.<n>.log.<server>) and the files the
operator left with it (osds.json)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from crimsonbench.errors import ParseError
from crimsonbench.results.fio_doc import find_json_document

_DELIMITER = re.compile(r"^==> (?P<name>[A-Za-z0-9_.:-]+) <==$", re.MULTILINE)
FIO_OUTPUT = "fio.json"
FIO_MESSAGES = "fio.log"


def parse_sections(text: str) -> dict[str, str]:
    """name -> body of every delimited section. ParseError when there is none, or a name
    appears twice (two pods' logs mixed up)."""
    matches = list(_DELIMITER.finditer(text))
    if not matches:
        head = text.strip()[:200] or "(empty log)"
        raise ParseError(f"no '==> <name> <==' delimiter in the pod log; it starts with: {head}")
    sections: dict[str, str] = {}
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        name = match["name"]
        if name in sections:
            raise ParseError(f"the pod log has two sections {name}")
        sections[name] = text[match.end() : end].strip("\n")
    return sections


def parse_sections_or_empty(text: str) -> dict[str, str]:
    """parse_sections, or {} when the text has no valid sections (a step that failed
    before printing any)."""
    try:
        return parse_sections(text)
    except ParseError:
        return {}


def fio_output(sections: Mapping[str, str]) -> str:
    """fio's JSON document of a step, as fio wrote it. ParseError with fio's own message
    when it wrote none."""
    body = sections.get(FIO_OUTPUT, "")
    if find_json_document(body) is None:
        said = sections.get(FIO_MESSAGES, "").strip()
        why = f"; fio said: {said[-500:]}" if said else ""
        raise ParseError(f"fio wrote no JSON{why}")
    return body + "\n"


def iops_logs(sections: Mapping[str, str]) -> dict[str, str]:
    """file name -> text of every IOPS log in the log."""
    return {name: body for name, body in sections.items() if "_iops." in name}
