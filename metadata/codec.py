"""JSON codec for metadata records, and the batch encoding of a Raft entry.

One record is one flat JSON object on one line: ``type`` (the class name), ``version`` (pykraft's
shape version, ``VERSION`` on the class), then every field under Kafka's camelCase JSON name, in
schema order, nulls included — so the shape of a type never varies and ``jq`` and
``spark.read.json`` with an explicit schema read it directly::

    {"type":"PartitionRecord","version":0,"partitionId":0,"topicId":"x2O...","replicas":[1,2],...}

Decoding is strict: an unknown type, an unknown version, a missing, extra or ill-typed field, or a
value outside its Kafka type's range raises ``MetadataCodecError`` with one sentence naming the
type and field. Nothing else escapes (no KeyError, no TypeError).

A Raft entry (``encode_batch``) is UTF-8 text: a header line
``{"batch":0,"expectedLastOffset":N,"count":K}`` then K record lines. The header carries the
proposer's precondition (DESIGN.md §3.1); ``count`` lets a truncated entry be told from a short one.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from metadata.records import (
    RECORD_CLASSES,
    BrokerEndpoint,
    BrokerFeature,
    MetadataRecord,
    kafka_string_to_uuid,
)

# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: one atomic batch never holds more.
MAX_BATCH_RECORDS = 10_000
BATCH_FORMAT_VERSION = 0


class MetadataCodecError(ValueError):
    """A record or batch could not be encoded or decoded; the message says why."""


class _FieldError(Exception):
    """Internal: a checker's complaint, turned into a MetadataCodecError naming the field."""


Checker = Callable[[Any], Any]


def _integer(bits: int, *, signed: bool = True) -> Checker:
    low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    kind = f"{'int' if signed else 'uint'}{bits}"

    def check(value: Any) -> int:
        # bool is an int in Python but never a number in a record.
        if type(value) is not int:
            raise _FieldError(f"must be an integer ({kind}), got {value!r}")
        if not low <= value <= high:
            raise _FieldError(f"must fit in {kind} [{low}, {high}], got {value}")
        return value

    return check


def _one_of(*allowed: int) -> Checker:
    def check(value: Any) -> int:
        if type(value) is not int or value not in allowed:
            raise _FieldError(f"must be one of {list(allowed)}, got {value!r}")
        return value

    return check


def _string(value: Any) -> str:
    if type(value) is not str:
        raise _FieldError(f"must be a string, got {value!r}")
    return value


def _boolean(value: Any) -> bool:
    if type(value) is not bool:
        raise _FieldError(f"must be true or false, got {value!r}")
    return value


def _uuid(value: Any) -> str:
    text = _string(value)
    problem = _uuid_problem(text)
    if problem:
        raise _FieldError(f"must be a Kafka uuid string (22 chars URL-safe base64): {problem}")
    return text


# A snapshot repeats each topic id once per partition; validate each spelling once.
@functools.lru_cache(maxsize=4096)
def _uuid_problem(text: str) -> str:
    try:
        kafka_string_to_uuid(text)
    except ValueError as exc:
        return str(exc)
    return ""


def _nullable(checker: Checker) -> Checker:
    def check(value: Any) -> Any:
        return None if value is None else checker(value)

    return check


def _list_of(checker: Checker) -> Checker:
    def check(value: Any) -> tuple[Any, ...]:
        if type(value) is not list:
            raise _FieldError(f"must be a list, got {value!r}")
        return tuple(checker(item) for item in value)

    return check


_INT8, _INT16, _INT32, _INT64 = _integer(8), _integer(16), _integer(32), _integer(64)
_INT32_LIST = _list_of(_INT32)


def _struct(cls: type[Any], fields: dict[str, tuple[str, Checker]]) -> Checker:
    """A nested object (an endpoint, a feature): exact keys, each checked."""

    def check(value: Any) -> Any:
        if type(value) is not dict:
            raise _FieldError(f"must hold objects, got {value!r}")
        if value.keys() != fields.keys():
            raise _FieldError(
                f"objects need exactly the keys {sorted(fields)}, got {sorted(value)}"
            )
        return cls(**{attr: checker(value[key]) for key, (attr, checker) in fields.items()})

    return check


_ENDPOINT_FIELDS = {
    "name": ("name", _string),
    "host": ("host", _string),
    "port": ("port", _integer(16, signed=False)),
    "securityProtocol": ("security_protocol", _INT16),
}
_FEATURE_FIELDS = {
    "name": ("name", _string),
    "minSupportedVersion": ("min_supported_version", _INT16),
    "maxSupportedVersion": ("max_supported_version", _INT16),
}

