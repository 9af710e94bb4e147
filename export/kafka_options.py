"""The ``pykraft-kafka`` source's options, read the way Spark's own Kafka source reads them (pure).

Spark's ``KafkaSourceProvider`` (``validateGeneralOptions``, ``validateBatchOptions``,
``validateStreamOptions``) is the reference for names, defaults and refusals:

* exactly one of ``subscribe`` (comma-separated topics), ``subscribePattern`` (a Java regex,
  matched whole as ``Pattern.matcher(topic).matches()``), ``assign`` (``{"t": [0, 1]}``);
* ``kafka.bootstrap.servers`` is required; every other ``kafka.*`` option is a consumer property
  passed through (``kafka.security.protocol``, ``kafka.sasl.*``, ``kafka.ssl.*``, ...), except the
  ones the source owns: ``auto.offset.reset``, ``enable.auto.commit``, the deserializers and
  ``interceptor.classes`` are refused as Spark refuses them. The executors' client is librdkafka,
  so a Java ``sasl.jaas.config`` (PLAIN, SCRAM) is turned into ``sasl.username`` /
  ``sasl.password`` and JKS stores are refused with the PEM properties to use instead;
* ``startingOffsets`` / ``endingOffsets``: ``earliest``, ``latest`` or Spark's JSON
  (``{"t": {"0": 23, "1": -2}}``, -2 earliest, -1 latest). A batch may not start at ``latest``
  nor end at ``earliest``; a stream takes no ``endingOffsets`` and starts at ``latest`` by default;
* by timestamp (Spark 3.3's ``getKafkaOffsetRangeLimit``, in its order of preference):
  ``startingTimestamp`` / ``endingTimestamp`` (one timestamp for every partition), then
  ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp`` (``{"t": {"0": ms}}``), then
  the offsets options. A timestamp means the first offset whose timestamp is at or after it
  (ListOffsets by timestamp); where there is none, a start fails or, with
  ``startingOffsetsByTimestampStrategy=latest``, is the latest offset, and an end is the latest
  offset. A stream takes no ``endingOffsetsByTimestamp``;
* ``minPartitions``, ``maxRecordsPerPartition`` (split sizing, ``kafka_plan.split_ranges``),
  ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger`` and ``maxTriggerDelay`` (default 15m)
  (streams; a batch ignores them, as Spark does after a warning), ``failOnDataLoss`` (default
  true), ``includeHeaders`` (default false);
* ``groupIdPrefix`` (the source's own group ids start with it) and ``kafka.group.id`` (used as
  it is; Spark warns that queries sharing it interfere): the source assigns partitions and never
  joins nor commits, so a group id names the consumers only;
* ``isolation.level`` / ``kafka.isolation.level``: ``read_committed`` by default, as the file
  source (Kafka's consumer defaults to ``read_uncommitted``; an export must never hold records a
  transaction took back).

Options arrive lower-cased (Spark's ``CaseInsensitiveStringMap``); consumer property names keep
the case they were given in, as Spark passes them on.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping

import attrs

from pykraft.export.isolation import (
    DEFAULT_ISOLATION_LEVEL,
    ISOLATION_LEVEL_NAMES,
    IsolationLevel,
    parse_isolation_level,
)
from pykraft.metadata.auth.jaas import JaasConfigError, parse_jaas_config
from pykraft.storage.topic_partition import TopicPartition

KAFKA_PREFIX = "kafka."
EARLIEST = -2  # Spark's KafkaOffsetRangeLimit.EARLIEST
LATEST = -1  # Spark's KafkaOffsetRangeLimit.LATEST
# Consumer properties the source sets itself (Spark's KafkaSourceProvider refuses these).
OWNED_CONSUMER_PROPERTIES = (
    "auto.offset.reset",
    "enable.auto.commit",
    "key.deserializer",
    "value.deserializer",
    "interceptor.classes",
)
STRATEGY_OPTIONS = ("subscribe", "subscribepattern", "assign")


class KafkaOptionError(ValueError):
    """An option Spark's Kafka source would refuse (``IllegalArgumentException`` there)."""


