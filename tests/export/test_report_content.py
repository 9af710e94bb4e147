"""The report's charts, text and HTML page from small rows (no Spark: rows are dicts)."""

from __future__ import annotations

import base64
import datetime
import html
import io
import re
from typing import Any

import pytest

from pykraft.export.report_charts import (
    IsrTimeline,
    SizeBars,
    broker_load_chart,
    human_bytes,
    isr_changes_chart,
    isr_timeline,
    partition_sizes_chart,
    size_bars,
)
from pykraft.export.report_content import (
    NO_SIZES,
    SIZES_TABLE,
    page,
    report_charts,
    summary,
)
from pykraft.export.report_html import Chart, Table, cell_text, render_page

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
T0 = datetime.datetime(2026, 11, 26, 9, 0, 0)  # what Spark collects: naive, the session's UTC


def change(
    offset: int, seconds: float | None, *, shrink: bool = False, expand: bool = False
) -> dict[str, Any]:
    stamp = None if seconds is None else T0 + datetime.timedelta(seconds=seconds)
    return {"offset": offset, "timestamp": stamp, "shrink": shrink, "expand": expand}


def png_size(png: bytes) -> tuple[int, int]:
    """(height, width) of a PNG that decodes (matplotlib's own reader)."""
    from matplotlib import image

    assert png[:8] == PNG_SIGNATURE
    pixels = image.imread(io.BytesIO(png), format="png")
    return pixels.shape[0], pixels.shape[1]


def test_isr_timeline_counts_per_distinct_append_time() -> None:
    changes = [
        change(18, 0, shrink=True),
        change(19, 1, expand=True),
        change(20, 1),  # a leader change only: neither
        change(22, 1, shrink=True),
        change(23, 2.5, shrink=True, expand=True),  # a member replaced
    ]
    assert isr_timeline(changes) == IsrTimeline(
        "append time (UTC, 2026-11-26)",
        ("09:00:00", "09:00:01", "09:00:02.500"),
        (1, 1, 1),
        (0, 1, 1),
    )


def test_isr_timeline_without_timestamps_uses_the_metadata_offset() -> None:
    changes = [change(7, None, shrink=True), change(9, 0, expand=True)]
    timeline = isr_timeline(changes)
    assert timeline == IsrTimeline(
        "metadata offset (the log has no timestamps)", ("7", "9"), (1, 0), (0, 1)
    )


def test_isr_timeline_groups_many_times_into_buckets() -> None:
    changes = [change(n, n, shrink=n % 2 == 0, expand=n % 2 == 1) for n in range(100)]
    timeline = isr_timeline(changes, buckets_max=10)
    assert len(timeline.labels) == 10 and timeline.labels[:2] == ("09:00:00", "09:00:10")
    assert timeline.shrinks == (5,) * 10 and timeline.expands == (5,) * 10
    assert timeline.axis.endswith("start of each bucket")


def test_isr_timeline_buckets_offsets_in_round_steps() -> None:
    changes = [change(n, None, shrink=True) for n in range(3, 250)]
    timeline = isr_timeline(changes, buckets_max=10)
    assert timeline.labels == tuple(str(n) for n in range(0, 250, 50))
    assert timeline.shrinks == (47, 50, 50, 50, 50) and timeline.expands == (0,) * 5


def test_isr_timeline_across_days_names_the_date() -> None:
    changes = [change(1, 0, shrink=True), change(2, 86_400, expand=True)]
    assert isr_timeline(changes).labels == ("2026-11-26 09:00:00", "2026-11-27 09:00:00")
    assert isr_timeline(changes).axis == "append time (UTC)"
    assert isr_timeline([change(1, 0)]).labels == ()


def test_size_bars_take_each_partitions_largest_replica() -> None:
    sizes = [
        {"topic": "orders", "partition": 1, "size": 10},
        {"topic": "orders", "partition": 0, "size": 300},
        {"topic": "orders", "partition": 0, "size": 200},  # a lagging follower
    ]
    assert size_bars(sizes) == SizeBars(
        "Bytes per partition (largest replica)", ("orders-0", "orders-1"), (300, 10)
    )


def test_size_bars_sum_per_topic_when_partitions_are_many() -> None:
    sizes = [{"topic": "a", "partition": p, "size": 5} for p in range(3)]
    sizes += [{"topic": "b", "partition": 0, "size": 50}, {"topic": "c", "partition": 0, "size": 1}]
    bars = size_bars(sizes, bars_max=2)
    assert (bars.labels, bars.sizes) == (("b", "a"), (50, 15))
    assert bars.title.endswith("largest 2 of 3")


@pytest.mark.parametrize(
    ("size", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (5 << 30, "5.0 GiB")],
)
def test_human_bytes(size: int, text: str) -> None:
    assert human_bytes(size) == text


def test_size_axis_ticks_are_round_in_binary_units() -> None:
    from pykraft.export.report_charts import _byte_ticks

    assert [human_bytes(t) for t in _byte_ticks(2215)] == ["0 B", "1.0 KiB", "2.0 KiB", "3.0 KiB"]
    assert _byte_ticks(168 << 20) == [n * 50 << 20 for n in range(5)]
    assert _byte_ticks(5) == [0, 1, 2, 3, 4, 5]


