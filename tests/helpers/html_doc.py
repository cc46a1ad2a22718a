"""What a reader of an HTML report sees, parsed with the standard library: per <section>
its tables (rows of cell text), its inline SVGs and their <title> tooltips, its text."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Svg:
    titles: list[str] = field(default_factory=list)


@dataclass
class Section:
    id: str
    tables: list[list[list[str]]] = field(default_factory=list)  # table -> row -> cells
    row_classes: list[list[str]] = field(default_factory=list)  # table -> row -> class
    svgs: list[Svg] = field(default_factory=list)
    text: list[str] = field(default_factory=list)

    def table_dicts(self, index: int = 0) -> list[dict[str, str]]:
        """A table's body rows as header -> cell."""
        header, *rows = self.tables[index]
        return [dict(zip(header, row, strict=True)) for row in rows]

    @property
    def all_text(self) -> str:
        return " ".join(" ".join(self.text).split())


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: dict[str, Section] = {}
        self.ids: list[str] = []
        self._section: Section | None = None
        self._svg: Svg | None = None
        self._title: list[str] | None = None
        self._cell: list[str] | None = None
        self._row: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(a["id"] or "")
        if tag == "section":
            self._section = Section(a.get("id") or "")
            self.sections[self._section.id] = self._section
        s = self._section
        if s is None:
            return
        if tag == "svg":
            self._svg = Svg()
            s.svgs.append(self._svg)
        elif tag == "title" and self._svg is not None:
            self._title = []
        elif tag == "table":
            s.tables.append([])
            s.row_classes.append([])
        elif tag == "tr":
            self._row = []
            s.row_classes[-1].append(a.get("class") or "")
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        s = self._section
        if tag == "section":
            self._section = None
        elif tag == "svg":
            self._svg = None
        elif tag == "title" and self._title is not None and self._svg is not None:
            self._svg.titles.append("".join(self._title))
            self._title = None
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None and s is not None:
            s.tables[-1].append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._title is not None:
            self._title.append(data)
        if self._cell is not None:
            self._cell.append(data)
        if self._section is not None and self._svg is None:
            self._section.text.append(data)


@dataclass
class Doc:
    sections: dict[str, Section]
    ids: list[str]


def parse(text: str) -> Doc:
    p = _Parser()
    p.feed(text)
    p.close()
    return Doc(p.sections, p.ids)


# Anything a browser would fetch: a URL in src/href/xlink:href (not a #fragment), CSS
# url() and @import, scripts, frames, links, embedded objects.
EXTERNAL = re.compile(
    r"""(?:\b(?:src|href|xlink:href|action|srcset)\s*=\s*["']?\s*(?!["']?#)[^\s"'>]"""
    r"""|url\(\s*["']?\s*(?!#)|@import|<script\b|<iframe\b|<link\b|<object\b|<embed\b|<img\b)""",
    re.I,
)