# Per record type: JSON name -> checker, in schema order. The attribute is the snake_case name.
_SCHEMAS: dict[str, dict[str, Checker]] = {
    "RegisterBrokerRecord": {
        "brokerId": _INT32,
        "incarnationId": _string,
        "brokerEpoch": _INT64,
        "endPoints": _list_of(_struct(BrokerEndpoint, _ENDPOINT_FIELDS)),
        "features": _list_of(_struct(BrokerFeature, _FEATURE_FIELDS)),
        "rack": _nullable(_string),
        "fenced": _boolean,
        "inControlledShutdown": _boolean,
    },
    "UnregisterBrokerRecord": {"brokerId": _INT32, "brokerEpoch": _INT64},
    "TopicRecord": {"name": _string, "topicId": _uuid},
    "PartitionRecord": {
        "partitionId": _INT32,
        "topicId": _uuid,
        "replicas": _INT32_LIST,
        "isr": _INT32_LIST,
        "removingReplicas": _INT32_LIST,
        "addingReplicas": _INT32_LIST,
        "leader": _INT32,
        "leaderRecoveryState": _one_of(0, 1),
        "leaderEpoch": _INT32,
        "partitionEpoch": _INT32,
    },
    "ConfigRecord": {
        "resourceType": _INT8,
        "resourceName": _string,
        "name": _string,
        "value": _nullable(_string),
    },
    "PartitionChangeRecord": {
        "partitionId": _INT32,
        "topicId": _uuid,
        "isr": _nullable(_INT32_LIST),
        "leader": _INT32,
        "replicas": _nullable(_INT32_LIST),
        "removingReplicas": _nullable(_INT32_LIST),
        "addingReplicas": _nullable(_INT32_LIST),
        "leaderRecoveryState": _one_of(-1, 0, 1),
    },
    "FenceBrokerRecord": {"id": _INT32, "epoch": _INT64},
    "UnfenceBrokerRecord": {"id": _INT32, "epoch": _INT64},
    "RemoveTopicRecord": {"topicId": _uuid},
    "FeatureLevelRecord": {"name": _string, "featureLevel": _INT16},
    "ProducerIdsRecord": {"brokerId": _INT32, "brokerEpoch": _INT64, "nextProducerId": _INT64},
    "BrokerRegistrationChangeRecord": {
        "brokerId": _INT32,
        "brokerEpoch": _INT64,
        "fenced": _one_of(-1, 0, 1),
        "inControlledShutdown": _one_of(0, 1),
    },
    "NoOpRecord": {},
}


def _snake(camel: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)


@attrs.frozen
class _RecordCodec:
    cls: type[MetadataRecord]
    # (json name, attribute name, checker) in schema order.
    fields: tuple[tuple[str, str, Checker], ...]
    keys: frozenset[str]


def _build_codecs() -> dict[str, _RecordCodec]:
    codecs: dict[str, _RecordCodec] = {}
    for cls in RECORD_CLASSES:
        schema = _SCHEMAS[cls.__name__]
        fields = tuple((key, _snake(key), checker) for key, checker in schema.items())
        # Invariant: the JSON schema names exactly the attrs fields of the class.
        assert [attr for _, attr, _ in fields] == [a.name for a in attrs.fields(cls)], cls
        codecs[cls.__name__] = _RecordCodec(cls, fields, frozenset({"type", "version", *schema}))
    return codecs


_CODECS = _build_codecs()


_STRUCT_FIELDS: dict[type[Any], dict[str, tuple[str, Checker]]] = {
    BrokerEndpoint: _ENDPOINT_FIELDS,
    BrokerFeature: _FEATURE_FIELDS,
}


def _to_json_value(value: Any) -> Any:
    if type(value) is tuple and value and type(value[0]) in _STRUCT_FIELDS:
        fields = _STRUCT_FIELDS[type(value[0])]
        return [{key: getattr(item, attr) for key, (attr, _) in fields.items()} for item in value]
    return value


def record_to_json(record: MetadataRecord) -> dict[str, Any]:
    """The flat JSON object for ``record`` (Python types: dict, list, int, str, bool, None)."""
    codec = _CODECS[type(record).__name__]
    obj: dict[str, Any] = {"type": type(record).__name__, "version": record.VERSION}
    for key, attr, _ in codec.fields:
        obj[key] = _to_json_value(getattr(record, attr))
    return obj


