"""JSON codec for metadata records (snapshots, the brokers' records endpoint, Spark).

One record is one flat JSON object on one line: ``type`` (the class name), ``version`` (pykraft's
shape version, ``VERSION`` on the class), then every field under Kafka's camelCase JSON name, in
schema order, nulls included — so the shape of a type never varies and ``jq`` and
``spark.read.json`` with an explicit schema read it directly. The one exception is Kafka's tagged
fields (KIP-966's ELR fields of the partition records): written after the others only when they
hold something, read as empty when absent, as Kafka's tagged fields are::

    {"type":"PartitionRecord","version":0,"partitionId":0,"topicId":"x2O...","replicas":[1,2],...}

Both directions are strict (``metadata.record_schema``): an unknown type, an unknown version, a
missing, extra or ill-typed field, or a value outside its Kafka type's range raises
``MetadataCodecError`` with one sentence naming the type and field. Nothing else escapes (no
KeyError, no TypeError). Encoding validates too, so no line is ever written that would not read
back. Lines are encoded from a per-type template (``%`` formatting of the already-validated
values) rather than by ``json.dumps`` of a dict: the same bytes at a third of the cost; the
tests compare the two on every record type.

Raft entries do not use this codec (DESIGN.md §3.2, "switch the in-memory/Raft encoding to
something faster only with numbers"): ``metadata.compact_codec`` encodes them as positional rows
from the same schema. ``encode_batch`` here is the older JSON-text batch: a header line
``{"batch":0,"expectedLastOffset":N,"count":K}`` then K record lines.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from json.encoder import encode_basestring_ascii
from typing import Any

import attrs

from pykraft.metadata.record_schema import (
    SCHEMAS,
    SCHEMAS_BY_NAME,
    FieldError,
    Kind,
    MetadataCodecError,
    RecordSchema,
    StructSchema,
    bytes_to_json,
)
from pykraft.metadata.records import MetadataRecord

__all__ = [
    "MAX_BATCH_RECORDS",
    "MetadataBatch",
    "MetadataCodecError",
    "decode_batch",
    "decode_record",
    "decode_records",
    "encode_batch",
    "encode_checked_values",
    "encode_record",
    "record_from_json",
    "record_to_json",
]

# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: one atomic batch never holds more.
MAX_BATCH_RECORDS = 10_000
BATCH_FORMAT_VERSION = 0

# ensure_ascii: every Python string, even one with a lone surrogate from a JSON request body,
# round-trips and the line is always valid UTF-8.
_ENCODER = json.JSONEncoder(separators=(",", ":"))


@attrs.frozen
class _JsonShape:
    """How one record type is written and read as a JSON object."""

    schema: RecordSchema
    keys: frozenset[str]
    # The keys a line must have (all but the tagged fields').
    required_keys: frozenset[str]
    # '{"type":"PartitionRecord","version":0,"partitionId":%d,"topicId":%s,...}'
    template: str
    # Positions in the values, by how their JSON text is made (integers go in as %d).
    quoted: tuple[int, ...]
    booleans: tuple[int, ...]
    integer_lists: tuple[int, ...]
    byte_strings: tuple[int, ...]
    string_lists: tuple[int, ...]
    structs: tuple[tuple[int, StructSchema], ...]

    @classmethod
    def of(cls, schema: RecordSchema) -> _JsonShape:
        def where(*kinds: Kind) -> tuple[int, ...]:
            required = schema.fields[: schema.required]
            return tuple(i for i, f in enumerate(required) if f.type.kind in kinds)

        header = f'{{"type":"{schema.name}","version":{schema.cls.VERSION}'
        slots = "".join(
            f',"{f.json_name}":{"%d" if f.type.kind is Kind.INTEGER else "%s"}'
            for f in schema.fields[: schema.required]
        )
        keys = frozenset({"type", "version", *(f.json_name for f in schema.fields)})
        return cls(
            schema=schema,
            keys=keys,
            required_keys=keys - {f.json_name for f in schema.tagged},
            template=header + slots + "}",
            quoted=where(Kind.STRING, Kind.UUID),
            booleans=where(Kind.BOOLEAN),
            integer_lists=where(Kind.INTEGER_LIST),
            byte_strings=where(Kind.BYTES),
            string_lists=where(Kind.STRING_LIST),
            structs=tuple(
                (i, f.type.struct) for i, f in enumerate(schema.fields) if f.type.struct is not None
            ),
        )

    def line(self, values: list[Any]) -> str:
        """The JSON text of checked (canonical) ``values``; rewrites the list in place."""
        tags = self._tags(values) if self.schema.tagged else ""
        for i in self.quoted:
            value = values[i]
            values[i] = "null" if value is None else encode_basestring_ascii(value)
        for i in self.booleans:
            values[i] = "true" if values[i] else "false"
        for i in self.integer_lists:
            value = values[i]
            if value is None:
                values[i] = "null"
                continue
            if type(value) is list:  # transcoding rows: lists stand for tuples
                value = tuple(value)
            # Checked values hold exact ints, so equal tuples have the same text.
            text = _LIST_TEXTS.get(value)
            values[i] = text if text is not None else _list_text(value)
        for i in self.byte_strings:
            value = values[i]  # bytes, or already base64 text when transcoding rows
            values[i] = '"' + (value if type(value) is str else bytes_to_json(value)) + '"'
        for i in self.string_lists:
            values[i] = _ENCODER.encode(list(values[i]))
        for i, struct in self.structs:
            values[i] = _ENCODER.encode([_struct_to_json(struct, item) for item in values[i]])
        text = self.template % tuple(values[: self.schema.required])
        return text[:-1] + tags + "}" if tags else text

    def _tags(self, values: list[Any]) -> str:
        """The tagged fields that hold something, as ``,"name":[...]`` text (values may stop
        before the tagged fields: transcoded rows leave defaults out)."""
        parts = []
        for i, field in enumerate(self.schema.tagged, start=self.schema.required):
            value = values[i] if i < len(values) else field.type.default
            if value is not None and tuple(value) != field.type.default:
                parts.append(f',"{field.json_name}":{_list_text(tuple(value))}')
        return "".join(parts)


# Replica lists repeat (a few brokers, a few combinations): remember their JSON text.
_LIST_TEXTS: dict[tuple[int, ...], str] = {}
MAX_LIST_TEXTS = 10_000


def _list_text(value: tuple[int, ...]) -> str:
    text = "[" + ",".join(map(str, value)) + "]"
    if len(value) <= 8:
        if len(_LIST_TEXTS) >= MAX_LIST_TEXTS:
            _LIST_TEXTS.clear()
        _LIST_TEXTS[value] = text
    return text


def _struct_to_json(struct: StructSchema, item: Any) -> dict[str, Any]:
    return {f.json_name: getattr(item, f.attr) for f in struct.fields}


def _struct_from_json(struct: StructSchema, value: Any) -> Any:
    """Objects with exactly the struct's keys -> instances (checked with the record)."""
    if type(value) is not list:
        raise FieldError(f"must be a list, got {value!r}")
    names = {f.json_name for f in struct.fields}
    items = []
    for item in value:
        if type(item) is not dict:
            raise FieldError(f"must hold objects, got {value!r}")
        if item.keys() != names:
            raise FieldError(f"objects need exactly the keys {sorted(names)}, got {sorted(item)}")
        items.append(struct.cls(**{f.attr: item[f.json_name] for f in struct.fields}))
    return tuple(items)


