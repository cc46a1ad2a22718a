"""Finding fio's JSON document in what fio printed."""

from __future__ import annotations

import json
import logging
from typing import Any

import orjson

log = logging.getLogger(__name__)


def find_json_document(text: str) -> dict[str, Any] | None:
    """fio's JSON object in its output, or None.

    fio prints notes and some errors on stdout before the JSON ("note: both iodepth >= 1
    and synchronous I/O engine ..."), so try each line that opens an object."""
    decoder = json.JSONDecoder()
    starts = [0] if text.startswith("{") else []
    pos = text.find("\n{")
    while pos != -1:
        starts.append(pos + 1)
        pos = text.find("\n{", pos + 1)
    for start in starts:
        try:
            # usually the JSON runs to the end: orjson reads a step's json+ documents
            # (mostly histogram bins) ~4x faster than json, which only decodes a prefix
            doc = orjson.loads(text[start:] if start else text)
        except orjson.JSONDecodeError:
            try:
                doc, _ = decoder.raw_decode(text, start)
            except json.JSONDecodeError:
                continue
        if isinstance(doc, dict):
            if start:
                log.debug("skipped %d characters before fio's JSON", start)
            return doc
    return None