class Bound(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"


@attrs.frozen
class SpecificOffsets:
    """Spark's ``SpecificOffsetRangeLimit``: an offset per partition, -2/-1 kept symbolic."""

    offsets: Mapping[TopicPartition, int]


class NoMatch(enum.Enum):
    """``startingOffsetsByTimestampStrategy``: a start whose timestamp matches no offset."""

    ERROR = "error"
    LATEST = "latest"


@attrs.frozen
class SpecificTimestamps:
    """Spark's ``SpecificTimestampRangeLimit``: a timestamp (ms) per partition."""

    timestamps: Mapping[TopicPartition, int]
    no_match: NoMatch = NoMatch.ERROR


@attrs.frozen
class GlobalTimestamp:
    """Spark's ``GlobalTimestampRangeLimit``: one timestamp (ms) for every partition."""

    timestamp: int
    no_match: NoMatch = NoMatch.ERROR


OffsetLimit = Bound | SpecificOffsets | SpecificTimestamps | GlobalTimestamp
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000  # Spark's "15m"


@attrs.frozen
class Subscribe:
    topics: tuple[str, ...]


@attrs.frozen
class SubscribePattern:
    pattern: str


@attrs.frozen
class Assign:
    partitions: tuple[TopicPartition, ...]


Strategy = Subscribe | SubscribePattern | Assign


@attrs.frozen
class KafkaSourceOptions:
    strategy: Strategy
    consumer_config: Mapping[str, str]  # kafka.* without the prefix, bootstrap.servers included
    starting: OffsetLimit
    ending: OffsetLimit  # LATEST for streams (unused there)
    isolation_level: IsolationLevel = DEFAULT_ISOLATION_LEVEL
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    group_id_prefix: str | None = None


def parse_batch_options(options: Mapping[str, str]) -> KafkaSourceOptions:
    """A batch read's options (Spark's ``validateBatchOptions``)."""
    parsed = _parse(options, default_starting=Bound.EARLIEST, stream=False)
    if parsed.starting == Bound.LATEST:
        raise KafkaOptionError("startingOffsets can't be latest for batch queries on Kafka")
    if parsed.ending == Bound.EARLIEST:
        raise KafkaOptionError("endingOffsets can't be earliest for batch queries on Kafka")
    for name, limit, refused in (
        ("startingOffsets", parsed.starting, LATEST),
        ("endingOffsets", parsed.ending, EARLIEST),
    ):
        if isinstance(limit, SpecificOffsets):
            for tp, offset in limit.offsets.items():
                if offset == refused:
                    word = "latest" if refused == LATEST else "earliest"
                    raise KafkaOptionError(
                        f"{name} for {tp} can't be {word} for batch queries on Kafka"
                    )
    _check_limits(parsed.starting, parsed.ending)
    return parsed


def parse_stream_options(options: Mapping[str, str]) -> KafkaSourceOptions:
    """A streaming read's options (Spark's ``validateStreamOptions``)."""
    if "endingoffsets" in options:
        raise KafkaOptionError("ending offset not valid in streaming queries")
    if "endingoffsetsbytimestamp" in options:
        raise KafkaOptionError("ending timestamp not valid in streaming queries")
    return _parse(options, default_starting=Bound.LATEST, stream=True)


def _parse(
    options: Mapping[str, str], default_starting: Bound, *, stream: bool
) -> KafkaSourceOptions:
    consumer_config = librdkafka_config(_consumer_config(options))
    isolation = _isolation_level(options, consumer_config)
    consumer_config.pop("isolation.level", None)
    no_match = _no_match(options)
    parsed = KafkaSourceOptions(
        strategy=_strategy(options),
        consumer_config=consumer_config,
        starting=_limit(options, "starting", default_starting, no_match),
        ending=_limit(options, "ending", Bound.LATEST, no_match),
        isolation_level=isolation,
        min_partitions=_positive(options, "minPartitions"),
        max_records_per_partition=_positive(options, "maxRecordsPerPartition"),
        fail_on_data_loss=_flag(options, "failOnDataLoss", default=True),
        include_headers=_flag(options, "includeHeaders", default=False),
        group_id_prefix=options.get("groupidprefix"),
    )
    if not stream:
        # Spark logs "maxOffsetsPerTrigger option ignored in batch queries" (and the same for
        # minOffsetsPerTrigger, maxTriggerDelay) and goes on: they are not even parsed.
        return parsed
    parsed = attrs.evolve(
        parsed,
        max_offsets_per_trigger=_positive(options, "maxOffsetsPerTrigger"),
        min_offsets_per_trigger=_positive(options, "minOffsetsPerTrigger"),
        max_trigger_delay_ms=_duration_ms(options, "maxTriggerDelay"),
    )
    low, high = parsed.min_offsets_per_trigger, parsed.max_offsets_per_trigger
    if low is not None and high is not None and low > high:
        raise KafkaOptionError(
            f"The value of minOffsetPerTrigger({low}) is higher than the "
            f"maxOffsetsPerTrigger({high})."
        )
    return parsed


def _limit(options: Mapping[str, str], side: str, default: Bound, no_match: NoMatch) -> OffsetLimit:
    """Spark's ``getKafkaOffsetRangeLimit``: ``{side}Timestamp``, else
    ``{side}OffsetsByTimestamp``, else ``{side}Offsets``, else the default."""
    text = options.get(f"{side}timestamp")
    if text is not None:
        try:
            return GlobalTimestamp(int(text.strip()), no_match)
        except ValueError:
            raise KafkaOptionError(f"Expected a single long value, got {text.strip()}") from None
    name = f"{side}OffsetsByTimestamp"
    text = options.get(name.lower())
    if text is not None:
        return SpecificTimestamps(
            _partition_numbers(name, text, minimum=0, what="a timestamp"), no_match
        )
    return _offset_limit(options, f"{side}Offsets", default)


def _no_match(options: Mapping[str, str]) -> NoMatch:
    text = options.get("startingoffsetsbytimestampstrategy", NoMatch.ERROR.value)
    try:
        return NoMatch(text.strip().lower())
    except ValueError:
        raise KafkaOptionError(
            f"startingOffsetsByTimestampStrategy must be error or latest, got {text!r}"
        ) from None


def _check_limits(starting: OffsetLimit, ending: OffsetLimit) -> None:
    """Spark's ``checkOffsetLimitValidity``: specific starts and ends (both offsets, or both
    timestamps) name the same partitions, and no start is after its end."""
    if isinstance(starting, SpecificOffsets) and isinstance(ending, SpecificOffsets):
        starts, ends, word = starting.offsets, ending.offsets, "offset"
    elif isinstance(starting, SpecificTimestamps) and isinstance(ending, SpecificTimestamps):
        starts, ends, word = starting.timestamps, ending.timestamps, "timestamp"
    else:
        return
    if set(starts) != set(ends):
        raise KafkaOptionError(
            f"The starting and ending {word}s name different partitions: "
            f"{sorted(map(str, starts))} and {sorted(map(str, ends))}"
        )
    for tp, start in sorted(starts.items()):
        end = ends[tp]
        if start > end >= 0 and start >= 0:  # -2/-1 are resolved later, never compared
            raise KafkaOptionError(
                f"The starting {word} ({start}) for {tp} is greater than the ending {word} ({end})"
            )


def _consumer_config(options: Mapping[str, str]) -> dict[str, str]:
    config = {
        key[len(KAFKA_PREFIX) :]: value
        for key, value in options.items()
        if key.lower().startswith(KAFKA_PREFIX)
    }
    for name in OWNED_CONSUMER_PROPERTIES:
        if name in {key.lower() for key in config}:
            raise KafkaOptionError(
                f"Kafka option '{name}' is not supported: the source sets it "
                "(use startingOffsets / failOnDataLoss instead of auto.offset.reset)"
            )
    if not config.get("bootstrap.servers", "").strip():
        raise KafkaOptionError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"
        )
    return config


