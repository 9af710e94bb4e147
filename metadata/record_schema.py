"""The field schema of every metadata record, shared by the JSON and the compact codec.

One table (``SCHEMAS``) says, per record type, each field's Kafka camelCase JSON name, its
attribute name and its ``FieldType`` (the Kafka type and range). Both codecs move a record as
its *values* — the attribute values in schema order — and both validate those values here, so
the JSON lines of snapshots and the compact rows of Raft entries accept exactly the same records:

    record --values_of--> values --check_values--> canonical values --build--> record

``check_values`` is strict (every type, range, enum value and uuid spelling, as Kafka's schema
says) and canonicalizes: lists become tuples and ``IntEnum`` members plain ints. It runs a fast
pass first — fields grouped by kind, one tight loop per group, no call per field — and only when
that pass finds something to fix or reject does it walk the fields one by one for the message.
"""

from __future__ import annotations

import base64
import enum
import functools
import math
import operator
from collections.abc import Callable
from typing import Any

import attrs

from pykraft.metadata.records import (
    RECORD_CLASSES,
    BrokerEndpoint,
    BrokerFeature,
    ClientQuotaEntityData,
    MetadataRecord,
    kafka_string_to_uuid,
)


class MetadataCodecError(ValueError):
    """A record or batch could not be encoded or decoded; the message says why."""


class FieldError(Exception):
    """A field's complaint; the codec turns it into a MetadataCodecError naming the field."""


class Kind(enum.Enum):
    INTEGER = "integer"
    STRING = "string"
    UUID = "uuid"  # a string in Kafka's Uuid.toString() form
    BOOLEAN = "boolean"
    INTEGER_LIST = "integer list"
    STRUCT_LIST = "struct list"  # endpoints, features
    # Kafka's bytes: ``bytes`` in a record, canonical standard base64 text in JSON (what Kafka's
    # JSON converters write); check() turns that text into bytes.
    BYTES = "bytes"
    # Kafka's float64 (a client quota's value): a finite ``float``; an integer is read as the
    # float it names (JSON writes 5.0 as 5.0, but a hand-written 5 means the same).
    FLOAT64 = "float64"
    # Kafka's []string (a delegation token's renewers): a tuple of str in a record.
    STRING_LIST = "string list"


@attrs.frozen
class FieldType:
    kind: Kind
    label: str = ""  # the Kafka type, for messages ("int32")
    nullable: bool = False
    low: int = 0
    high: int = 0
    # INTEGER: the only legal values (Kafka enum fields), instead of a range.
    allowed: tuple[int, ...] = ()
    struct: StructSchema | None = None
    # A Kafka tagged field: left out when it holds its default (None when nullable, else an
    # empty list), read as the default when absent. Only integer lists are tagged so far.
    tagged: bool = False

    @property
    def default(self) -> Any:
        assert self.tagged and self.kind is Kind.INTEGER_LIST, self
        return None if self.nullable else ()

    def check(self, value: Any) -> Any:
        """The canonical value, or FieldError saying what is wrong."""
        if value is None and self.nullable:
            return None
        if self.kind is Kind.INTEGER:
            return self._integer(value)
        if self.kind is Kind.INTEGER_LIST:
            return tuple(self._integer(item) for item in _sequence(value))
        if self.kind is Kind.STRUCT_LIST:
            assert self.struct is not None
            return tuple(self.struct.check(item) for item in _sequence(value))
        if self.kind is Kind.STRING_LIST:
            return tuple(_string(item) for item in _sequence(value))
        if self.kind is Kind.BYTES:
            return _bytes(value)
        if self.kind is Kind.FLOAT64:
            return _float64(value)
        if self.kind is Kind.BOOLEAN:
            if type(value) is not bool:
                raise FieldError(f"must be true or false, got {value!r}")
            return value
        if type(value) is not str:
            raise FieldError(f"must be a string, got {value!r}")
        if self.kind is Kind.UUID and uuid_problem(value):
            raise FieldError(
                f"must be a Kafka uuid string (22 chars URL-safe base64): {uuid_problem(value)}"
            )
        return value

    def _integer(self, value: Any) -> int:
        # bool is an int in Python but never a number in a record; an IntEnum member (records
        # built by the controller) is written as its int.
        is_int = isinstance(value, int) and type(value) is not bool
        if self.allowed:
            if not is_int or value not in self.allowed:
                raise FieldError(f"must be one of {list(self.allowed)}, got {value!r}")
        elif not is_int:
            raise FieldError(f"must be an integer ({self.label}), got {value!r}")
        elif not self.low <= value <= self.high:
            raise FieldError(f"must fit in {self.label} [{self.low}, {self.high}], got {value}")
        return int(value)