_SHAPES: dict[str, _JsonShape] = {name: _JsonShape.of(s) for name, s in SCHEMAS_BY_NAME.items()}
_SHAPES_BY_CLASS: dict[type[Any], _JsonShape] = {s.schema.cls: s for s in _SHAPES.values()}


def _checked_values(record: MetadataRecord) -> tuple[RecordSchema, list[Any]]:
    schema = SCHEMAS.get(type(record))
    if schema is None:
        raise MetadataCodecError(f"not a metadata record: {record!r:.80}")
    return schema, schema.check_values(list(schema.values_of(record)))


def record_to_json(record: MetadataRecord) -> dict[str, Any]:
    """The flat JSON object for ``record`` (Python types: dict, tuple, int, str, bool, None)."""
    schema, values = _checked_values(record)
    obj: dict[str, Any] = {"type": schema.name, "version": schema.cls.VERSION}
    for field, value in zip(schema.fields, values, strict=True):
        if field.type.tagged and value == field.type.default:
            continue
        struct = field.type.struct
        if field.type.kind is Kind.BYTES:
            value = bytes_to_json(value)
        obj[field.json_name] = (
            value if struct is None else [_struct_to_json(struct, item) for item in value]
        )
    return obj


def encode_record(record: MetadataRecord) -> str:
    """One JSON line (without the newline), ASCII only (non-ASCII as ``\\uXXXX`` escapes).

    Raises MetadataCodecError for a record whose values its Kafka schema does not allow.
    """
    shape = _SHAPES_BY_CLASS.get(type(record))
    if shape is None:
        raise MetadataCodecError(f"not a metadata record: {record!r:.80}")
    schema = shape.schema
    return shape.line(schema.check_values(list(schema.values_of(record))))