def encode_record(record: MetadataRecord) -> str:
    """One JSON line (without the newline).

    ASCII-only output (non-ASCII as ``\\uXXXX`` escapes): every Python string, even one with a lone
    surrogate from a JSON request body, round-trips and the line is always valid UTF-8.
    """
    return json.dumps(record_to_json(record), separators=(",", ":"))


def record_from_json(obj: Any) -> MetadataRecord:
    """Validate and build a record from a parsed JSON object."""
    if type(obj) is not dict:
        raise MetadataCodecError(f"a metadata record must be a JSON object, got {obj!r:.80}")
    type_name = obj.get("type")
    codec = _CODECS.get(type_name) if type(type_name) is str else None
    if codec is None:
        raise MetadataCodecError(f"unknown metadata record type {type_name!r}")
    version = obj.get("version")
    if type(version) is not int or version != codec.cls.VERSION:
        raise MetadataCodecError(
            f"{type_name} version {version!r} is not supported (this build reads version "
            f"{codec.cls.VERSION})"
        )
    if obj.keys() != codec.keys:
        missing = sorted(codec.keys - obj.keys())
        extra = sorted(obj.keys() - codec.keys)
        raise MetadataCodecError(
            f"{type_name} has missing fields {missing} and unknown fields {extra}"
        )
    kwargs = {}
    for key, attr, checker in codec.fields:
        try:
            kwargs[attr] = checker(obj[key])
        except _FieldError as exc:
            raise MetadataCodecError(f"{type_name} field {key!r} {exc}") from None
    return codec.cls(**kwargs)


def decode_record(line: str | bytes) -> MetadataRecord:
    """Parse one JSON line into a record; raises MetadataCodecError on anything malformed."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError
        raise MetadataCodecError(f"a metadata record line is not valid JSON: {exc}") from None
    return record_from_json(obj)


@attrs.frozen
class MetadataBatch:
    """The records of one Raft entry, proposed atomically, and the proposer's precondition."""

    records: tuple[MetadataRecord, ...]
    # The last metadata offset the proposer saw; None proposes unconditionally.
    expected_last_offset: int | None = None


def encode_batch(
    records: Sequence[MetadataRecord], expected_last_offset: int | None = None
) -> bytes:
    if len(records) > MAX_BATCH_RECORDS:
        raise MetadataCodecError(
            f"a batch holds at most {MAX_BATCH_RECORDS} records, got {len(records)}"
        )
    header = {
        "batch": BATCH_FORMAT_VERSION,
        "expectedLastOffset": expected_last_offset,
        "count": len(records),
    }
    lines = [json.dumps(header, separators=(",", ":"))]
    lines.extend(encode_record(record) for record in records)
    return "\n".join(lines).encode("utf-8")


def decode_batch(blob: bytes) -> MetadataBatch:
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MetadataCodecError(f"a metadata batch is not UTF-8: {exc}") from None
    header_line, _, body = text.partition("\n")
    count, expected_last_offset = _batch_header(header_line)
    lines = body.split("\n") if body else []
    if len(lines) != count:
        raise MetadataCodecError(
            f"a metadata batch header says {count} records, found {len(lines)}"
        )
    return MetadataBatch(tuple(decode_records(lines)), expected_last_offset)


def _batch_header(line: str) -> tuple[int, int | None]:
    try:
        header = json.loads(line)
    except ValueError:
        raise MetadataCodecError(
            f"a metadata batch header is not valid JSON: {line!r:.80}"
        ) from None
    if type(header) is not dict or header.keys() != {"batch", "expectedLastOffset", "count"}:
        raise MetadataCodecError(f"a metadata batch header is malformed: {line!r:.80}")
    if header["batch"] != BATCH_FORMAT_VERSION:
        raise MetadataCodecError(f"metadata batch format {header['batch']!r} is not supported")
    count, expected = header["count"], header["expectedLastOffset"]
    if type(count) is not int or not 0 <= count <= MAX_BATCH_RECORDS:
        raise MetadataCodecError(
            f"a metadata batch count must be 0..{MAX_BATCH_RECORDS}: {count!r}"
        )
    if expected is not None and type(expected) is not int:
        raise MetadataCodecError(
            f"a metadata batch expectedLastOffset must be an integer: {expected!r}"
        )
    return count, expected


def decode_records(lines: Iterable[str | bytes]) -> list[MetadataRecord]:
    return [decode_record(line) for line in lines]
