"""Compact encoding of metadata records for Raft entries: one JSON array of positional rows.

    [[2,0,"pets","x2O..."],[3,0,0,"x2O...",[1,2],[1,2],[],[],1,0,0,0],...]

A row is ``[type id, version, values...]``: the type id is Kafka's ``apiKey`` for the record
(``TYPE_ID``), the version pykraft's shape version (``VERSION``), and the values are the record's
fields in schema order (``metadata.record_schema``; trailing tagged fields that hold their
default left out), nested structs (endpoints, features) as rows
of their own fields, bytes as standard base64 text. A whole batch is parsed with one
``json.loads`` and written with one encoder call, and no field name is repeated per record.

Why not the JSON lines of ``metadata.codec`` (DESIGN.md §3.2 asks for numbers): for a topic of
2,000 partitions (2,001 records) on this 2-core machine (process CPU, best of 20), the
JSON-lines entry took 14.6 ms to encode and 19.5 ms to decode strictly and is 465 kB; this one
takes 5.3 ms to encode and 8.0 ms to decode — validation and record construction included — and
is 115 kB, so pysyncobj pickles, compresses and encrypts it in 0.28 ms instead of 1.0 ms per
follower. Marshal would save ~1 ms more per side but is neither safe against hostile bytes nor
stable across Python versions (the journal outlives an upgrade).

Validation is the JSON codec's, in both directions: a record whose values its Kafka schema does
not allow is never written, and a row that is not exactly a valid record of a known type and
version is refused with ``MetadataCodecError`` naming the record's position, its type and the
field. JSON keeps the entry safe to parse whatever its origin and readable with ``jq`` when
debugging a journal.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pykraft.metadata.codec import encode_checked_values
from pykraft.metadata.record_schema import (
    SCHEMAS,
    SCHEMAS_BY_TYPE_ID,
    Kind,
    MetadataCodecError,
    RecordSchema,
    StructSchema,
    bytes_to_json,
)
from pykraft.metadata.records import MetadataRecord

# ensure_ascii: lone surrogates from JSON request bodies survive and the payload is ASCII.
_ENCODER = json.JSONEncoder(separators=(",", ":"))


def _struct_positions(schema: RecordSchema) -> tuple[tuple[int, StructSchema], ...]:
    return tuple(
        (i, f.type.struct) for i, f in enumerate(schema.fields) if f.type.struct is not None
    )


_STRUCTS = {schema.cls: _struct_positions(schema) for schema in SCHEMAS.values()}
# Bytes fields travel as standard base64 text (record_schema.Kind.BYTES).
_BYTES = {
    schema.cls: tuple(i for i, f in enumerate(schema.fields) if f.type.kind is Kind.BYTES)
    for schema in SCHEMAS.values()
}
# Types whose rows decode on the inline path: version 0, no nested structs.
_FAST_SCHEMAS = {
    type_id: schema
    for type_id, schema in SCHEMAS_BY_TYPE_ID.items()
    if schema.cls.VERSION == 0 and not _STRUCTS[schema.cls]
}
_FAST_CLASSES = {schema.cls: schema for schema in _FAST_SCHEMAS.values()}
_TAG_DEFAULTS = {
    schema.cls: tuple(f.type.default for f in schema.tagged) for schema in SCHEMAS.values()
}


def encode_records(records: Sequence[MetadataRecord]) -> bytes:
    """The rows of ``records`` as one JSON array (ASCII bytes); MetadataCodecError for a value
    its Kafka schema does not allow."""
    rows = []
    for index, record in enumerate(records):
        fast = _FAST_CLASSES.get(type(record))
        if fast is not None:  # the common case inline, as in decode_records
            values = list(fast.values_of(record))
            if fast.checks.passes(values):
                rows.append([fast.cls.TYPE_ID, 0, *fast.without_default_tags(values)])
                continue
        schema = SCHEMAS.get(type(record))
        if schema is None:
            raise MetadataCodecError(f"record {index}: not a metadata record: {record!r:.80}")
        try:
            values = schema.check_values(list(schema.values_of(record)))
        except MetadataCodecError as error:
            raise MetadataCodecError(f"record {index}: {error}") from None
        for i, struct in _STRUCTS[schema.cls]:
            values[i] = [[getattr(item, f.attr) for f in struct.fields] for item in values[i]]
        for i in _BYTES[schema.cls]:
            values[i] = bytes_to_json(values[i])
        rows.append([schema.cls.TYPE_ID, schema.cls.VERSION, *schema.without_default_tags(values)])
    return _ENCODER.encode(rows).encode("ascii")


def decode_records(payload: bytes, count: int) -> tuple[MetadataRecord, ...]:
    """The ``count`` records of ``payload``; MetadataCodecError for anything else."""
    try:
        rows = json.loads(payload)
    except (ValueError, RecursionError) as error:  # JSONDecodeError, UnicodeDecodeError
        raise MetadataCodecError(f"the records are not valid JSON: {error}") from None
    if type(rows) is not list:
        raise MetadataCodecError(f"the records must be a JSON array, got {rows!r:.80}")
    if len(rows) != count:
        raise MetadataCodecError(f"expected {count} records, found {len(rows)}")
    records = []
    for row in rows:
        # The common case inline (a list opening with a known type id and its version, values
        # that pass the fast checks); anything else takes _record's careful path.
        schema = (
            _FAST_SCHEMAS.get(row[0])
            if type(row) is list
            and len(row) > 1
            and type(row[0]) is int
            and row[1] == 0
            and type(row[1]) is int
            else None
        )
        if (
            schema is not None
            and schema.required + 2 <= len(row) <= len(schema.fields) + 2
            and (len(row) == schema.required + 2 or not _ends_with_default_tag(schema, row[2:]))
        ):
            values = row[2:]
            if len(values) < len(schema.fields):  # tagged fields left out: their defaults
                values.extend(_TAG_DEFAULTS[schema.cls][len(values) - schema.required :])
            if schema.checks.passes(values):
                records.append(schema.build(values))
                continue
        try:
            records.append(_record(row))
        except MetadataCodecError as error:
            raise MetadataCodecError(f"record {len(records)}: {error}") from None
    return tuple(records)


def json_lines(payload: bytes) -> tuple[bytes, ...]:
    """The records of a payload that ``decode_records`` accepted, as the JSON lines of
    ``metadata.codec`` — transcoded row by row, without building (or re-validating) records."""
    try:
        rows = json.loads(payload)
    except (ValueError, RecursionError) as error:
        raise MetadataCodecError(f"the records are not valid JSON: {error}") from None
    lines = []
    for row in rows:
        schema = SCHEMAS_BY_TYPE_ID.get(row[0]) if type(row[0]) is int else None
        if schema is None:
            raise MetadataCodecError(f"unknown metadata record type id {row[0]!r:.40}")
        values = row[2:]
        for i, struct in _STRUCTS[schema.cls]:
            values[i] = _structs_from_rows(schema, i, struct, values[i])
        lines.append(encode_checked_values(schema, values).encode("ascii"))
    return tuple(lines)


def _ends_with_default_tag(schema: RecordSchema, values: list[Any]) -> bool:
    """A row's last value is a tagged field at its default: not a row ``encode_records``
    writes (it leaves trailing defaults out), so not one to accept — one encoding per record."""
    count = len(values)
    if not schema.required < count <= len(schema.fields):
        return False
    default = schema.fields[count - 1].type.default
    return bool(values[-1] == (list(default) if type(default) is tuple else default))


def _record(row: Any) -> MetadataRecord:
    if type(row) is not list or len(row) < 2:
        raise MetadataCodecError(f"a record is a [type, version, ...] array, got {row!r:.80}")
    type_id, version = row[0], row[1]
    # type() first: True == 1 and 3.0 == 3 would otherwise find a schema.
    schema = SCHEMAS_BY_TYPE_ID.get(type_id) if type(type_id) is int else None
    if schema is None:
        raise MetadataCodecError(f"unknown metadata record type id {type_id!r:.40}")
    if type(version) is not int or version != schema.cls.VERSION:
        raise MetadataCodecError(
            f"{schema.name} version {version!r:.40} is not supported (this build reads version "
            f"{schema.cls.VERSION})"
        )
    values = row[2:]
    if _ends_with_default_tag(schema, values):
        field = schema.fields[len(values) - 1]
        raise MetadataCodecError(
            f"{schema.name} tagged field {field.json_name!r} holds its default: rows leave it out"
        )
    for i, struct in _STRUCTS[schema.cls]:
        if i < len(values):
            values[i] = _structs_from_rows(schema, i, struct, values[i])
    return schema.build(schema.check_values(values))


def _structs_from_rows(
    schema: RecordSchema, position: int, struct: StructSchema, value: Any
) -> Any:
    """Rows of a struct's fields -> instances (their values are checked with the record)."""
    name = schema.fields[position].json_name
    if type(value) is not list:
        raise MetadataCodecError(f"{schema.name} field {name!r} must be a list, got {value!r:.80}")
    items = []
    for item in value:
        if type(item) is not list or len(item) != len(struct.fields):
            raise MetadataCodecError(
                f"{schema.name} field {name!r} must hold rows of "
                f"{len(struct.fields)} values, got {item!r:.80}"
            )
        items.append(struct.cls(**{f.attr: v for f, v in zip(struct.fields, item, strict=True)}))
    return tuple(items)
