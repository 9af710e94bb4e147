"""Pure option cores of ``pykraft console-producer`` / ``console-consumer`` (and the perf tests'
client settings): Kafka's option checks, its ``key=value`` parsing, and Kafka client properties
turned into librdkafka's (confluent-kafka) configuration.

Sources: Kafka's ``tools/.../consumer/ConsoleConsumerOptions.java`` (the checks and their
messages, ``buildConsumerProps``: ``client.id=console-consumer``, a random
``console-consumer-N`` group without auto commit when no group is given, ``auto.offset.reset``
from ``--from-beginning``), ``tools/.../ConsoleProducer.java`` (``producerProps``: the options'
defaults merged only where the properties do not set them, ``client.id=console-producer``) and
``server-common/.../CommandLineUtils.java`` (``parseKeyValueArgs``, ``maybeMergeOptions``).

Client properties: the security ones (``security.protocol``, ``ssl.*``, ``sasl.*``) go through
``client_properties.librdkafka_config`` (one parser for every tool); names librdkafka spells
differently are renamed; Java-only ones (serializer classes, ``max.block.ms``, ``check.crcs``)
are dropped; anything else is passed on as is, so librdkafka refuses a misspelt property with
its own message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from pykraft.client_properties import librdkafka_config


class ConsoleOptionsError(ValueError):
    """A bad option: Kafka's ``printUsageAndThrow`` message."""


def parse_key_value_args(args: Iterable[str]) -> dict[str, str]:
    """``CommandLineUtils.parseKeyValueArgs``: ``key=value`` (split at the first ``=``)."""
    properties = {}
    for arg in args:
        key, equals, value = arg.partition("=")
        if not key:
            continue
        if not equals or not value:
            raise ConsoleOptionsError(f"Missing value for key {key}")
        properties[key] = value
    return properties


def merge_option(properties: dict[str, str], name: str, value: str, given: bool) -> None:
    """``CommandLineUtils.maybeMergeOptions``: an option given on the command line wins; its
    default only fills a property the files and ``key=value`` options left unset."""
    if given or name not in properties:
        properties[name] = value


# ProducerConfig.postProcessAndValidateIdempotenceConfigs (KIP-679): a Java producer is idempotent
# unless enable.idempotence is set or a setting it cannot keep is (acks other than all, retries
# 0, more than 5 requests in flight). librdkafka's default is not idempotent: without this a
# retry after a timed-out but appended produce writes the record twice.
MAX_IN_FLIGHT_IDEMPOTENT = 5


def with_idempotence_default(properties: dict[str, str]) -> dict[str, str]:
    """The properties with ``enable.idempotence=true`` added where Kafka's producer would be
    idempotent by default."""
    if "enable.idempotence" in properties:
        return properties
    acks = properties.get("acks", properties.get("request.required.acks", "all"))
    retries = properties.get("retries", properties.get("message.send.max.retries", "1"))
    in_flight = properties.get(
        "max.in.flight.requests.per.connection", properties.get("max.in.flight", "5")
    )
    try:
        conflicts = int(retries) == 0 or int(in_flight) > MAX_IN_FLIGHT_IDEMPOTENT
    except ValueError:
        return properties  # librdkafka refuses the bad number with its own message
    if acks.strip().lower() not in ("all", "-1") or conflicts:
        return properties
    return {**properties, "enable.idempotence": "true"}


_RENAMED = {
    "fetch.max.wait.ms": "fetch.wait.max.ms",
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
}
_JAVA_ONLY = frozenset(
    {
        "key.serializer", "value.serializer", "key.deserializer", "value.deserializer",
        "max.block.ms", "check.crcs", "interceptor.classes", "metric.reporters",
        "partitioner.class", "security.providers", "client.dns.lookup", "bootstrap.servers",
    }
)  # fmt: skip
_SECURITY_PREFIXES = ("ssl.", "sasl.", "security.protocol")


