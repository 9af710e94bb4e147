"""``export.kafka_options``: the refusals and defaults of Spark's ``KafkaSourceProvider``
(``validateGeneralOptions`` / ``validateBatchOptions`` / ``validateStreamOptions``; Spark's
``KafkaSourceProviderSuite`` and ``KafkaRelationSuite`` "bad batch query options")."""

from __future__ import annotations

import pytest

from pykraft.export.isolation import IsolationLevel
from pykraft.export.kafka_options import (
    Assign,
    Bound,
    GlobalTimestamp,
    KafkaOptionError,
    NoMatch,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
    parse_batch_options,
    parse_stream_options,
)
from pykraft.storage.topic_partition import TopicPartition

BOOTSTRAP = {"kafka.bootstrap.servers": "b1:9092,b2:9092"}


def refused(
    match: str, *, stream: bool = False, extra: dict[str, str] | None = None, **options: str
) -> None:
    given = {**BOOTSTRAP, **(extra or {}), **{k.lower(): v for k, v in options.items()}}
    with pytest.raises(KafkaOptionError, match=match):
        (parse_stream_options if stream else parse_batch_options)(given)


def test_batch_defaults_match_sparks_and_the_file_source() -> None:
    parsed = parse_batch_options({**BOOTSTRAP, "subscribe": "a, b"})
    assert parsed.strategy == Subscribe(("a", "b"))
    assert parsed.starting == Bound.EARLIEST and parsed.ending == Bound.LATEST
    assert parsed.isolation_level is IsolationLevel.READ_COMMITTED  # as pykraft-log
    assert parsed.fail_on_data_loss and not parsed.include_headers
    assert parsed.min_partitions is None and parsed.max_records_per_partition is None
    assert parsed.consumer_config == {"bootstrap.servers": "b1:9092,b2:9092"}


def test_stream_defaults_start_at_latest() -> None:
    parsed = parse_stream_options({**BOOTSTRAP, "subscribe": "a", "maxoffsetspertrigger": "7"})
    assert parsed.starting == Bound.LATEST and parsed.max_offsets_per_trigger == 7


def test_exactly_one_strategy() -> None:
    refused("One of the following options must be specified")
    refused("Only one of the following", subscribe="a", assign='{"a":[0]}')
    refused("No topics to subscribe", subscribe=" , ")
    refused("not a regex", subscribePattern="a[")
    refused("assign", assign='{"a": 0}')
    refused("assign", assign='["a"]')
    assert parse_batch_options(
        {**BOOTSTRAP, "assign": '{"b": [1, 0], "a": [2]}'}
    ).strategy == Assign((TopicPartition("a", 2), TopicPartition("b", 0), TopicPartition("b", 1)))
    assert parse_batch_options(
        {**BOOTSTRAP, "subscribepattern": "topic-.*"}
    ).strategy == SubscribePattern("topic-.*")


def test_bootstrap_servers_required() -> None:
    with pytest.raises(KafkaOptionError, match=r"kafka\.bootstrap\.servers"):
        parse_batch_options({"subscribe": "a"})


@pytest.mark.parametrize(
    "name",
    [
        "auto.offset.reset",
        "enable.auto.commit",
        "key.deserializer",
        "value.deserializer",
        "interceptor.classes",
    ],
)
def test_properties_the_source_owns_are_refused(name: str) -> None:
    refused(f"'{name}' is not supported", subscribe="a", extra={f"kafka.{name}": "x"})


def test_security_properties_pass_through() -> None:
    parsed = parse_batch_options(
        {
            **BOOTSTRAP,
            "subscribe": "a",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.username": "alice",
            "kafka.ssl.ca.location": "/etc/ca.pem",
        }
    )
    assert parsed.consumer_config["security.protocol"] == "SASL_SSL"
    assert parsed.consumer_config["sasl.username"] == "alice"
    assert parsed.consumer_config["ssl.ca.location"] == "/etc/ca.pem"


