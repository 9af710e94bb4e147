"""The report's charts as PNG bytes, from collected rows (no Spark here).

Each chart labels its values on the bars (while the labels fit) and names its axes, so a
reader needs no axis lookup to read a number. Rows are mappings (Spark ``Row`` objects or
dicts) with the report tables' columns. The time series is pure data first (``isr_timeline``),
then drawn.

* ``broker_load_chart``: leaders and replicas per broker (``broker_load``);
* ``isr_changes_chart``: ISR shrinks and expands over time (``isr_changes``), by the metadata
  record's append time, or by metadata offset when the log carries no timestamps;
* ``partition_sizes_chart``: bytes per partition (per topic when there are many partitions).
"""

from __future__ import annotations

import datetime
import io
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

# Partitions the size chart shows one by one at most; beyond, it shows topics (at most as many).
BARS_MAX = 30
# Matplotlib's default palette: blue for leaders / expands, orange for replicas, red for shrinks.
COLOURS = {"leaders": "#1f77b4", "replicas": "#ff7f0e", "shrinks": "#d62728", "expands": "#2ca02c"}
DPI = 100
WIDTH_MAX_INCHES = 16.0  # a laptop screen at DPI; more bars get thinner, not wider
# Bars a chart labels with their values at most (beyond, the labels overlap); over this many
# the axis and the tables carry the numbers.
VALUE_LABELS_MAX = 64
ISR_BUCKETS_MAX = 20

Row = Mapping[str, Any]


@attrs.frozen
class IsrTimeline:
    """ISR shrinks and expands per bucket; ``axis`` says what the buckets are."""

    axis: str
    labels: tuple[str, ...]
    shrinks: tuple[int, ...]
    expands: tuple[int, ...]


@attrs.frozen
class SizeBars:
    title: str
    labels: tuple[str, ...]
    sizes: tuple[int, ...]