def client_config(
    bootstrap_servers: str, properties: Mapping[str, str], source: str
) -> dict[str, Any]:
    """librdkafka's configuration for Kafka client ``properties``."""
    config = librdkafka_config(bootstrap_servers, properties, source)
    for name, value in properties.items():
        if name.startswith(_SECURITY_PREFIXES) or name in _JAVA_ONLY or name == "client.id":
            continue
        if name == "buffer.memory":
            config["queue.buffering.max.kbytes"] = max(1, int(value) // 1024)
            continue
        config[_RENAMED.get(name, name)] = value
    return config


# ConsoleConsumerOptions: ListOffsetsRequest's EARLIEST_TIMESTAMP / LATEST_TIMESTAMP.
EARLIEST = -2
LATEST = -1
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")


@attrs.frozen
class ConsumerPlan:
    """What ``console-consumer`` does: subscribe to ``topic`` (or a regex ``include``) in a
    group, or read one ``partition`` from ``start_offset`` (EARLIEST, LATEST or an offset)."""

    config: dict[str, Any]
    topic: str | None
    include: str | None
    partition: int | None
    start_offset: int
    max_messages: int  # -1: no limit
    timeout_ms: int | None  # None: wait for ever


def parse_offset(text: str) -> int:
    lowered = text.lower()
    if lowered == "earliest":
        return EARLIEST
    if lowered == "latest":
        return LATEST
    try:
        offset = int(text)
    except ValueError:
        offset = -1
    if offset < 0:
        raise ConsoleOptionsError(
            f"The provided offset value '{text}' is incorrect. Valid values are "
            "'earliest', 'latest', or a non-negative long."
        )
    return offset


def _check_consumer_args(args: Any) -> None:
    if (args.topic is None) == (args.include is None):
        raise ConsoleOptionsError(
            "Exactly one of the following arguments is required: [topic], [include]"
        )
    if args.partition is not None:
        if args.topic is None:
            raise ConsoleOptionsError("The topic is required when partition is specified.")
        if args.from_beginning and args.offset is not None:
            raise ConsoleOptionsError(
                "Options from-beginning and offset cannot be specified together."
            )
    elif args.offset is not None:
        raise ConsoleOptionsError("The partition is required when offset is specified.")
    if not args.bootstrap_server:
        raise ConsoleOptionsError('Missing required argument "[bootstrap-server]"')
    if args.isolation_level is not None and args.isolation_level not in ISOLATION_LEVELS:
        raise ConsoleOptionsError(
            f"Invalid value {args.isolation_level} for configuration isolation.level: "
            f"String must be one of: {', '.join(ISOLATION_LEVELS)}"
        )


def _group_id(args: Any, from_file: Mapping[str, str], extra: Mapping[str, str]) -> str | None:
    groups = [
        g for g in (args.group, from_file.get("group.id"), extra.get("group.id")) if g is not None
    ]
    if len(set(groups)) > 1:
        detected = ", ".join(f"'{g}'" for g in dict.fromkeys(groups))
        raise ConsoleOptionsError(
            "The group ids provided in different places (directly using '--group', via "
            "'--consumer-property', or via '--consumer.config') do not match. "
            f"Detected group ids: {detected}"
        )
    if groups and args.partition is not None:
        raise ConsoleOptionsError("Options group and partition cannot be specified together.")
    return groups[0] if groups else None


def consumer_plan(
    args: Any, from_file: Mapping[str, str], source: str, random_suffix: int
) -> ConsumerPlan:
    """``ConsoleConsumerOptions`` over parsed ``args`` and the ``--consumer.config`` file's
    properties; ``random_suffix`` (0..99999) names the group when none is given."""
    _check_consumer_args(args)
    extra = parse_key_value_args(args.consumer_property or ())
    group = _group_id(args, from_file, extra)
    properties = {**from_file, **extra}
    if "auto.offset.reset" in properties:
        if args.from_beginning and properties["auto.offset.reset"] != "earliest":
            raise ConsoleOptionsError(
                "Can't simultaneously specify --from-beginning and 'auto.offset.reset="
                f"{properties['auto.offset.reset']}', please remove one option"
            )
    else:
        properties["auto.offset.reset"] = "earliest" if args.from_beginning else "latest"
    properties.setdefault("client.id", "console-consumer")
    given = args.isolation_level is not None
    merge_option(properties, "isolation.level", args.isolation_level or ISOLATION_LEVELS[0], given)
    if group is None:
        properties["group.id"] = f"console-consumer-{random_suffix}"
        properties.setdefault("enable.auto.commit", "false")
    else:
        properties["group.id"] = group
    offset = LATEST
    if args.offset is not None:
        offset = parse_offset(args.offset)
    elif args.from_beginning:
        offset = EARLIEST
    timeout_ms = args.timeout_ms if args.timeout_ms is not None and args.timeout_ms >= 0 else None
    return ConsumerPlan(
        config=client_config(args.bootstrap_server, properties, source),
        topic=args.topic,
        include=args.include,
        partition=args.partition,
        start_offset=offset,
        max_messages=args.max_messages if args.max_messages is not None else -1,
        timeout_ms=timeout_ms,
    )


# ConsoleProducer.ConsoleProducerConfig: option -> (producer property, default).
PRODUCER_OPTIONS = {
    "timeout": ("linger.ms", "1000"),
    "request_required_acks": ("acks", "-1"),
    "request_timeout_ms": ("request.timeout.ms", "1500"),
    "message_send_max_retries": ("retries", "3"),
    "retry_backoff_ms": ("retry.backoff.ms", "100"),
    "socket_buffer_size": ("send.buffer.bytes", "102400"),
    "max_memory_bytes": ("buffer.memory", "33554432"),
    "batch_size": ("batch.size", "16384"),
    "max_partition_memory_bytes": ("batch.size", "16384"),
    "metadata_expiry_ms": ("metadata.max.age.ms", "300000"),
}
COMPRESSION_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def producer_properties(args: Any, from_file: Mapping[str, str]) -> dict[str, str]:
    """``ConsoleProducerConfig.producerProps``: file, then ``--producer-property``, then the
    options (merged as Kafka merges them)."""
    if not args.topic:
        raise ConsoleOptionsError('Missing required argument "[topic]"')
    if not args.bootstrap_server:
        raise ConsoleOptionsError('Missing required argument "[bootstrap-server]"')
    properties = {**from_file, **parse_key_value_args(args.producer_property or ())}
    codec = args.compression_codec
    codec = "none" if codec is None else (codec or "gzip")
    if codec not in COMPRESSION_CODECS:
        raise ConsoleOptionsError(
            f"Invalid value {codec} for configuration compression.type: String must be one of: "
            f"{', '.join(COMPRESSION_CODECS)}"
        )
    properties["compression.type"] = codec
    properties.setdefault("client.id", "console-producer")
    for option, (name, default) in PRODUCER_OPTIONS.items():
        value = getattr(args, option)
        merge_option(properties, name, default if value is None else str(value), value is not None)
    return with_idempotence_default(properties)