def test_charts_are_pngs_that_grow_with_their_bars() -> None:
    load = [
        {"broker_id": b, "fenced": b == 4, "leaders": b, "replicas": 2 * b} for b in (1, 2, 3, 4)
    ]
    wide = [{"broker_id": b, "fenced": False, "leaders": 1, "replicas": 1} for b in range(12)]
    assert png_size(broker_load_chart(wide))[1] > png_size(broker_load_chart(load))[1]
    timeline = IsrTimeline("metadata offset", ("1", "2"), (1, 0), (0, 2))
    assert png_size(isr_changes_chart(timeline))[0] > 0
    assert png_size(isr_changes_chart(IsrTimeline("x", (), (), ())))[0] > 0
    tall = SizeBars("t", tuple(f"t-{p}" for p in range(20)), tuple(range(20)))
    short = SizeBars("t", ("t-0",), (5,))
    assert png_size(partition_sizes_chart(tall))[0] > png_size(partition_sizes_chart(short))[0]


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "-"), (True, "yes"), (0.5, "0.50"), ([1, 2], "[1, 2]"), ([], "[]"), ("a", "a")],
)
def test_cell_text(value: Any, text: str) -> None:
    assert cell_text(value) == text


def test_page_escapes_every_value_and_embeds_the_charts() -> None:
    hostile = '<script>alert("x")</script>&'
    png = b"\x89PNG\r\n\x1a\nnot really"
    text = render_page(
        f"report of {hostile}",
        [f"topic {hostile}"],
        [Chart("load", "load.png", png), Chart("sizes", None, None, "not measured")],
        [
            Table("topics", ("topic", "partitions"), ((hostile, 3),)),
            Table("offline", ("topic",), ()),
        ],
    )
    assert "<script>" not in text
    assert text.count(html.escape(hostile)) == 4  # title, heading, summary line, cell
    (data,) = re.findall(r'src="data:image/png;base64,([^"]+)"', text)
    assert base64.b64decode(data) == png
    assert '<p class="note">not measured</p>' in text
    assert '<td class="number">3</td>' in text
    assert '<td colspan="1">none</td>' in text
    headings = re.findall(r"<h[123][^>]*>([^<]+)</h[123]>", text)
    assert headings[1:] == ["Summary", "Charts", "load", "sizes", "Tables", "topics", "offline"]


def collected_rows(sizes: bool) -> dict[str, list[Any]]:
    load = [
        {
            "broker_id": b,
            "fenced": b == 3,
            "leaders": 2 - b % 2,
            "replicas": 3,
            "preferred_leaders": 1,
            "leader_imbalance": None if b == 3 else 0.0,
        }
        for b in (1, 2, 3)
    ]
    partition = {"topic": "t<1>", "leader": 1, "replicas": [1, 2], "leader_epoch": 4}
    rows: dict[str, list[Any]] = {
        "broker_load": load,
        "broker_skew": [
            {"metric": m, "min": 1, "max": 2, "mean": 1.5, "max_over_mean": 1.33}
            for m in ("leaders", "replicas")
        ],
        "topics": [
            {
                "topic": "t<1>",
                "partitions": 2,
                "replication_factor": 2,
                "under_replicated": 1,
                "offline": 1,
                "config_overrides": 0,
            }
        ],
        "under_replicated": [{**partition, "partition": 0, "isr": [1]}],
        "offline": [{**partition, "partition": 1, "leader": -1, "isr": []}],
        "isr_changes": [
            {
                **change(5, 0, shrink=True),
                "topic": "t<1>",
                "partition": 0,
                "isr_before": [1, 2],
                "isr": [1],
            }
        ],
    }
    if sizes:
        rows[SIZES_TABLE] = [
            {"topic": "t<1>", "partition": 0, "broker_id": 1, "log_dir": "/d1", "size": 2048}
        ]
    return rows


def test_report_page_shows_every_table_and_says_when_sizes_are_unknown() -> None:
    collected = collected_rows(sizes=False)
    charts = report_charts(collected)
    assert [c.file_name for c in charts] == ["broker_load.png", "isr_changes.png", None]
    text = page("pykraft report: snapshot s", collected, charts)
    tables = re.findall(r'<h3 id="([a-z_]+)">', text)
    assert tables == [
        "broker_load",
        "broker_skew",
        "topics",
        "under_replicated",
        "offline",
        "isr_changes",
    ]
    assert html.escape(NO_SIZES) in text and "t&lt;1&gt;" in text
    assert "<td>[1, 2]</td><td>[1]</td><td>yes</td><td>no</td>" in text  # the ISR change


def test_report_page_with_sizes_and_the_printed_summary() -> None:
    collected = collected_rows(sizes=True)
    charts = report_charts(collected)
    assert [png_size(c.png)[0] > 0 for c in charts if c.png is not None] == [True] * 3
    text = page("h", collected, charts)
    assert '<h3 id="partition_sizes">' in text and NO_SIZES not in text
    printed = summary("pykraft report: snapshot s", collected, "wrote x")
    assert printed.splitlines()[0] == "pykraft report: snapshot s"
    assert "under-replicated partitions: 1   offline partitions: 1" in printed
    assert "        3  yes           1         3                  1                 -" in printed
    assert printed.endswith("wrote x")