def _string(value: Any) -> str:
    if type(value) is not str:
        raise FieldError(f"must hold strings, got {value!r}")
    return value


def _bytes(value: Any) -> bytes:
    if type(value) is bytes:
        return value
    if type(value) is not str:
        raise FieldError(f"must be bytes or base64 text, got {type(value).__name__}")
    try:
        raw = base64.b64decode(value, validate=True)
    except ValueError:  # binascii.Error
        raise FieldError("must be standard base64 text") from None
    if base64.b64encode(raw).decode("ascii") != value:
        # One value, one spelling (no stray padding bits), as for uuids.
        raise FieldError("must be canonical standard base64 text")
    return raw


def _float64(value: Any) -> float:
    if type(value) is int:
        value = float(value)
    if type(value) is not float:
        raise FieldError(f"must be a number (float64), got {value!r}")
    if not math.isfinite(value):
        # JSON has no spelling for them, and no quota is infinite or NaN.
        raise FieldError(f"must be a finite number, got {value!r}")
    return value


def bytes_to_json(value: bytes) -> str:
    """Kafka's JSON form of a bytes field: standard base64."""
    return base64.b64encode(value).decode("ascii")


def _sequence(value: Any) -> list[Any] | tuple[Any, ...]:
    if type(value) is not list and type(value) is not tuple:
        raise FieldError(f"must be a list, got {value!r}")
    return value


# A snapshot repeats each topic id once per partition; validate each spelling once.
@functools.lru_cache(maxsize=4096)
def uuid_problem(text: str) -> str:
    try:
        kafka_string_to_uuid(text)
    except ValueError as exc:
        return str(exc)
    return ""


# Uuid strings already found valid: a set lookup is cheaper than even the cached check above.
_VALID_UUIDS: set[str] = set()
MAX_VALID_UUIDS = 100_000


def _remember_uuid(value: str) -> bool:
    if uuid_problem(value):
        return False
    if len(_VALID_UUIDS) >= MAX_VALID_UUIDS:
        _VALID_UUIDS.clear()
    _VALID_UUIDS.add(value)
    return True


def _integer(bits: int, *, signed: bool = True) -> FieldType:
    low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    return FieldType(Kind.INTEGER, f"{'int' if signed else 'uint'}{bits}", low=low, high=high)


def _one_of(*allowed: int) -> FieldType:
    return FieldType(Kind.INTEGER, "enum", allowed=allowed)


def _nullable(field_type: FieldType) -> FieldType:
    return attrs.evolve(field_type, nullable=True)


def _tagged(field_type: FieldType) -> FieldType:
    return attrs.evolve(field_type, tagged=True)


INT8, INT16, INT32, INT64 = _integer(8), _integer(16), _integer(32), _integer(64)
UINT16 = _integer(16, signed=False)
STRING = FieldType(Kind.STRING)
UUID = FieldType(Kind.UUID)
BOOLEAN = FieldType(Kind.BOOLEAN)
INT32_LIST = FieldType(Kind.INTEGER_LIST, "int32", low=INT32.low, high=INT32.high)
BYTES = FieldType(Kind.BYTES, "bytes")
FLOAT64 = FieldType(Kind.FLOAT64, "float64")
STRING_LIST = FieldType(Kind.STRING_LIST, "[]string")


@attrs.frozen
class Field:
    json_name: str  # Kafka's camelCase name
    attr: str  # the attrs attribute: its snake_case
    type: FieldType