# Java client properties a Spark user brings along, and what librdkafka calls them.
_JAAS_MODULES = (
    "org.apache.kafka.common.security.plain.PlainLoginModule",
    "org.apache.kafka.common.security.scram.ScramLoginModule",
)
_JAVA_ONLY = ("ssl.truststore.", "ssl.keystore.", "ssl.key.password")


def librdkafka_config(config: Mapping[str, str]) -> dict[str, str]:
    """Java-client spellings in ``kafka.*`` made librdkafka's: ``sasl.jaas.config`` with
    ``PlainLoginModule`` or ``ScramLoginModule`` becomes ``sasl.username`` / ``sasl.password``
    (Kafka's ``JaasContext`` options; ``tokenauth`` has no librdkafka equivalent). JKS key and
    trust stores have none either: PEM files through ``ssl.ca.location`` and friends instead."""
    result = dict(config)
    for key in config:
        if key.startswith(_JAVA_ONLY):
            raise KafkaOptionError(
                f"kafka.{key} is a Java keystore setting the executors' client (librdkafka) "
                "does not read: give PEM files as kafka.ssl.ca.location, "
                "kafka.ssl.certificate.location, kafka.ssl.key.location"
            )
    jaas = result.pop("sasl.jaas.config", None)
    if jaas is None:
        return result
    try:
        parsed = parse_jaas_config(jaas, "kafka.sasl.jaas.config")
    except JaasConfigError as error:
        raise KafkaOptionError(str(error)) from None
    module, options = parsed.login_module, parsed.options
    if module not in _JAAS_MODULES or "username" not in options or "password" not in options:
        raise KafkaOptionError(
            "kafka.sasl.jaas.config: only PlainLoginModule and ScramLoginModule with username "
            "and password are understood; or give kafka.sasl.username / kafka.sasl.password"
        )
    if options.get("tokenauth", "false").lower() == "true":
        raise KafkaOptionError("kafka.sasl.jaas.config: tokenauth=true is not supported")
    result.setdefault("sasl.username", options["username"])
    result.setdefault("sasl.password", options["password"])
    return result


