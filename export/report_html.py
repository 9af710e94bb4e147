"""The report as text and as one self-contained HTML page (no Spark here).

``format_table`` is the aligned text table the summary prints; ``render_page`` lays out the
summary, the charts (embedded as ``data:`` URIs, so the page is one file that can be mailed or
opened from an object store's console; the same PNGs sit beside it) and every small table,
each under a heading. Every value from the cluster (topic names, config values) is escaped.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from typing import Any

import attrs


@attrs.frozen
class Table:
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    note: str = ""


@attrs.frozen
class Chart:
    """A PNG saved as ``file_name`` beside the page; without one, only its note shows."""

    title: str
    file_name: str | None
    png: bytes | None
    note: str = ""


def cell_text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, list | tuple):  # a replica set: [] is an empty ISR, - is none given
        return "[" + ", ".join(cell_text(v) for v in value) + "]"
    return str(value)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain aligned text table (what the summary prints)."""
    cells = [[cell_text(value) for value in row] for row in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    # Numbers align right, text left (decided by the first row's values).
    right = [bool(rows) and is_number(rows[0][i]) for i in range(len(columns))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right, strict=True)
        ).rstrip()

    return "\n".join([line(columns), *(line(row) for row in cells)])


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 75em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f3f3f3; text-align: left; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 0 0 1.5em; }
img { max-width: 100%; border: 1px solid #eee; }
.note { color: #555; font-style: italic; }
"""


def render_page(
    heading: str,
    summary: Sequence[str],
    charts: Sequence[Chart],
    tables: Sequence[Table],
) -> str:
    """One HTML page: the summary lines, then the charts, then the tables."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_escape(heading)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_escape(heading)}</h1>",
        "<h2>Summary</h2><ul>",
        *(f"<li>{_escape(line)}</li>" for line in summary),
        "</ul>",
        "<h2>Charts</h2>",
        *(_chart(chart) for chart in charts),
        "<h2>Tables</h2>",
        *(_table(table) for table in tables),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _escape(value: Any) -> str:
    return html.escape(cell_text(value), quote=True)


def _chart(chart: Chart) -> str:
    note = f'<p class="note">{_escape(chart.note)}</p>' if chart.note else ""
    if chart.png is None:
        return f"<figure><h3>{_escape(chart.title)}</h3>{note}</figure>"
    data = base64.b64encode(chart.png).decode("ascii")
    return (
        f"<figure><h3>{_escape(chart.title)}</h3>{note}"
        f'<img src="data:image/png;base64,{data}" alt="{_escape(chart.title)}">'
        f"<figcaption>also saved as {_escape(chart.file_name)}</figcaption></figure>"
    )


def _table(table: Table) -> str:
    note = f'<p class="note">{_escape(table.note)}</p>' if table.note else ""
    head = "".join(f"<th>{_escape(c)}</th>" for c in table.columns)
    if not table.rows:
        body = f'<tr><td colspan="{len(table.columns)}">none</td></tr>'
    else:
        body = "\n".join("<tr>" + "".join(_td(v) for v in row) + "</tr>" for row in table.rows)
    return (
        f'<h3 id="{_escape(table.title)}">{_escape(table.title)}</h3>{note}'
        f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>"
    )


def _td(value: Any) -> str:
    return (
        f'<td class="number">{_escape(value)}</td>'
        if is_number(value)
        else f"<td>{_escape(value)}</td>"
    )