def _fields(spec: dict[str, FieldType]) -> tuple[Field, ...]:
    def snake(camel: str) -> str:
        return "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)

    return tuple(Field(key, snake(key), field_type) for key, field_type in spec.items())


@attrs.frozen
class StructSchema:
    """A nested object (an endpoint, a feature)."""

    cls: type[Any]
    fields: tuple[Field, ...]

    def check(self, item: Any) -> Any:
        if type(item) is not self.cls:
            raise FieldError(f"must hold {self.cls.__name__} values, got {item!r}")
        values = [f.type.check(getattr(item, f.attr)) for f in self.fields]
        return self.cls(**{f.attr: value for f, value in zip(self.fields, values, strict=True)})


ENDPOINT = StructSchema(
    BrokerEndpoint,
    _fields({"name": STRING, "host": STRING, "port": UINT16, "securityProtocol": INT16}),
)
FEATURE = StructSchema(
    BrokerFeature,
    _fields({"name": STRING, "minSupportedVersion": INT16, "maxSupportedVersion": INT16}),
)
ENTITY_DATA = StructSchema(
    ClientQuotaEntityData,
    _fields({"entityType": STRING, "entityName": _nullable(STRING)}),
)

# Per record type: JSON name -> type, in schema order (Kafka's metadata schemas' types).
_SPECS: dict[str, dict[str, FieldType]] = {
    "RegisterBrokerRecord": {
        "brokerId": INT32,
        "incarnationId": STRING,
        "brokerEpoch": INT64,
        "endPoints": FieldType(Kind.STRUCT_LIST, struct=ENDPOINT),
        "features": FieldType(Kind.STRUCT_LIST, struct=FEATURE),
        "rack": _nullable(STRING),
        "fenced": BOOLEAN,
        "inControlledShutdown": BOOLEAN,
    },
    "UnregisterBrokerRecord": {"brokerId": INT32, "brokerEpoch": INT64},
    "TopicRecord": {"name": STRING, "topicId": UUID},
    "PartitionRecord": {
        "partitionId": INT32,
        "topicId": UUID,
        "replicas": INT32_LIST,
        "isr": INT32_LIST,
        "removingReplicas": INT32_LIST,
        "addingReplicas": INT32_LIST,
        "leader": INT32,
        "leaderRecoveryState": _one_of(0, 1),
        "leaderEpoch": INT32,
        "partitionEpoch": INT32,
        "eligibleLeaderReplicas": _tagged(INT32_LIST),
        "lastKnownElr": _tagged(INT32_LIST),
    },
    "ConfigRecord": {
        "resourceType": INT8,
        "resourceName": STRING,
        "name": STRING,
        "value": _nullable(STRING),
    },
    "PartitionChangeRecord": {
        "partitionId": INT32,
        "topicId": UUID,
        "isr": _nullable(INT32_LIST),
        "leader": INT32,
        "replicas": _nullable(INT32_LIST),
        "removingReplicas": _nullable(INT32_LIST),
        "addingReplicas": _nullable(INT32_LIST),
        "leaderRecoveryState": _one_of(-1, 0, 1),
        "eligibleLeaderReplicas": _tagged(_nullable(INT32_LIST)),
        "lastKnownElr": _tagged(_nullable(INT32_LIST)),
    },
    "FenceBrokerRecord": {"id": INT32, "epoch": INT64},
    "UnfenceBrokerRecord": {"id": INT32, "epoch": INT64},
    "RemoveTopicRecord": {"topicId": UUID},
    "FeatureLevelRecord": {"name": STRING, "featureLevel": INT16},
    "ProducerIdsRecord": {"brokerId": INT32, "brokerEpoch": INT64, "nextProducerId": INT64},
    "BrokerRegistrationChangeRecord": {
        "brokerId": INT32,
        "brokerEpoch": INT64,
        "fenced": _one_of(-1, 0, 1),
        "inControlledShutdown": _one_of(0, 1),
    },
    "NoOpRecord": {},
    "UserScramCredentialRecord": {
        "name": STRING,
        "mechanism": _one_of(1, 2),
        "salt": BYTES,
        "storedKey": BYTES,
        "serverKey": BYTES,
        "iterations": INT32,
    },
    "AccessControlEntryRecord": {
        "id": UUID,
        "resourceType": INT8,
        "resourceName": STRING,
        "patternType": INT8,
        "principal": STRING,
        "host": STRING,
        "operation": INT8,
        "permissionType": INT8,
    },
    "RemoveAccessControlEntryRecord": {"id": UUID},
    "RemoveUserScramCredentialRecord": {"name": STRING, "mechanism": _one_of(1, 2)},
    "ClientQuotaRecord": {
        "entity": FieldType(Kind.STRUCT_LIST, struct=ENTITY_DATA),
        "key": STRING,
        "value": FLOAT64,
        "remove": BOOLEAN,
    },
    "DelegationTokenRecord": {
        "owner": STRING,
        "requester": STRING,
        "renewers": STRING_LIST,
        "issueTimestamp": INT64,
        "maxTimestamp": INT64,
        "expirationTimestamp": INT64,
        "tokenId": STRING,
    },
    "RemoveDelegationTokenRecord": {"tokenId": STRING},
}