def _strategy(options: Mapping[str, str]) -> Strategy:
    given = [name for name in STRATEGY_OPTIONS if name in options]
    if len(given) != 1:
        word = "One" if not given else "Only one"
        raise KafkaOptionError(
            f"{word} of the following options must be specified for Kafka source: "
            "subscribe, subscribePattern, assign"
        )
    [name] = given
    value = options[name].strip()
    if name == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise KafkaOptionError(f"No topics to subscribe to as specified value is {value!r}")
        return Subscribe(topics)
    if name == "subscribepattern":
        if not value:
            raise KafkaOptionError("Pattern to subscribe is empty as specified value is ''")
        try:
            re.compile(value)
        except re.error as error:
            raise KafkaOptionError(f"subscribePattern {value!r} is not a regex: {error}") from None
        return SubscribePattern(value)
    return Assign(tuple(sorted(_assign_json(value))))


def _assign_json(text: str) -> set[TopicPartition]:
    document = _json("assign", text)
    partitions: set[TopicPartition] = set()
    for topic, numbers in document.items():
        if type(numbers) is not list or not all(type(n) is int and n >= 0 for n in numbers):
            raise KafkaOptionError(f'assign: expected {{"topicA":[0,1]}}, got {text!r:.80}')
        partitions.update(TopicPartition(topic, n) for n in numbers)
    if not partitions:
        raise KafkaOptionError(f"assign names no partition: {text!r:.80}")
    return partitions


