"""Per-partition log settings with Kafka's defaults and Kafka's names.

Topic-level names (``segment.bytes``) and broker-level defaults (``log.segment.bytes``) map to
the same fields; ``LogConfig.from_properties`` accepts either, topic names winning. Bad values
raise ``LogConfigError`` naming the property.

``cleanup.policy`` (broker default ``log.cleanup.policy``) is Kafka's comma-separated list of
``delete`` and ``compact``, default ``delete``. Retention by time and size runs only when it
contains ``delete`` (Kafka's ``LogConfig.delete``); ``compact`` makes the log cleaner
(``storage.log_cleaner``) keep the latest record of each key, as Kafka's ``LogCleaner`` does,
under ``min.cleanable.dirty.ratio``, ``min.compaction.lag.ms``, ``max.compaction.lag.ms`` and
``delete.retention.ms`` (broker defaults ``log.cleaner.*``, Kafka's ``CleanerConfig``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from typing import Any

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


def _ratio(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    """Kafka's ``between(0, 1)`` on ``min.cleanable.dirty.ratio``."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 1:
        raise LogConfigError("min.cleanable.dirty.ratio", f"{value!r} is outside [0, 1]")


class CleanupPolicy(enum.Enum):
    """One element of ``cleanup.policy`` (Kafka's TopicConfig.CLEANUP_POLICY_*)."""

    COMPACT = "compact"
    DELETE = "delete"


DEFAULT_CLEANUP_POLICY = frozenset({CleanupPolicy.DELETE})
# Kafka's ValidList.in(compact, delete) names the legal values in this order.
_CLEANUP_POLICY_VALUES = ", ".join(policy.value for policy in CleanupPolicy)
# Kafka's ConfigDef parses a LIST by splitting the trimmed text on commas with any spaces around.
_LIST_SEPARATOR = re.compile(r"\s*,\s*")


def _cleanup_policy_set(
    instance: object, attribute: attrs.Attribute[frozenset[CleanupPolicy]], value: object
) -> None:
    if not isinstance(value, frozenset) or not all(
        isinstance(policy, CleanupPolicy) for policy in value
    ):
        raise LogConfigError(
            "cleanup.policy", f"{value!r} is not a set of CleanupPolicy ({_CLEANUP_POLICY_VALUES})"
        )


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
    # Empty is legal in Kafka (ValidList.in allows an empty list): neither delete nor compact.
    cleanup_policy: frozenset[CleanupPolicy] = attrs.field(
        default=DEFAULT_CLEANUP_POLICY, validator=_cleanup_policy_set
    )
    # The cleaner's topic settings (Kafka's TopicConfig / LogConfig defaults).
    delete_retention_ms: int = attrs.field(
        default=DAY_MS, validator=_at_least(0, "delete.retention.ms")
    )
    min_compaction_lag_ms: int = attrs.field(
        default=0, validator=_at_least(0, "min.compaction.lag.ms")
    )
    max_compaction_lag_ms: int = attrs.field(
        default=LONG_MAX, validator=_at_least(1, "max.compaction.lag.ms")
    )
    min_cleanable_dirty_ratio: float = attrs.field(default=0.5, validator=_ratio)

    @property
    def delete(self) -> bool:
        """Kafka's ``LogConfig.delete``: retention by ``retention.ms``/``retention.bytes``."""
        return CleanupPolicy.DELETE in self.cleanup_policy

    @property
    def compact(self) -> bool:
        """Kafka's ``LogConfig.compact``: the log cleaner compacts this log."""
        return CleanupPolicy.COMPACT in self.cleanup_policy

    @classmethod
    def from_properties(
        cls, properties: Mapping[str, str], defaults: LogConfig | None = None
    ) -> LogConfig:
        """Build from topic (``segment.bytes``) or broker (``log.segment.bytes``) properties."""
        base = defaults or cls()
        # Any: mypy checks a ** dict against every field; the validators check each value.
        values: dict[str, Any] = {}
        for field_name, names in _PROPERTY_NAMES.items():
            for name, scale in names:
                if name in properties:
                    value = _parse_long(name, properties[name])
                    # -1 means "unlimited" whatever the unit (log.retention.hours=-1).
                    values[field_name] = value * scale if value >= 0 else value
                    break
        for name in _DIRTY_RATIO_NAMES:
            if name in properties:
                values["min_cleanable_dirty_ratio"] = _parse_double(name, properties[name])
                break
        for name in _CLEANUP_POLICY_NAMES:
            if name in properties:
                values["cleanup_policy"] = parse_cleanup_policy(name, properties[name])
                break
        return attrs.evolve(base, **values)


def _parse_long(name: str, text: str) -> int:
    stripped = text.strip()
    digits = stripped[1:] if stripped[:1] in "+-" else stripped
    if not digits.isascii() or not digits.isdigit():
        raise LogConfigError(name, f"{text!r} is not an integer")
    return int(stripped)


def _parse_double(name: str, text: str) -> float:
    """Java's ``Double.parseDouble`` for the plain decimal forms Kafka configs use."""
    try:
        value = float(text.strip())
    except ValueError:
        raise LogConfigError(name, f"{text!r} is not a number") from None
    if value != value:  # NaN fails Kafka's between(0, 1) too
        raise LogConfigError(name, f"{text!r} is not a number")
    return value


def parse_cleanup_policy(name: str, text: str) -> frozenset[CleanupPolicy]:
    """Kafka's LIST parse of ``cleanup.policy`` checked by ``ValidList.in(compact, delete)``.

    Values are case-sensitive as in Kafka; a repeated value is accepted (as Kafka did before
    4.2, and as the controller's config validation still does).
    """
    stripped = text.strip()
    if not stripped:
        return frozenset()
    policies: set[CleanupPolicy] = set()
    for item in _LIST_SEPARATOR.split(stripped):
        try:
            policies.add(CleanupPolicy(item))
        except ValueError:
            raise LogConfigError(
                name, f"{item!r} is invalid: String must be one of: {_CLEANUP_POLICY_VALUES}"
            ) from None
    return frozenset(policies)


_HOUR_MS = 60 * 60 * 1000
_DIRTY_RATIO_NAMES = ("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio")
# Topic name first: a topic's own setting beats the broker default.
_CLEANUP_POLICY_NAMES = ("cleanup.policy", "log.cleanup.policy")
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
    "delete_retention_ms": (
        ("delete.retention.ms", 1),
        ("log.cleaner.delete.retention.ms", 1),
    ),
    "min_compaction_lag_ms": (
        ("min.compaction.lag.ms", 1),
        ("log.cleaner.min.compaction.lag.ms", 1),
    ),
    "max_compaction_lag_ms": (
        ("max.compaction.lag.ms", 1),
        ("log.cleaner.max.compaction.lag.ms", 1),
    ),
}