def encode_checked_values(schema: RecordSchema, values: list[Any]) -> str:
    """The JSON line of a record given as values that already passed ``check_values`` (lists
    may stand for tuples); ``values`` is consumed. For transcoding without building records."""
    return _SHAPES[schema.name].line(values)


def record_from_json(obj: Any) -> MetadataRecord:
    """Validate and build a record from a parsed JSON object."""
    if type(obj) is not dict:
        raise MetadataCodecError(f"a metadata record must be a JSON object, got {obj!r:.80}")
    type_name = obj.get("type")
    shape = _SHAPES.get(type_name) if type(type_name) is str else None
    if shape is None:
        raise MetadataCodecError(f"unknown metadata record type {type_name!r}")
    schema = shape.schema
    version = obj.get("version")
    if type(version) is not int or version != schema.cls.VERSION:
        raise MetadataCodecError(
            f"{type_name} version {version!r} is not supported (this build reads version "
            f"{schema.cls.VERSION})"
        )
    keys = obj.keys()
    if keys != shape.keys and not shape.required_keys <= keys <= shape.keys:
        missing = sorted(shape.required_keys - keys)
        extra = sorted(keys - shape.keys)
        raise MetadataCodecError(
            f"{type_name} has missing fields {missing} and unknown fields {extra}"
        )
    values = [obj[field.json_name] for field in schema.fields[: schema.required]]
    values.extend(obj.get(field.json_name, field.type.default) for field in schema.tagged)
    for i, struct in shape.structs:
        try:
            values[i] = _struct_from_json(struct, values[i])
        except FieldError as exc:
            raise MetadataCodecError(
                f"{type_name} field {schema.fields[i].json_name!r} {exc}"
            ) from None
    return schema.build(schema.check_values(values))


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
    return MetadataBatch(tuple(decode_record(line) for line in lines), expected_last_offset)


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


def decode_records(lines: Sequence[bytes]) -> list[MetadataRecord]:
    """Decode many lines with one JSON parse (3 us a line instead of 5.5: the parser shares
    the key strings); a malformed line raises the MetadataCodecError ``decode_record`` would."""
    try:
        objects = json.loads(b"[" + b",".join(lines) + b"]")
    except (ValueError, RecursionError):
        objects = None
    if type(objects) is not list or len(objects) != len(lines):
        # Not valid JSON, or a line that is not exactly one value ("{...},{...}"): find it.
        for line in lines:
            decode_record(line)
        raise MetadataCodecError(
            "the metadata record lines are not valid JSON together (mixed text encodings?)"
        )
    return [record_from_json(obj) for obj in objects]
