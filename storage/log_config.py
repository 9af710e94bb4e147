"""Per-partition log settings with Kafka's defaults and Kafka's names.

Topic-level names (``segment.bytes``) and broker-level defaults (``log.segment.bytes``) map to
the same fields; ``LogConfig.from_properties`` accepts either, topic names winning. Bad values
raise ``LogConfigError`` naming the property.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
LONG_MAX = 2**63 - 1  # Java Long.MAX_VALUE: Kafka's "never" for intervals
INT_MAX = 2**31 - 1
DAY_MS = 24 * 60 * 60 * 1000
# Kafka's LegacyRecord.RECORD_OVERHEAD_V0: the smallest segment.bytes Kafka accepts.
MIN_SEGMENT_BYTES = 14
# An index must hold at least one entry of either kind.
MIN_SEGMENT_INDEX_BYTES = 12


class LogConfigError(ValueError):
    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"invalid value for {name}: {message}")
        self.name = name


_Validator = Callable[[object, "attrs.Attribute[int]", int], None]


def _at_least(minimum: int, name: str) -> _Validator:
    def check(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise LogConfigError(name, f"{value!r} is not an integer")
        if value < minimum:
            raise LogConfigError(name, f"{value} is below the minimum {minimum}")

    return check


def _int_range(minimum: int, maximum: int, name: str) -> _Validator:
    def check(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise LogConfigError(name, f"{value!r} is not an integer")
        if not minimum <= value <= maximum:
            raise LogConfigError(name, f"{value} is outside [{minimum}, {maximum}]")

    return check


@attrs.frozen
class LogConfig:
    # Invariant: every size fits the int32 positions of the offset index.
    segment_bytes: int = attrs.field(
        default=GIB, validator=_int_range(MIN_SEGMENT_BYTES, INT_MAX, "segment.bytes")
    )
    segment_ms: int = attrs.field(default=7 * DAY_MS, validator=_at_least(1, "segment.ms"))
    index_interval_bytes: int = attrs.field(
        default=4096, validator=_int_range(0, INT_MAX, "index.interval.bytes")
    )
    segment_index_bytes: int = attrs.field(
        default=10 * MIB,
        validator=_int_range(MIN_SEGMENT_INDEX_BYTES, INT_MAX, "segment.index.bytes"),
    )
    retention_ms: int = attrs.field(default=7 * DAY_MS, validator=_at_least(-1, "retention.ms"))
    retention_bytes: int = attrs.field(default=-1, validator=_at_least(-1, "retention.bytes"))
    max_message_bytes: int = attrs.field(
        default=1_048_588, validator=_int_range(0, INT_MAX, "max.message.bytes")
    )
    # Kafka's flush.ms / flush.messages default to Long.MAX: rely on the OS and replication.
    flush_ms: int = attrs.field(default=LONG_MAX, validator=_at_least(0, "flush.ms"))
    flush_messages: int = attrs.field(default=LONG_MAX, validator=_at_least(1, "flush.messages"))

    @classmethod
    def from_properties(
        cls, properties: Mapping[str, str], defaults: LogConfig | None = None
    ) -> LogConfig:
        """Build from topic (``segment.bytes``) or broker (``log.segment.bytes``) properties."""
        base = defaults or cls()
        values: dict[str, int] = {}
        for field_name, names in _PROPERTY_NAMES.items():
            for name, scale in names:
                if name in properties:
                    value = _parse_long(name, properties[name])
                    # -1 means "unlimited" whatever the unit (log.retention.hours=-1).
                    values[field_name] = value * scale if value >= 0 else value
                    break
        return attrs.evolve(base, **values)


def _parse_long(name: str, text: str) -> int:
    stripped = text.strip()
    digits = stripped[1:] if stripped[:1] in "+-" else stripped
    if not digits.isascii() or not digits.isdigit():
        raise LogConfigError(name, f"{text!r} is not an integer")
    return int(stripped)


_HOUR_MS = 60 * 60 * 1000
# field -> accepted property names, most specific first, with a unit scale. Kafka resolves
# log.retention.ms before .minutes before .hours and log.roll.ms before log.roll.hours.
_PROPERTY_NAMES: dict[str, tuple[tuple[str, int], ...]] = {
    "segment_bytes": (("segment.bytes", 1), ("log.segment.bytes", 1)),
    "segment_ms": (("segment.ms", 1), ("log.roll.ms", 1), ("log.roll.hours", _HOUR_MS)),
    "index_interval_bytes": (("index.interval.bytes", 1), ("log.index.interval.bytes", 1)),
    "segment_index_bytes": (("segment.index.bytes", 1), ("log.index.size.max.bytes", 1)),
    "retention_ms": (
        ("retention.ms", 1),
        ("log.retention.ms", 1),
        ("log.retention.minutes", 60_000),
        ("log.retention.hours", _HOUR_MS),
    ),
    "retention_bytes": (("retention.bytes", 1), ("log.retention.bytes", 1)),
    "max_message_bytes": (("max.message.bytes", 1), ("message.max.bytes", 1)),
    "flush_ms": (("flush.ms", 1), ("log.flush.interval.ms", 1)),
    "flush_messages": (("flush.messages", 1), ("log.flush.interval.messages", 1)),
}