@attrs.frozen
class _FastChecks:
    """A record type's fields grouped by kind, as positions in its values."""

    integers: tuple[tuple[int, int, int], ...]  # (position, low, high)
    enums: tuple[tuple[int, frozenset[int]], ...]
    strings: tuple[tuple[int, bool], ...]  # (position, nullable)
    uuids: tuple[int, ...]
    booleans: tuple[int, ...]
    integer_lists: tuple[tuple[int, bool, int, int], ...]  # (position, nullable, low, high)
    # Struct lists (broker registrations, quota entities), bytes (SCRAM credentials), floats
    # (quota values) and string lists (token renewers) are rare: always the careful path.
    has_structs: bool

    @classmethod
    def of(cls, fields: tuple[Field, ...]) -> _FastChecks:
        def where(kind: Kind) -> list[tuple[int, FieldType]]:
            return [(i, f.type) for i, f in enumerate(fields) if f.type.kind is kind]

        integers = where(Kind.INTEGER)
        # Invariant: integers are never nullable (the fast loops below assume it).
        assert not any(t.nullable for _, t in integers)
        return cls(
            integers=tuple((i, t.low, t.high) for i, t in integers if not t.allowed),
            enums=tuple((i, frozenset(t.allowed)) for i, t in integers if t.allowed),
            strings=tuple((i, t.nullable) for i, t in where(Kind.STRING)),
            uuids=tuple(i for i, _ in where(Kind.UUID)),
            booleans=tuple(i for i, _ in where(Kind.BOOLEAN)),
            integer_lists=tuple(
                (i, t.nullable, t.low, t.high) for i, t in where(Kind.INTEGER_LIST)
            ),
            has_structs=bool(
                where(Kind.STRUCT_LIST)
                or where(Kind.BYTES)
                or where(Kind.FLOAT64)
                or where(Kind.STRING_LIST)
            ),
        )

    def passes(self, values: list[Any]) -> bool:
        """True when every value is valid and canonical; turns lists into tuples on the way."""
        if self.has_structs:
            return False
        for i, low, high in self.integers:
            value = values[i]
            if type(value) is not int or not low <= value <= high:
                return False
        for i, allowed in self.enums:
            value = values[i]
            if type(value) is not int or value not in allowed:
                return False
        for i, nullable in self.strings:
            value = values[i]
            if type(value) is not str and not (nullable and value is None):
                return False
        for i in self.uuids:
            value = values[i]
            # type() first: a list from JSON is not hashable.
            if type(value) is not str or (value not in _VALID_UUIDS and not _remember_uuid(value)):
                return False
        for i in self.booleans:
            if type(values[i]) is not bool:
                return False
        for i, nullable, low, high in self.integer_lists:
            value = values[i]
            if type(value) is list:
                value = values[i] = tuple(value)
            elif type(value) is not tuple:
                if value is None and nullable:
                    continue
                return False
            for item in value:
                if type(item) is not int or not low <= item <= high:
                    return False
        return True