def test_batch_offset_bounds() -> None:
    # KafkaRelationSuite "bad batch query options"
    refused("startingOffsets can't be latest", subscribe="a", startingOffsets="latest")
    refused("endingOffsets can't be earliest", subscribe="a", endingOffsets="earliest")
    refused("can't be latest", subscribe="a", startingOffsets='{"a": {"0": -1}}')
    refused("can't be earliest", subscribe="a", endingOffsets='{"a": {"0": -2}}')
    refused("not JSON", subscribe="a", startingOffsets="{")
    refused("offset >= -2", subscribe="a", startingOffsets='{"a": {"0": -3}}')
    refused("offset >= -2", subscribe="a", startingOffsets='{"a": {"x": 1}}')
    # Spark: "maxOffsetsPerTrigger option ignored in batch queries" (a warning, not a refusal).
    ignored = {"maxoffsetspertrigger": "5", "minoffsetspertrigger": "2", "maxtriggerdelay": "1m"}
    parsed = parse_batch_options({**BOOTSTRAP, "subscribe": "a", **ignored})
    assert parsed.max_offsets_per_trigger is None and parsed.min_offsets_per_trigger is None
    # Ignored means not even parsed: values a stream refuses do not fail a batch (review 9).
    bad = {"maxoffsetspertrigger": "0", "minoffsetspertrigger": "x", "maxtriggerdelay": "abc"}
    parsed = parse_batch_options({**BOOTSTRAP, "subscribe": "a", **bad})
    assert parsed.max_offsets_per_trigger is None and parsed.min_offsets_per_trigger is None
    parsed = parse_batch_options(
        {**BOOTSTRAP, "subscribe": "a", "startingoffsets": '{"a": {"0": 5, "1": -2}}'}
    )
    assert parsed.starting == SpecificOffsets(
        {TopicPartition("a", 0): 5, TopicPartition("a", 1): -2}
    )


def test_stream_refuses_ending_offsets() -> None:
    refused(
        "ending offset not valid in streaming queries",
        stream=True,
        subscribe="a",
        endingOffsets="latest",
    )


def test_numbers_flags_and_isolation() -> None:
    refused("minPartitions must be a positive integer", subscribe="a", minPartitions="0")
    refused(
        "maxRecordsPerPartition must be a positive integer",
        subscribe="a",
        maxRecordsPerPartition="x",
    )
    refused("failOnDataLoss must be true or false", subscribe="a", failOnDataLoss="maybe")
    refused(
        "isolation.level must be one of",
        subscribe="a",
        extra={"kafka.isolation.level": "READ_COMMITTED"},
    )
    refused(
        "disagree",
        subscribe="a",
        extra={"isolation.level": "read_committed", "kafka.isolation.level": "read_uncommitted"},
    )
    parsed = parse_batch_options(
        {
            **BOOTSTRAP,
            "subscribe": "a",
            "kafka.isolation.level": "read_uncommitted",
            "includeheaders": "TRUE",
        }
    )
    assert parsed.isolation_level is IsolationLevel.READ_UNCOMMITTED and parsed.include_headers
    assert "isolation.level" not in parsed.consumer_config  # the source sets it from the level


def test_java_jaas_config_becomes_librdkafkas_username_and_password() -> None:
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="s3cret;x";'
    )
    parsed = parse_batch_options({**BOOTSTRAP, "subscribe": "a", "kafka.sasl.jaas.config": jaas})
    assert parsed.consumer_config["sasl.username"] == "alice"
    assert parsed.consumer_config["sasl.password"] == "s3cret;x"
    assert "sasl.jaas.config" not in parsed.consumer_config
    refused(
        "only PlainLoginModule and ScramLoginModule",
        subscribe="a",
        extra={"kafka.sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"},
    )
    refused(
        "invalid value for kafka.sasl.jaas.config: a JAAS entry ends with ';'",
        subscribe="a",
        extra={"kafka.sasl.jaas.config": jaas[:-1]},
    )
    # Kafka's JAAS grammar (the broker's parser): unquoted values are options too.
    unquoted = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required username=bob password=pw;"
    )
    parsed = parse_batch_options(
        {**BOOTSTRAP, "subscribe": "a", "kafka.sasl.jaas.config": unquoted}
    )
    assert (parsed.consumer_config["sasl.username"], parsed.consumer_config["sasl.password"]) == (
        "bob",
        "pw",
    )
    refused(
        "tokenauth",
        subscribe="a",
        extra={"kafka.sasl.jaas.config": jaas[:-1] + ' tokenauth="true";'},
    )
    refused("PEM files", subscribe="a", extra={"kafka.ssl.truststore.location": "/t.jks"})


A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


def options(**given: str) -> dict[str, str]:
    return {**BOOTSTRAP, "subscribe": "a", **{k.lower(): v for k, v in given.items()}}


