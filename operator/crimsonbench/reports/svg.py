"""matplotlib figures as SVG to inline in an HTML page: vector, text as text, no external
reference, and a native <title> tooltip on the points given a gid (reports.html_figures).

Several SVGs share one HTML document, so every id of a figure is prefixed (matplotlib
numbers its groups from 1 in every figure, and its marker and clip-path ids are hashes
that two figures can share with different content)."""

from __future__ import annotations

import html
import io
import re
from collections.abc import Mapping

import matplotlib as mpl
from matplotlib.figure import Figure

_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}
_PROLOGUE = re.compile(r"\A.*?(?=<svg\b)", re.S)  # XML declaration and DOCTYPE
_RDF = re.compile(r"\s*<metadata>.*?</metadata>", re.S)
_SIZE = re.compile(r'(<svg\b[^>]*?) width="[^"]*" height="[^"]*"')
# HTML's parser puts inline <svg> and xlink:href in their namespaces itself; dropping the
# declarations leaves the page without a single URL
_XMLNS = re.compile(r'\s+xmlns(?::xlink)?="[^"]*"')
_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(xlink:href="#|url\(#)')


def inline_svg(fig: Figure, prefix: str, tooltips: Mapping[str, str] | None = None) -> str:
    """The figure as an <svg> element. prefix: unique in the page (letters, digits, -).
    tooltips: gid -> text, shown on hover over that group (text is escaped here)."""
    buf = io.StringIO()
    # text stays <text> (no glyph paths: ~3x smaller, searchable); nothing is rasterized
    with mpl.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata=_METADATA)
    svg = _RDF.sub("", _PROLOGUE.sub("", buf.getvalue(), count=1), count=1)
    # scale to the column's width (the viewBox keeps the aspect ratio)
    svg = _SIZE.sub(r'\1 class="plot" role="img"', svg, count=1)
    head, rest = svg.split(">", 1)
    svg = _XMLNS.sub("", head) + ">" + rest
    for gid, text in (tooltips or {}).items():
        svg = svg.replace(
            f'<g id="{gid}">', f'<g id="{gid}" class="pt"><title>{html.escape(text)}</title>', 1
        )
    svg = _ID.sub(lambda m: f'id="{prefix}-{m[1]}"', svg)
    return _REF.sub(lambda m: f"{m[1]}{prefix}-", svg)
