"""Small adapters for kio, the second independent implementation our codecs are checked against."""

from __future__ import annotations

import datetime
import importlib
import io
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32Timedelta


def kio_module(api: str, version: int, kind: str) -> Any:
    """``kio.schema.<api>.v<version>.<kind>``, e.g. ``kio_module("fetch", 12, "response")``."""
    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")


def kio_encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def kio_decode(entity_type: Any, data: bytes) -> Any:
    entity, size = entity_reader(entity_type)(bytes(data), 0)
    assert size == len(data), f"kio read {size} of {len(data)} bytes"
    return entity


def milliseconds(value: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=value))


def error_code(code: int) -> ErrorCode:
    return ErrorCode(code)