def test_timestamps_take_sparks_order_of_preference() -> None:
    """Issue 15: Spark 3.3's getKafkaOffsetRangeLimit: {side}Timestamp, then
    {side}OffsetsByTimestamp, then {side}Offsets."""
    by_partition = '{"a": {"0": 1000, "1": 2000}}'
    parsed = parse_batch_options(
        options(
            startingTimestamp="500",
            startingOffsetsByTimestamp=by_partition,
            startingOffsets="earliest",
            endingOffsetsByTimestamp='{"a": {"0": 3000, "1": 4000}}',
            endingOffsets="latest",
        )
    )
    assert parsed.starting == GlobalTimestamp(500)
    assert parsed.ending == SpecificTimestamps({A0: 3000, A1: 4000})
    parsed = parse_batch_options(
        options(startingOffsetsByTimestamp=by_partition, startingOffsets='{"a": {"0": 1}}')
    )
    assert parsed.starting == SpecificTimestamps({A0: 1000, A1: 2000}, NoMatch.ERROR)
    parsed = parse_stream_options(
        options(startingTimestamp=" 77 ", startingOffsetsByTimestampStrategy="LATEST")
    )
    assert parsed.starting == GlobalTimestamp(77, NoMatch.LATEST)
    assert parse_batch_options(options(endingTimestamp="9")).ending == GlobalTimestamp(9)


def test_bad_timestamp_options_are_refused() -> None:
    refused("Expected a single long value, got 1h", subscribe="a", startingTimestamp="1h")
    refused("a timestamp >= 0, got -1", subscribe="a", startingOffsetsByTimestamp='{"a":{"0":-1}}')
    refused("error or latest", subscribe="a", startingOffsetsByTimestampStrategy="earliest")
    refused(
        "ending timestamp not valid in streaming queries",
        stream=True,
        subscribe="a",
        endingOffsetsByTimestamp='{"a": {"0": 1}}',
    )
    # checkOffsetLimitValidity: the same partitions on both sides, no start after its end.
    refused(
        "name different partitions",
        subscribe="a",
        startingOffsetsByTimestamp='{"a": {"0": 1}}',
        endingOffsetsByTimestamp='{"a": {"1": 5}}',
    )
    refused(
        r"starting timestamp \(9\) for a-0 is greater than the ending timestamp \(5\)",
        subscribe="a",
        startingOffsetsByTimestamp='{"a": {"0": 9}}',
        endingOffsetsByTimestamp='{"a": {"0": 5}}',
    )
    refused(
        r"starting offset \(9\) for a-0 is greater than the ending offset \(5\)",
        subscribe="a",
        startingOffsets='{"a": {"0": 9}}',
        endingOffsets='{"a": {"0": 5}}',
    )
    # -2/-1 are resolved later, never compared.
    parse_batch_options(
        options(startingOffsets='{"a": {"0": -2}}', endingOffsets='{"a": {"0": -1}}')
    )


def test_min_offsets_and_trigger_delay_and_group_ids() -> None:
    parsed = parse_stream_options(options())
    assert parsed.min_offsets_per_trigger is None
    assert parsed.max_trigger_delay_ms == 15 * 60 * 1000  # Spark's default "15m"
    assert parsed.group_id_prefix is None
    parsed = parse_stream_options(
        options(
            minOffsetsPerTrigger="10",
            maxOffsetsPerTrigger="10",
            maxTriggerDelay="30s",
            groupIdPrefix="etl",
            **{"kafka.group.id": "mine"},
        )
    )
    assert parsed.min_offsets_per_trigger == 10 and parsed.max_offsets_per_trigger == 10
    assert parsed.max_trigger_delay_ms == 30_000
    assert parsed.group_id_prefix == "etl"
    assert parsed.consumer_config["group.id"] == "mine"  # accepted, as Spark accepts it
    # Spark's JavaUtils.timeStringAsMs: microseconds too (truncated to milliseconds), and no
    # space between the number and its unit (review 9).
    durations = [("250", 250), ("250ms", 250), ("2m", 120_000), ("1h", 3_600_000)]
    durations += [("500us", 0), ("2500us", 2), (" 3s ", 3000), ("2MIN", 120_000)]
    for text, ms in durations:
        assert parse_stream_options(options(maxTriggerDelay=text)).max_trigger_delay_ms == ms
    for bad in ("soon", "10 s", "5ns", "-1s", "1.5s"):
        refused("duration such as 15m", stream=True, subscribe="a", maxTriggerDelay=bad)
    refused(
        r"minOffsetPerTrigger\(11\) is higher than the maxOffsetsPerTrigger\(10\)",
        stream=True,
        subscribe="a",
        minOffsetsPerTrigger="11",
        maxOffsetsPerTrigger="10",
    )
    refused("positive integer", stream=True, subscribe="a", minOffsetsPerTrigger="0")
