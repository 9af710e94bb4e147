"""Typed failures of the wire codec: input that cannot be decoded.

Every one is a ``ProtocolError``; the network layer catches exactly that type and closes the one
connection it came from (Kafka's ``SocketServer`` does the same with ``InvalidReceiveException`` /
``InvalidRequestException``), so bad bytes never become a traceback and never affect another
client. The error codes responses carry are ``common.errors.Errors``.
"""

from __future__ import annotations


class ProtocolError(ValueError):
    """Bytes from a client that the codec cannot accept; the connection must be closed."""


class FrameError(ProtocolError):
    """A frame's size prefix is negative or above ``socket.request.max.bytes``."""

    def __init__(self, size: int, max_frame_bytes: int) -> None:
        if size < 0:
            reason = f"frame size {size} is negative"
        else:
            reason = f"frame size {size} exceeds socket.request.max.bytes ({max_frame_bytes})"
        super().__init__(reason)
        self.size = size
        self.max_frame_bytes = max_frame_bytes


class MalformedRequestError(ProtocolError):
    """A header or body field cannot be decoded. ``field`` names it, ``position`` is its offset."""

    def __init__(self, field: str, message: str, position: int) -> None:
        super().__init__(f"{field}: {message} (at byte {position})")
        self.field = field
        self.message = message
        self.position = position


class UnsupportedRequestError(ProtocolError):
    """A codec was asked for an API or version it does not implement."""

    def __init__(self, api_key: int, api_version: int, reason: str) -> None:
        super().__init__(f"api_key {api_key} version {api_version}: {reason}")
        self.api_key = api_key
        self.api_version = api_version