def isr_timeline(changes: Sequence[Row], buckets_max: int = ISR_BUCKETS_MAX) -> IsrTimeline:
    """Count the changes that shrank or expanded an ISR, per distinct time (or offset when
    a record has no timestamp); more distinct keys than ``buckets_max`` are grouped into about
    as many buckets of a round width (``_round_width``), aligned to multiples of it."""
    counted = [c for c in changes if c["shrink"] or c["expand"]]
    timed = all(_epoch_ms(c["timestamp"]) > 0 for c in counted)
    keys = [_epoch_ms(c["timestamp"]) if timed else int(c["offset"]) for c in counted]
    if not counted:
        return IsrTimeline("metadata offset", (), (), ())
    low, high = min(keys), max(keys)
    distinct = sorted(set(keys))
    if len(distinct) <= buckets_max:
        starts = distinct
    else:
        width = _round_width(-(-(high - low + 1) // buckets_max), timed)
        starts = list(range(low // width * width, high + 1, width))
    shrinks, expands = [0] * len(starts), [0] * len(starts)
    for key, change in zip(keys, counted, strict=True):
        index = max(i for i, start in enumerate(starts) if start <= key)
        shrinks[index] += bool(change["shrink"])
        expands[index] += bool(change["expand"])
    if timed:
        day = _utc(low).date()
        same_day = _utc(high).date() == day
        labels = tuple(_time_label(s, same_day) for s in starts)
        axis = f"append time (UTC, {day.isoformat()})" if same_day else "append time (UTC)"
    else:
        labels = tuple(str(s) for s in starts)
        axis = "metadata offset (the log has no timestamps)"
    if len(starts) < len(distinct):
        axis += ", start of each bucket"
    return IsrTimeline(axis, labels, tuple(shrinks), tuple(expands))


# Bucket widths a reader takes in at a glance: seconds to days for times (in ms), 1-2-5 steps
# for offsets.
_TIME_WIDTHS_MS = [
    s * 1000
    for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)
]


def _round_width(width: int, timed: bool) -> int:
    """The smallest round width at least ``width``."""
    if timed and width <= _TIME_WIDTHS_MS[-1]:
        return next(w for w in _TIME_WIDTHS_MS if w >= width)
    unit = _TIME_WIDTHS_MS[-1] if timed else 1
    step = 1
    while True:
        for factor in (1, 2, 5):
            if step * factor * unit >= width:
                return step * factor * unit
        step *= 10


def _epoch_ms(value: Any) -> int:
    """Milliseconds since the epoch of a Spark TIMESTAMP (a datetime) or a number; 0 if none."""
    if value is None:
        return 0
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:  # the session's time zone is UTC (export.session)
            value = value.replace(tzinfo=datetime.UTC)
        return int(value.timestamp() * 1000)
    return int(value)


def _utc(epoch_ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(epoch_ms / 1000, datetime.UTC)


def _time_label(epoch_ms: int, same_day: bool) -> str:
    moment = _utc(epoch_ms)
    text = moment.strftime("%H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond // 1000:03d}"
    return text if same_day else f"{moment.date().isoformat()} {text}"


def size_bars(sizes: Sequence[Row], bars_max: int = BARS_MAX) -> SizeBars:
    """Bytes per partition (its largest replica), or per topic when there are more than
    ``bars_max`` partitions."""
    largest: dict[tuple[str, int], int] = {}
    for row in sizes:
        key = (str(row["topic"]), int(row["partition"]))
        largest[key] = max(largest.get(key, 0), int(row["size"]))
    if len(largest) <= bars_max:
        keys = sorted(largest)
        return SizeBars(
            "Bytes per partition (largest replica)",
            tuple(f"{t}-{p}" for t, p in keys),
            tuple(largest[k] for k in keys),
        )
    topics: dict[str, int] = {}
    for (topic, _), size in largest.items():
        topics[topic] = topics.get(topic, 0) + size
    ranked = sorted(topics, key=lambda t: (-topics[t], t))[:bars_max]
    title = "Bytes per topic (sum of each partition's largest replica)"
    if len(topics) > bars_max:
        title += f", largest {bars_max} of {len(topics)}"
    return SizeBars(title, tuple(ranked), tuple(topics[t] for t in ranked))


def human_bytes(size: int) -> str:
    """``1.5 MiB``: binary units, as Kafka's tools size things."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def broker_load_chart(load: Sequence[Row]) -> bytes:
    """Grouped bars: leaders and replicas per broker id, each bar labelled with its count."""
    ids = [f"broker {row['broker_id']}" + ("\n(fenced)" if row["fenced"] else "") for row in load]
    series = {
        "leaders": [int(row["leaders"]) for row in load],
        "replicas": [int(row["replicas"]) for row in load],
    }
    return _grouped_bars(
        "Leaders and replicas per broker", ids, series, "partitions", "broker (node.id)"
    )


def isr_changes_chart(timeline: IsrTimeline) -> bytes:
    if not timeline.labels:
        return _empty_chart("ISR shrinks and expands", "no ISR change in the retained log")
    series = {"shrinks": list(timeline.shrinks), "expands": list(timeline.expands)}
    return _grouped_bars(
        "ISR shrinks and expands (PartitionChangeRecords)",
        list(timeline.labels),
        series,
        "ISR changes",
        timeline.axis,
    )


def partition_sizes_chart(bars: SizeBars) -> bytes:
    """Horizontal bars (long partition names stay readable), labelled in binary units."""
    plt = _pyplot()
    if not bars.labels:
        return _empty_chart(bars.title, "no partition found in the log dirs")
    figure, axes = plt.subplots(figsize=(8.0, 1.2 + 0.35 * len(bars.labels)))
    positions = list(range(len(bars.labels)))
    drawn = axes.barh(positions, list(bars.sizes), 0.6, color=COLOURS["leaders"])
    axes.bar_label(drawn, [human_bytes(s) for s in bars.sizes], padding=3, fontsize=9)
    axes.set_yticks(positions, list(bars.labels), fontsize=9)
    axes.invert_yaxis()  # first name on top, as a table reads
    axes.set_xticks(_byte_ticks(max(bars.sizes)))
    axes.xaxis.set_major_formatter(lambda value, _: human_bytes(int(value)))
    axes.set_xlim(0, max([*bars.sizes, 1]) * 1.25)  # room for the labels
    axes.set_xlabel("bytes on disk (segment files)")
    axes.set_title(bars.title)
    return _png(plt, figure)


def _byte_ticks(largest: int) -> list[int]:
    """About five ticks at round multiples of a binary unit (0, 50 MiB, 100 MiB, …)."""
    unit = 1
    while unit * 1024 <= largest:
        unit *= 1024
    step = _round_width(max(1, -(-largest // (5 * unit))), timed=False) * unit
    return list(range(0, largest + step, step))


def _grouped_bars(
    title: str, labels: list[str], series: dict[str, list[int]], y_label: str, x_label: str
) -> bytes:
    plt = _pyplot()
    width = 0.8 / len(series)
    bars = len(labels) * len(series)
    width_inches = min(WIDTH_MAX_INCHES, max(5.0, 0.5 * bars + 2))
    figure, axes = plt.subplots(figsize=(width_inches, 4.0))
    for number, (name, values) in enumerate(series.items()):
        offset = (number - (len(series) - 1) / 2) * width
        positions = [p + offset for p in range(len(labels))]
        drawn = axes.bar(positions, values, width, label=name, color=COLOURS[name])
        if bars <= VALUE_LABELS_MAX:
            axes.bar_label(drawn, padding=2, fontsize=9 if bars <= 24 else 7)
    # Slanted only when the labels would not fit side by side (about 10 characters an inch).
    longest = max(len(line) for label in labels for line in label.splitlines())
    rotate = longest * len(labels) > 8 * width_inches
    axes.set_xticks(
        list(range(len(labels))),
        labels,
        rotation=30 if rotate else 0,
        ha="right" if rotate else "center",
        fontsize=9,
    )
    axes.set_xlabel(x_label)
    axes.set_ylabel(y_label)
    axes.set_title(title)
    tallest = max([v for values in series.values() for v in values] + [1])
    axes.set_ylim(0, tallest * 1.35)  # room for the value labels and the legend
    axes.yaxis.get_major_locator().set_params(integer=True)
    axes.legend(loc="upper right", ncols=len(series), frameon=False)
    return _png(plt, figure)


def _empty_chart(title: str, message: str) -> bytes:
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(5.0, 1.6))
    axes.set_axis_off()
    axes.set_title(title)
    axes.text(0.5, 0.4, message, ha="center", va="center", fontsize=11)
    return _png(plt, figure)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    return plt


def _png(plt: Any, figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=DPI)
    plt.close(figure)
    return buffer.getvalue()
