"""Error answers to requests the broker does not serve: an API it does not offer, or a version
outside the advertised range.

Why this exists. Kafka closes such a connection without an answer: ``SocketServer.Processor.
parseRequestHeader`` throws ``InvalidRequestException`` ("… which is not enabled") or
``UnsupportedVersionException`` ("… which is not supported") and ``processChannelException``
closes the channel. Issue 9 asks instead for "Kafka's error response where the request header
can be parsed", so a client learns why rather than reconnecting in a loop; we differ from Kafka
here on purpose. The answer is what Kafka's ``AbstractRequest.getErrorResponse`` builds for an
``UnsupportedVersionException``: the response at the request's own version, with
UNSUPPORTED_VERSION (35) in every ``error_code`` — the top-level one and one per topic/partition/
group the request named.

``error_response`` builds it generically from the message schemas kafka-python ships (Kafka's
JSON schemas): each response field takes, by name, the value of the request field of the same
name (``name``, ``partition_index``, ``topic_id``, ``group_id``, …; Produce and Fetch rename
theirs, ``_REQUEST_NAMES``), arrays of structs are mirrored element by element,
``error_code`` is set, everything else keeps its schema default. Kafka writes each
``getErrorResponse`` by hand; the mirror gives the same shape for the APIs checked in
``tests/protocol/test_unsupported.py``.

Where no answer can be built the connection is still closed, as in Kafka (``error_response``
returns None): an API key no schema here knows (its response layout is unknown), a version
the schema does not define, a body that does not decode at the version claimed, and acks=0
Produce (the client reads no answer; Kafka closes the connection on any acks=0 failure).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors, MalformedRequestError
from pykraft.protocol.kafka_3_9_versions import KAFKA_3_9_BROKER_API_VERSIONS
from pykraft.protocol.kafka_messages import MESSAGE_CLASSES, decode_message
from pykraft.protocol.segments import Buffer

_ERROR_CODE_FIELD = "error_code"
# Response fields whose request counterpart has another name (Produce and Fetch):
# response field -> request fields to mirror it from, tried in order.
_REQUEST_NAMES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "responses": ("topic_data", "topics"),
        "partition_responses": ("partition_data",),
        "partition_index": ("partition",),
    }
)


def can_answer(api_key: int, api_version: int) -> bool:
    """Whether a schema defines this API version, so an error response can be encoded: the
    4.x schema's range, extended down to Kafka 3.9's minimum (KIP-896 dropped those versions
    from ``validVersions`` but kept their fields, which kafka-python's classes still code)."""
    classes = MESSAGE_CLASSES.get(api_key)
    if classes is None:
        return False
    low, high = classes[0].valid_versions
    if api_key in KAFKA_3_9_BROKER_API_VERSIONS:
        low = min(low, KAFKA_3_9_BROKER_API_VERSIONS[ApiKey(api_key)][0])
    return bool(low <= api_version <= high)


def error_response(
    api_key: int, api_version: int, body: Buffer, error: Errors = Errors.UNSUPPORTED_VERSION
) -> bytes | None:
    """The body of the error answer to this request, or None where Kafka's rule (close the
    connection) stands; see the module docstring."""
    if not can_answer(api_key, api_version):
        return None
    request_cls, response_cls = MESSAGE_CLASSES[api_key]
    try:
        request = decode_message(request_cls, api_version, body)
    except MalformedRequestError:
        return None
    if api_key == ApiKey.PRODUCE and request.acks == 0:
        return None
    fields = _mirror(response_cls._struct.fields, request, api_version, error)
    response = response_cls(version=api_version, **fields)
    return bytes(response.encode(version=api_version))


def _mirror(fields: Mapping[str, Any], source: Any, version: int, error: Errors) -> dict[str, Any]:
    """Keyword arguments of a response struct built from the request struct ``source``."""
    values: dict[str, Any] = {}
    for name, field in fields.items():
        if not field.for_version_q(version):
            continue
        if name == _ERROR_CODE_FIELD:
            values[name] = int(error)
            continue
        requested = _requested(source, name)
        if field.is_struct_array():
            if isinstance(requested, list):
                values[name] = [
                    field(**_mirror(field.fields, item, version, error)) for item in requested
                ]
        elif not field.is_struct() and not field.is_array() and requested is not None:
            values[name] = requested
    return values


def _requested(source: Any, name: str) -> Any:
    """The request's value for response field ``name``: same name first, then its aliases."""
    for request_name in (name, *_REQUEST_NAMES.get(name, ())):
        value = getattr(source, request_name, None)
        if value is not None:
            return value
    return None
