"""DescribeConfigs' entries from the layers (pure): sources, synonyms in Kafka's order, read-only
and sensitive keys. Mirrors ``ConfigHelper``'s ``createTopicConfigEntry`` /
``createBrokerConfigEntry`` / ``configSynonyms`` and the cases of Kafka's
``DynamicBrokerReconfigurationTest.testConfigDescribeUsingAdminClient`` (a per-broker value over
the cluster default over the static file over the default, listed in that order)."""

from __future__ import annotations

from pykraft.broker.config_describe import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG,
    TOPIC_CONFIG,
    BrokerConfigLayers,
    ConfigEntry,
    broker_entries,
    topic_entries,
)

NOTHING = BrokerConfigLayers(per_broker={}, cluster_default={}, static={})


def synonyms(entry: ConfigEntry) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms or ()]


def one_topic(name: str, overrides: dict[str, str], layers: BrokerConfigLayers) -> ConfigEntry:
    [entry] = topic_entries(overrides, layers, frozenset({name}))
    return entry


def one_broker(name: str, layers: BrokerConfigLayers, per_broker: bool = True) -> ConfigEntry:
    [entry] = broker_entries(layers, frozenset({name}), per_broker=per_broker)
    return entry


def test_a_topic_key_untouched_anywhere_is_kafkas_default() -> None:
    entry = one_topic("retention.bytes", {}, NOTHING)
    assert (entry.value, entry.source, entry.is_default) == ("-1", DEFAULT_CONFIG, True)
    assert synonyms(entry) == [("log.retention.bytes", "-1", DEFAULT_CONFIG)]
    assert (entry.config_type, entry.read_only, entry.sensitive) == (5, False, False)  # LONG


def test_a_topic_key_over_every_broker_layer() -> None:
    layers = BrokerConfigLayers(
        per_broker={"log.retention.ms": "2000"},
        cluster_default={"log.retention.ms": "1000"},
        static={"log.retention.hours": "1"},
    )
    entry = one_topic("retention.ms", {"retention.ms": "60000"}, layers)
    assert (entry.value, entry.source) == ("60000", TOPIC_CONFIG)
    assert synonyms(entry) == [
        ("retention.ms", "60000", TOPIC_CONFIG),
        ("log.retention.ms", "2000", DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", "1000", DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", "1", STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", DEFAULT_CONFIG),
    ]


def test_a_topic_without_override_takes_the_most_specific_broker_layer() -> None:
    layers = BrokerConfigLayers(
        per_broker={}, cluster_default={"log.retention.ms": "1000"}, static={}
    )
    entry = one_topic("retention.ms", {}, layers)
    assert (entry.value, entry.source) == ("1000", DYNAMIC_DEFAULT_BROKER_CONFIG)


def test_static_hours_give_the_topic_value_in_ms_and_are_dropped_from_its_synonyms() -> None:
    # configSynonyms' dropWhile: the list starts at log.retention.ms itself, so a file that sets
    # only log.retention.hours leaves no synonym; the value is still the file's, in ms.
    layers = BrokerConfigLayers(
        per_broker={}, cluster_default={}, static={"log.retention.hours": "2"}
    )
    entry = one_topic("retention.ms", {}, layers)
    assert (entry.value, entry.source, synonyms(entry)) == ("7200000", DEFAULT_CONFIG, [])


def test_broker_entries_sources_and_read_only() -> None:
    layers = BrokerConfigLayers(
        per_broker={"min.insync.replicas": "3"},
        cluster_default={"min.insync.replicas": "2", "message.max.bytes": "2000"},
        static={"num.partitions": "6", "message.max.bytes": "1000"},
    )
    min_isr = one_broker("min.insync.replicas", layers)
    assert (min_isr.value, min_isr.source, min_isr.read_only) == ("3", DYNAMIC_BROKER_CONFIG, False)
    assert synonyms(min_isr) == [
        ("min.insync.replicas", "3", DYNAMIC_BROKER_CONFIG),
        ("min.insync.replicas", "2", DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("min.insync.replicas", "1", DEFAULT_CONFIG),
    ]
    max_bytes = one_broker("message.max.bytes", layers)
    assert (max_bytes.value, max_bytes.source) == ("2000", DYNAMIC_DEFAULT_BROKER_CONFIG)
    partitions = one_broker("num.partitions", layers)
    assert (partitions.value, partitions.source, partitions.read_only) == (
        "6",
        STATIC_BROKER_CONFIG,
        True,
    )
    node = one_broker("node.id", NOTHING)
    assert (node.source, node.read_only, node.is_default) == (DEFAULT_CONFIG, True, True)


def test_the_cluster_default_resource_lists_its_own_keys_without_per_broker_values() -> None:
    layers = BrokerConfigLayers(
        per_broker={"min.insync.replicas": "3"},
        cluster_default={"min.insync.replicas": "2"},
        static={},
    )
    entries = broker_entries(layers, None, per_broker=False)
    assert [(e.name, e.value, e.source) for e in entries] == [
        ("min.insync.replicas", "2", DYNAMIC_DEFAULT_BROKER_CONFIG)
    ]
    assert synonyms(entries[0]) == [
        ("min.insync.replicas", "2", DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("min.insync.replicas", "1", DEFAULT_CONFIG),
    ]


def test_a_password_is_never_described() -> None:
    layers = BrokerConfigLayers(
        per_broker={}, cluster_default={}, static={"ssl.key.password": "s3"}
    )
    entry = one_broker("ssl.key.password", layers)
    assert (entry.value, entry.sensitive, entry.source) == (None, True, STATIC_BROKER_CONFIG)
    assert synonyms(entry) == [("ssl.key.password", None, STATIC_BROKER_CONFIG)]
    assert entry.config_type == 9  # PASSWORD


def test_keys_filter_and_every_known_key_otherwise() -> None:
    every = broker_entries(NOTHING, None, per_broker=True)
    names = [e.name for e in every]
    assert names == sorted(names) and "log.retention.ms" in names and "node.id" in names
    assert topic_entries({}, NOTHING, frozenset({"nope"})) == ()
    assert all(e.documentation for e in topic_entries({}, NOTHING, None))