def _offset_limit(options: Mapping[str, str], name: str, default: Bound) -> OffsetLimit:
    text = options.get(name.lower())
    if text is None:
        return default
    word = text.strip().lower()
    for bound in Bound:
        if word == bound.value:
            return bound
    return SpecificOffsets(_partition_numbers(name, text, minimum=EARLIEST))


def _partition_numbers(
    name: str, text: str, *, minimum: int, what: str = "an offset"
) -> dict[TopicPartition, int]:
    """``{"topic": {"partition": number}}`` (offsets, or timestamps in ms)."""
    document = _json(name, text)
    numbers: dict[TopicPartition, int] = {}
    for topic, partitions in document.items():
        if type(partitions) is not dict:
            raise KafkaOptionError(f"{name}: topic {topic!r} must map partitions to numbers")
        for partition, number in partitions.items():
            if not str(partition).isdigit() or type(number) is not int or number < minimum:
                raise KafkaOptionError(
                    f"{name}: {topic}/{partition} needs a partition number and {what} "
                    f">= {minimum}, got {number!r}"
                )
            numbers[TopicPartition(topic, int(partition))] = number
    return numbers


def _json(name: str, text: str) -> dict[str, object]:
    try:
        document = json.loads(text)
    except ValueError:
        raise KafkaOptionError(f"{name} is not JSON: {text!r:.80}") from None
    if type(document) is not dict:
        raise KafkaOptionError(f"{name} must be a JSON object, got {text!r:.80}")
    return document


def _isolation_level(
    options: Mapping[str, str], consumer_config: Mapping[str, str]
) -> IsolationLevel:
    given = {
        v for v in (options.get("isolation.level"), consumer_config.get("isolation.level")) if v
    }
    if len(given) > 1:
        raise KafkaOptionError(
            f"isolation.level and kafka.isolation.level disagree: {sorted(given)}"
        )
    if not given:
        return DEFAULT_ISOLATION_LEVEL
    [text] = given
    level = parse_isolation_level(text)
    if level is None:
        raise KafkaOptionError(
            f"isolation.level must be one of {', '.join(ISOLATION_LEVEL_NAMES)}, got {text!r}"
        )
    return level


def _positive(options: Mapping[str, str], name: str) -> int | None:
    text = options.get(name.lower())
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise KafkaOptionError(f"{name} must be a positive integer, got {text!r}") from None
    if value <= 0:
        raise KafkaOptionError(f"{name} must be a positive integer, got {text!r}")
    return value


# Spark's JavaUtils.timeStringAsMs: a number and a unit, nothing between them; a bare
# number is milliseconds; microseconds are truncated to whole milliseconds (TimeUnit.convert).
_DURATION = re.compile(r"(-?[0-9]+)([a-z]*)")
_DURATION_UNITS_US = {
    "": 1000, "us": 1, "ms": 1000, "s": 1_000_000, "m": 60_000_000, "min": 60_000_000,
    "h": 3_600_000_000, "d": 86_400_000_000,
}  # fmt: skip


def _duration_ms(options: Mapping[str, str], name: str) -> int:
    text = options.get(name.lower())
    if text is None:
        return DEFAULT_MAX_TRIGGER_DELAY_MS
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None or match.group(2) not in _DURATION_UNITS_US or int(match.group(1)) < 0:
        raise KafkaOptionError(f"{name} must be a duration such as 15m, 30s or 500ms, got {text!r}")
    return int(match.group(1)) * _DURATION_UNITS_US[match.group(2)] // 1000


def _flag(options: Mapping[str, str], name: str, *, default: bool) -> bool:
    text = options.get(name.lower())
    if text is None:
        return default
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise KafkaOptionError(f"{name} must be true or false, got {text!r}")
    return value == "true"