@attrs.frozen
class RecordSchema:
    cls: type[MetadataRecord]
    fields: tuple[Field, ...]
    checks: _FastChecks
    # values -> record; the attrs classes are keyword-only.
    build: Callable[[list[Any]], MetadataRecord]
    # record -> its values, in schema order.
    values_of: Callable[[MetadataRecord], tuple[Any, ...]]
    # Invariant: the tagged fields are the last ones; the first ``required`` fields are not.
    required: int

    @property
    def name(self) -> str:
        return self.cls.__name__

    @property
    def tagged(self) -> tuple[Field, ...]:
        return self.fields[self.required :]

    def without_default_tags(self, values: list[Any]) -> list[Any]:
        """``values`` with the trailing tagged fields that hold their default dropped."""
        end = len(values)
        while end > self.required and values[end - 1] == self.fields[end - 1].type.default:
            end -= 1
        return values if end == len(values) else values[:end]

    def check_values(self, values: list[Any]) -> list[Any]:
        """``values`` made canonical (in place when they already are), or MetadataCodecError
        naming the record type and the first bad field. Absent trailing tagged fields are
        filled in with their defaults."""
        if len(values) < len(self.fields) and len(values) >= self.required:
            values.extend(f.type.default for f in self.fields[len(values) :])
        if len(values) != len(self.fields):
            raise MetadataCodecError(
                f"{self.name} has {len(self.fields)} fields, got {len(values)} values"
            )
        if self.checks.passes(values):
            return values
        checked = []
        for field, value in zip(self.fields, values, strict=True):
            try:
                checked.append(field.type.check(value))
            except FieldError as exc:
                raise MetadataCodecError(f"{self.name} field {field.json_name!r} {exc}") from None
        return checked


def _slot_builder(
    cls: type[MetadataRecord], fields: tuple[Field, ...]
) -> Callable[[list[Any]], MetadataRecord]:
    """values -> record, setting the slots directly: what the attrs ``__init__`` of these
    classes does (they have no defaults to fill here, no validators, converters or post-init),
    at 2/3 of its cost: no keyword arguments and no per-attribute ``object.__setattr__``
    lookup. Measured on 2,000 PartitionRecords: 2.95 -> 2.06 ms."""
    # Invariant: nothing but assignment happens in the class's own __init__.
    assert "__slots__" in cls.__dict__ and not hasattr(cls, "__attrs_post_init__"), cls
    assert all(a.validator is None and a.converter is None for a in attrs.fields(cls)), cls
    setters = tuple(getattr(cls, field.attr).__set__ for field in fields)
    new = object.__new__

    def build(values: list[Any]) -> MetadataRecord:
        record = new(cls)
        # Callers pass checked values, one per field (strict=True would cost 20% here).
        for setter, value in zip(setters, values, strict=False):
            setter(record, value)
        return record

    return build


def _values_getter(names: tuple[str, ...]) -> Callable[[MetadataRecord], tuple[Any, ...]]:
    if not names:
        return lambda record: ()
    if len(names) == 1:
        getter = operator.attrgetter(names[0])
        return lambda record: (getter(record),)
    return operator.attrgetter(*names)


def _build_schemas() -> dict[type[MetadataRecord], RecordSchema]:
    schemas = {}
    for cls in RECORD_CLASSES:
        fields = _fields(_SPECS[cls.__name__])
        names = tuple(field.attr for field in fields)
        # Invariant: the schema names exactly the attrs fields of the class, in order.
        assert list(names) == [a.name for a in attrs.fields(cls)], cls
        required = sum(1 for field in fields if not field.type.tagged)
        assert not any(field.type.tagged for field in fields[:required]), cls
        schemas[cls] = RecordSchema(
            cls=cls,
            fields=fields,
            checks=_FastChecks.of(fields),
            build=_slot_builder(cls, fields),
            values_of=_values_getter(names),
            required=required,
        )
    return schemas


SCHEMAS: dict[type[MetadataRecord], RecordSchema] = _build_schemas()
SCHEMAS_BY_NAME: dict[str, RecordSchema] = {s.name: s for s in SCHEMAS.values()}
SCHEMAS_BY_TYPE_ID: dict[int, RecordSchema] = {s.cls.TYPE_ID: s for s in SCHEMAS.values()}
