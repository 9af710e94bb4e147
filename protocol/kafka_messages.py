"""kafka-python's generated message classes (Kafka's JSON schemas): the catalogue of every API
they cover, by key, and a strict decoder for them.

Why a module of its own: ``protocol.apis`` decodes the requests the broker serves with these
classes, and ``protocol.unsupported`` answers the ones it does not serve from the same
catalogue; both need the one decoder that notices a truncated body.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

# Importing these packages registers every request/response class kafka-python defines.
import kafka.protocol.admin
import kafka.protocol.consumer
import kafka.protocol.metadata
import kafka.protocol.producer
import kafka.protocol.sasl  # noqa: F401
from kafka.protocol.api_message import ApiMessage

# And the messages kafka-python has no schema for (UnregisterBroker), defined the same way.
import pykraft.protocol.consumer_group_messages
import pykraft.protocol.kraft_messages
import pykraft.protocol.raft_voter_messages
import pykraft.protocol.token_messages  # noqa: F401
from pykraft.protocol.errors import MalformedRequestError
from pykraft.protocol.segments import Buffer


def _message_classes() -> Mapping[int, tuple[Any, Any]]:
    """api key -> (request class, response class) for every API kafka-python has a schema for."""
    found: dict[int, dict[bool, Any]] = {}
    pending = list(ApiMessage.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if getattr(cls, "_class_version", None) is None:  # the primary class, not a v-wrapper
            found.setdefault(cls.API_KEY, {})[cls.is_request()] = cls
    return MappingProxyType(
        {key: (pair[True], pair[False]) for key, pair in found.items() if len(pair) == 2}
    )


MESSAGE_CLASSES = _message_classes()


def decode_message(message_cls: Any, api_version: int, body: Buffer) -> Any:
    """Decode a request or response body with kafka-python's class, strictly: a body that does
    not decode, or runs short, raises ``MalformedRequestError``."""
    view = memoryview(body)
    flexible = message_cls.flexible_version_q(api_version)
    # The compiled decoder reports the end position; kafka-python's decode() hides it and
    # slices past the end without complaint, so a truncated body would decode silently.
    decode_from = message_cls._struct.compiled_decode_from(
        api_version, compact=flexible, tagged=flexible, data_class=message_cls[None]
    )
    try:
        message, end = decode_from(view, 0)
    except Exception as error:  # generated code raises struct.error, IndexError, ...
        raise MalformedRequestError(
            message_cls.__name__, f"v{api_version} does not decode ({error})", 0
        ) from None
    if end > view.nbytes:
        raise MalformedRequestError(
            message_cls.__name__, f"v{api_version} body needs {end} bytes, has {view.nbytes}", 0
        )
    return message
