"""LogConfig's cleanup.policy: Kafka's names, LIST parsing and validation.

Kafka (storage LogConfig.java) defines ``cleanup.policy`` as a LIST, default ``delete``,
validated by ``ValidList.in("compact", "delete")``; ``log.cleanup.policy`` is the broker
default (ServerLogConfigs). ``LogConfig.delete``/``compact`` are "the list contains it".
ConfigDef parses a LIST by splitting the trimmed text on ``\\s*,\\s*``; an empty text is an empty
list. A bad element fails with ``String must be one of: compact, delete``.
"""

from __future__ import annotations

import pytest

from pykraft.storage.log_config import (
    DEFAULT_CLEANUP_POLICY,
    CleanupPolicy,
    LogConfig,
    LogConfigError,
    parse_cleanup_policy,
)

COMPACT = CleanupPolicy.COMPACT
DELETE = CleanupPolicy.DELETE


def test_default_is_delete() -> None:
    config = LogConfig()
    assert config.cleanup_policy == DEFAULT_CLEANUP_POLICY == frozenset({DELETE})
    assert config.delete
    assert not config.compact


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("delete", {DELETE}),
        ("compact", {COMPACT}),
        ("compact,delete", {COMPACT, DELETE}),
        ("delete,compact", {COMPACT, DELETE}),
        ("compact, delete", {COMPACT, DELETE}),  # spaces around commas
        ("  compact  ", {COMPACT}),
        ("compact,compact", {COMPACT}),  # repeats accepted, as the controller accepts them
        ("", set()),  # empty list: neither delete nor compact
        ("   ", set()),
    ],
)
def test_parse(text: str, expected: set[CleanupPolicy]) -> None:
    assert parse_cleanup_policy("cleanup.policy", text) == frozenset(expected)


@pytest.mark.parametrize(
    ("text", "item"),
    [
        ("foo", "foo"),
        ("Delete", "Delete"),  # Kafka's ValidString is case-sensitive
        ("compact,foo", "foo"),
        ("delete,", ""),  # an empty element
        (",compact", ""),
        ("compact;delete", "compact;delete"),
    ],
)
def test_invalid_values_name_the_property_and_the_legal_values(text: str, item: str) -> None:
    with pytest.raises(LogConfigError) as raised:
        parse_cleanup_policy("cleanup.policy", text)
    assert raised.value.name == "cleanup.policy"
    assert str(raised.value) == (
        f"invalid value for cleanup.policy: {item!r} is invalid: "
        "String must be one of: compact, delete"
    )


@pytest.mark.parametrize(
    ("properties", "expected", "delete", "compact"),
    [
        ({}, {DELETE}, True, False),
        ({"cleanup.policy": "compact"}, {COMPACT}, False, True),
        ({"log.cleanup.policy": "compact"}, {COMPACT}, False, True),
        ({"cleanup.policy": "compact,delete"}, {COMPACT, DELETE}, True, True),
        # The topic's own setting beats the broker default.
        ({"cleanup.policy": "delete", "log.cleanup.policy": "compact"}, {DELETE}, True, False),
        ({"cleanup.policy": ""}, set(), False, False),
    ],
)
def test_from_properties(
    properties: dict[str, str], expected: set[CleanupPolicy], delete: bool, compact: bool
) -> None:
    config = LogConfig.from_properties(properties)
    assert config.cleanup_policy == frozenset(expected)
    assert (config.delete, config.compact) == (delete, compact)


def test_topic_config_overrides_broker_defaults() -> None:
    broker = LogConfig.from_properties({"log.cleanup.policy": "compact", "log.retention.ms": "5"})
    assert LogConfig.from_properties({}, defaults=broker).cleanup_policy == {COMPACT}
    topic = LogConfig.from_properties({"cleanup.policy": "delete"}, defaults=broker)
    assert topic.cleanup_policy == {DELETE}
    assert topic.retention_ms == 5


def test_broker_property_errors_name_the_broker_property() -> None:
    with pytest.raises(LogConfigError) as raised:
        LogConfig.from_properties({"log.cleanup.policy": "forever"})
    assert raised.value.name == "log.cleanup.policy"


@pytest.mark.parametrize("value", [{"delete"}, frozenset({"delete"}), "delete", None])
def test_constructor_refuses_anything_but_a_frozenset_of_policies(value: object) -> None:
    with pytest.raises(LogConfigError) as raised:
        LogConfig(cleanup_policy=value)  # type: ignore[arg-type]
    assert raised.value.name == "cleanup.policy"


def test_cleaner_settings_have_kafkas_defaults() -> None:
    """TopicConfig / LogConfig defaults of the log cleaner's topic settings."""
    config = LogConfig()
    assert config.delete_retention_ms == 86_400_000
    assert (config.min_compaction_lag_ms, config.max_compaction_lag_ms) == (0, 2**63 - 1)
    assert config.min_cleanable_dirty_ratio == 0.5


@pytest.mark.parametrize(
    ("properties", "field", "expected"),
    [
        ({"min.cleanable.dirty.ratio": "0.01"}, "min_cleanable_dirty_ratio", 0.01),
        ({"log.cleaner.min.cleanable.ratio": "1"}, "min_cleanable_dirty_ratio", 1.0),
        (
            {"min.cleanable.dirty.ratio": "0.2", "log.cleaner.min.cleanable.ratio": "0.9"},
            "min_cleanable_dirty_ratio",
            0.2,
        ),
        ({"delete.retention.ms": "0"}, "delete_retention_ms", 0),
        ({"log.cleaner.delete.retention.ms": "5"}, "delete_retention_ms", 5),
        ({"min.compaction.lag.ms": "60000"}, "min_compaction_lag_ms", 60_000),
        ({"log.cleaner.max.compaction.lag.ms": "1"}, "max_compaction_lag_ms", 1),
    ],
)
def test_cleaner_settings_from_properties(
    properties: dict[str, str], field: str, expected: float
) -> None:
    assert getattr(LogConfig.from_properties(properties), field) == expected


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("min.cleanable.dirty.ratio", "1.5"),
        ("min.cleanable.dirty.ratio", "-0.1"),
        ("min.cleanable.dirty.ratio", "nan"),
        ("min.cleanable.dirty.ratio", "half"),
        ("delete.retention.ms", "-1"),
        ("max.compaction.lag.ms", "0"),
        ("min.compaction.lag.ms", "-5"),
    ],
)
def test_bad_cleaner_settings_name_the_property(name: str, value: str) -> None:
    """Kafka's validators: between(0, 1), atLeast(0), atLeast(1)."""
    with pytest.raises(LogConfigError, match=name.replace(".", r"\.")):
        LogConfig.from_properties({name: value})
