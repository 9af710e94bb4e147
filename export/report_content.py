"""What the report shows, from its collected rows: the summary text, the charts and the HTML
page's tables (no Spark here: ``report_job`` computes the rows and writes the files).

Rows are mappings (Spark ``Row`` objects or dicts) keyed by the report tables' columns.
"""

from __future__ import annotations

from typing import Any

from pykraft.export.report_charts import (
    broker_load_chart,
    isr_changes_chart,
    isr_timeline,
    partition_sizes_chart,
    size_bars,
)
from pykraft.export.report_html import Chart, Table, format_table, render_page

SIZES_TABLE = "partition_sizes"  # with --log-dirs: one row per replica
NO_SIZES = "partition sizes: not measured (the report reads metadata only; give --log-dirs)"
CHART_FILE = "broker_load.png"
SIZES_CHART_FILE = "partition_sizes.png"
HTML_FILE = "report.html"
SUMMARY_FILE = "summary.txt"
_PARTITION_COLUMNS = ("topic", "partition", "leader", "replicas", "isr", "leader_epoch")
# What the summary and the page show of each small table.
HTML_COLUMNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "broker_load",
        ("broker_id", "fenced", "leaders", "replicas", "preferred_leaders", "leader_imbalance"),
    ),
    ("broker_skew", ("metric", "min", "max", "mean", "max_over_mean")),
    (
        "topics",
        (
            "topic",
            "partitions",
            "replication_factor",
            "under_replicated",
            "offline",
            "config_overrides",
        ),
    ),
    ("under_replicated", _PARTITION_COLUMNS),
    ("offline", _PARTITION_COLUMNS),
    (
        "isr_changes",
        ("offset", "timestamp", "topic", "partition", "isr_before", "isr", "shrink", "expand"),
    ),
    (SIZES_TABLE, ("topic", "partition", "broker_id", "log_dir", "size")),
)


def position_text(position: Any) -> str:
    """Which image the report shows (a ``partitions`` row's snapshot_id and end_offset)."""
    if position is None:
        return "no partitions"
    return f"snapshot {position['snapshot_id']} (end offset {position['end_offset']})"


def report_charts(collected: dict[str, list[Any]]) -> list[Chart]:
    """The charts, each with the file name it is saved under beside the page."""
    load = broker_load_chart(collected["broker_load"])
    timeline = isr_timeline(collected["isr_changes"])
    charts = [
        Chart("Leaders and replicas per broker", CHART_FILE, load),
        Chart("ISR shrinks and expands", "isr_changes.png", isr_changes_chart(timeline)),
    ]
    if SIZES_TABLE in collected:
        bars = size_bars(collected[SIZES_TABLE])
        charts.append(Chart("Partition sizes", SIZES_CHART_FILE, partition_sizes_chart(bars)))
    else:
        charts.append(Chart("Partition sizes", None, None, NO_SIZES))
    return charts


def summary_lines(collected: dict[str, list[Any]]) -> list[str]:
    lines = [
        f"brokers: {len(collected['broker_load'])}, topics: {len(collected['topics'])}",
        f"under-replicated partitions: {len(collected['under_replicated'])}   "
        f"offline partitions: {len(collected['offline'])}   "
        f"ISR changes in the retained log: {len(collected['isr_changes'])}",
    ]
    if SIZES_TABLE not in collected:
        lines.append(NO_SIZES)
    return lines


def html_tables(collected: dict[str, list[Any]]) -> list[Table]:
    """Every small table, in the summary's order, with the columns a reader needs."""
    chosen = [(name, columns) for name, columns in HTML_COLUMNS if name in collected]
    return [
        Table(name, columns, tuple(tuple(row[c] for c in columns) for row in collected[name]))
        for name, columns in chosen
    ]


def summary(heading: str, collected: dict[str, list[Any]], written: str) -> str:
    columns = dict(HTML_COLUMNS)
    parts = [
        heading,
        *(
            format_table(
                columns[name], [[row[c] for c in columns[name]] for row in collected[name]]
            )
            for name in ("broker_load", "broker_skew", "topics")
        ),
        "\n".join(summary_lines(collected)),
        written,
    ]
    return "\n\n".join(parts)


def page(heading: str, collected: dict[str, list[Any]], charts: list[Chart]) -> str:
    return render_page(heading, summary_lines(collected), charts, html_tables(collected))
