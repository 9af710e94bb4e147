"""Kafka messages kafka-python 3.0 has no schema for: UnregisterBroker (64, KIP-631's admin call,
``kafka-cluster.sh unregister``), which a KRaft broker forwards to the controller.

The classes are kafka-python ``ApiMessage`` classes like every other control-plane API's
(``protocol.api_codecs``), built from the schema written here as data instead of a JSON file
shipped beside kafka-python: the field layout is Kafka's ``UnregisterBrokerRequest.json`` /
``UnregisterBrokerResponse.json`` (version 0 only, flexible from v0). ``_InlineSchema`` is the
one difference from kafka-python's own classes: it takes ``_json`` from the class body rather
than loading it by the class's name.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.data_container import SlotsBuilder
from kafka.protocol.schemas import StructField

UNREGISTER_BROKER_REQUEST_SCHEMA: dict[str, Any] = {
    "apiKey": 64,
    "type": "request",
    "name": "UnregisterBrokerRequest",
    "validVersions": "0",
    "flexibleVersions": "0+",
    "fields": [{"name": "BrokerId", "type": "int32", "versions": "0+"}],
}

UNREGISTER_BROKER_RESPONSE_SCHEMA: dict[str, Any] = {
    "apiKey": 64,
    "type": "response",
    "name": "UnregisterBrokerResponse",
    "validVersions": "0",
    "flexibleVersions": "0+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {
            "name": "ErrorMessage",
            "type": "string",
            "versions": "0+",
            "nullableVersions": "0+",
            "default": "null",
        },
    ],
}


class _InlineSchema(type(ApiMessage)):  # type: ignore[misc]
    """kafka-python's message metaclass, with the schema given as ``_json`` in the class body
    (its ``JsonSchemaData.__new__`` would look a JSON file up by the class's name)."""

    def __new__(
        metacls, name: str, bases: tuple[type, ...], attrs: dict[str, Any], **kw: Any
    ) -> Any:
        if kw.get("init", True):
            attrs["_struct"] = StructField(attrs["_json"])
        return SlotsBuilder.__new__(metacls, name, bases, attrs, **kw)


class UnregisterBrokerRequest(ApiMessage, metaclass=_InlineSchema):  # type: ignore[misc]
    _json = UNREGISTER_BROKER_REQUEST_SCHEMA


class UnregisterBrokerResponse(ApiMessage, metaclass=_InlineSchema):  # type: ignore[misc]
    _json = UNREGISTER_BROKER_RESPONSE_SCHEMA
