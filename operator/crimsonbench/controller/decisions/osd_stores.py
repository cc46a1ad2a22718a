"""What the facts Job's osd-stores section says (manifests.maintenance.OSD_STORES_SCRIPT):
the object store each crimson OSD's daemon runs, by the option it answered for. Pure."""

from __future__ import annotations

import json

from crimsonbench.errors import ParseError
from crimsonbench.manifests.maintenance import OSD_STORES


def crimson_stores(text: str) -> dict[int, tuple[str, str]]:
    """osd id -> (store option, store) from the facts Job's OSD_STORES section: one JSON
    document per crimson OSD that answered, {"id", "option", "answer": {option: store}}."""
    out: dict[int, tuple[str, str]] = {}
    decoder, pos, text = json.JSONDecoder(), 0, text.strip()
    while pos < len(text):
        try:
            doc, end = decoder.raw_decode(text, pos)
        except ValueError:
            raise ParseError(f"the facts Job's {OSD_STORES} section is not JSON at: "
                             f"{text[pos:pos + 200]!r}") from None  # fmt: skip
        pos = end
        while pos < len(text) and text[pos].isspace():
            pos += 1
        answer = doc.get("answer") if isinstance(doc, dict) else None
        option = str(doc.get("option", "")) if isinstance(doc, dict) else ""
        store = answer.get(option) if isinstance(answer, dict) else None
        if isinstance(store, str) and "id" in doc:
            out[int(doc["id"])] = (option, store)
    return out
