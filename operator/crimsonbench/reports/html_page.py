"""The pieces of a single-file HTML report: escaped text, tables, sections, the page.

Everything shown comes from result files, which are untrusted input: every string goes
through html.escape here, and the page's Content-Security-Policy forbids scripts and
every fetch, so a string that slipped through could still neither run nor call home.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable, Sequence

from crimsonbench.reports.tables import Table

# No script, no request of any kind: inline styles (ours and matplotlib's SVG) only.
CSP = "default-src 'none'; style-src 'unsafe-inline'"

# Readable at 1280 px: a column of at most 1200 px; wide tables scroll inside their box;
# long words (paths, reasons) wrap instead of widening the page.
CSS = """
body{margin:0;font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;
color:#1d1d1f;background:#fff;overflow-wrap:anywhere}
main{max-width:1200px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:1.6em;margin:.4em 0}h2{font-size:1.3em;margin:1.6em 0 .4em;
border-bottom:1px solid #ddd;padding-bottom:.2em}h3{font-size:1.05em;margin:1.2em 0 .3em}
nav{font-size:.9em;margin:.5em 0 1em}nav a{margin-right:.9em;white-space:nowrap}
a{color:#0a58ca}
.scroll{overflow-x:auto;max-width:100%;margin:.5em 0}
table{border-collapse:collapse;font-size:12.5px;font-variant-numeric:tabular-nums}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:right;vertical-align:top}
th{background:#f4f5f7;white-space:nowrap}
td:first-child,th:first-child{text-align:left}
table.facts td,table.facts th,table.text td,table.text th{text-align:left}
table.facts th{width:14em;white-space:normal}
tr.suspect td{background:#fff4e5}
td.bad{color:#b00020;font-weight:600}
figure{margin:.8em 0}svg.plot{width:100%;height:auto;max-width:100%;display:block}
figure.curve svg.plot{max-width:820px}
figcaption{font-size:.85em;color:#555}
g.pt:hover{opacity:.6}
code{font-size:.92em;background:#f4f5f7;padding:0 .2em}
.note{color:#555}
"""

_BOLD = re.compile(r"\*\*(.+?)\*\*")
_CODE = re.compile(r"`([^`]+)`")


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def md_inline(text: str) -> str:
    """The little markdown the shared report text uses (**bold**, `code`, \\_), as HTML;
    escaped first, so nothing in the text becomes markup but these."""
    out = esc(text).replace("\\_", "_")
    out = _BOLD.sub(r"<strong>\1</strong>", out)
    return _CODE.sub(r"<code>\1</code>", out)


def table_html(
    table: Table,
    row_class: Callable[[Sequence[str]], str] = lambda cells: "",
    cell_class: Callable[[str], str] = lambda cell: "",
    css: str = "",
) -> str:
    """A Table (reports.tables) as an HTML table in a box that scrolls sideways when it
    is wider than the page. row_class/cell_class: a CSS class from the cells' text."""
    head = "".join(f"<th>{md_inline(h)}</th>" for h in table.header)
    rows = []
    for cells in table.rows:
        tds = "".join(_td(c, cell_class(c)) for c in cells)
        cls = row_class(cells)
        rows.append(f'<tr class="{esc(cls)}">{tds}</tr>' if cls else f"<tr>{tds}</tr>")
    cls_attr = f' class="{esc(css)}"' if css else ""
    return (
        f'<div class="scroll"><table{cls_attr}><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _td(cell: str, cls: str) -> str:
    return (
        f'<td class="{esc(cls)}">{md_inline(cell)}</td>' if cls else f"<td>{md_inline(cell)}</td>"
    )


def facts_html(facts: Iterable[tuple[str, str]]) -> str:
    """Label / value rows (the run's header, its provenance)."""
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{md_inline(v)}</td></tr>" for k, v in facts)
    return f'<div class="scroll"><table class="facts"><tbody>{rows}</tbody></table></div>'


def lines_html(lines: Sequence[str]) -> str:
    """Markdown-ish lines: "- " items become a list, blank lines separate, the rest are
    paragraphs."""
    out: list[str] = []
    items: list[str] = []
    for line in [*lines, ""]:
        if line.startswith("- "):
            items.append(f"<li>{md_inline(line[2:])}</li>")
            continue
        if items:
            out.append(f"<ul>{''.join(items)}</ul>")
            items = []
        if line.strip():
            out.append(f"<p>{md_inline(line)}</p>")
    return "".join(out)


def note(text: str) -> str:
    return f'<p class="note">{md_inline(text)}</p>'


def figure_html(svg: str, caption: str = "", css: str = "") -> str:
    """An inline SVG (reports.svg) and its caption. css "curve": at most 820 px wide (a
    response curve at full width is taller than the screen)."""
    cap = f"<figcaption>{md_inline(caption)}</figcaption>" if caption else ""
    cls = f' class="{esc(css)}"' if css else ""
    return f"<figure{cls}>{svg}{cap}</figure>"


def section(anchor: str, title: str, body: str, level: int = 2) -> str:
    return f'<section id="{esc(anchor)}"><h{level}>{md_inline(title)}</h{level}>{body}</section>'


def page(title: str, nav: Sequence[tuple[str, str]], body: Sequence[str]) -> str:
    """The whole document. nav: (section id, label) links at the top."""
    links = "".join(f'<a href="#{esc(a)}">{esc(label)}</a>' for a, label in nav)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>\n"
        f"<body><main><h1>{esc(title)}</h1><nav>{links}</nav>\n"
        + "\n".join(body)
        + "\n</main></body></html>\n"
    )
