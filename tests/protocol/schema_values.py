"""Random values for any kafka-python message class at any version, driven by its JSON schema.

Used to round-trip every advertised version of every kafka-python-backed API without writing
one fixture per API: each field present in the version gets a random value of its type
(null or default sometimes, when the schema allows it).
"""

from __future__ import annotations

import random
import uuid
from typing import Any

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def random_message(message_cls: Any, version: int, rng: random.Random) -> Any:
    """An instance of ``message_cls`` at ``version`` with every field set."""
    return message_cls(version=version, **_fields(message_cls._struct, version, rng))


def _fields(struct: Any, version: int, rng: random.Random) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for field in struct.fields.values():
        if not field.for_version_q(version):
            continue
        if field.tagged_field_q(version) and rng.random() < 0.3:
            continue  # leave the tagged field at its default: it is not written
        values[field.name] = _value(field, version, rng)
    return values


def _value(field: Any, version: int, rng: random.Random) -> Any:
    if field.nullable_for_version_q(version) and rng.random() < 0.2:
        return None
    if field.is_struct_array():
        return [_struct(field, version, rng) for _ in range(rng.randint(0, 3))]
    if field.is_struct():
        return _struct(field, version, rng)
    if field.is_array():
        return [_simple(field.array_of, rng) for _ in range(rng.randint(0, 3))]
    return _simple(field, rng)


def _struct(field: Any, version: int, rng: random.Random) -> Any:
    return field.data_class(version=version, **_fields(field, version, rng))


def _simple(field: Any, rng: random.Random) -> Any:
    kind = field.type_str
    if kind in INT_RANGES:
        low, high = INT_RANGES[kind]
        return rng.choice([low, high, 0, max(low, -1), rng.randint(low, high)])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "string":
        return rng.choice(["", "topic-ü", "x" * rng.randint(1, 40)])
    if kind in ("bytes", "records"):
        return rng.randbytes(rng.randint(0, 20))
    if kind == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if kind == "float64":
        return rng.uniform(-1e6, 1e6)
    if kind == "bitfield":
        return set(rng.sample(range(31), rng.randint(0, 4)))
    raise AssertionError(f"no generator for field type {kind}")
