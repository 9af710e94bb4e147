"""A blocking SCRAM-SHA-256/512 client for tests that can log in with a delegation token.

No Python Kafka client sends SCRAM extensions, and scramp's client cannot either, so the
RFC 5802 / RFC 7677 exchange is written out here with hashlib and hmac: SaslHandshake v1, then
two SaslAuthenticate v2 rounds. ``token=True`` adds the ``tokenauth=true`` extension after the
nonce in the client-first message (Kafka's ``ScramExtensions``, ``ScramSaslClient``; KIP-48): the
user name is then the token id and the password the base64 of the token's HMAC. The server's
final signature is checked, as ``ScramSaslClient`` checks it. After the login the connection
sends any request through pykraft's framing and kafka-python's message classes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import socket
import struct
from typing import Any

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_response, request_class
from pykraft.protocol.errors import Errors
from pykraft.protocol.headers import parse_response_header, response_header_version
from tests.broker.wire_client import request_frame

DIGESTS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class SaslLoginFailed(Exception):
    def __init__(self, error_code: int, message: str | None) -> None:
        super().__init__(f"error {error_code}: {message}")
        self.error_code = error_code
        self.message = message
        # Whether the broker closed the connection after answering (Kafka always does).
        self.closed_by_peer = False


class KafkaConnection:
    """One TCP connection; requests go one at a time, each waits for its response."""

    def __init__(self, port: int, timeout_s: float = 10.0) -> None:
        self._socket = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self._correlation_id = 0

    def exchange(self, api_key: ApiKey, version: int, body: bytes) -> bytes:
        """Send one request body; the response body, its header checked and stripped."""
        self._correlation_id += 1
        self._socket.sendall(request_frame(api_key, version, self._correlation_id, body))
        frame = self._read_exactly(struct.unpack(">i", self._read_exactly(4))[0])
        correlation_id, start = parse_response_header(
            frame, response_header_version(api_key, version)
        )
        assert correlation_id == self._correlation_id, (correlation_id, self._correlation_id)
        return frame[start:]

    def call(self, api_key: ApiKey, version: int, **fields: Any) -> Any:
        """A request of pykraft's codec table (kafka-python's classes), decoded answer."""
        request = request_class(api_key)(version=version, **fields)
        body = self.exchange(api_key, version, bytes(request.encode(version=version)))
        return decode_response(api_key, version, body)

    def closed_by_peer(self) -> bool:
        """The broker closed the connection: the next read finds the end of the stream."""
        try:
            return self._socket.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self._socket.close()

    def __enter__(self) -> KafkaConnection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _read_exactly(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self._socket.recv(size - len(data))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(data)} of {size} bytes")
            data += chunk
        return bytes(data)


def saslname(username: str) -> str:
    """RFC 5802's saslname (Kafka's ``ScramFormatter.saslName``): "=" -> "=3D", "," -> "=2C"."""
    return username.replace("=", "=3D").replace(",", "=2C")


def _hmac(key: bytes, message: bytes, digest: str) -> bytes:
    return hmac.new(key, message, digest).digest()


def scram_login(
    port: int, mechanism: str, username: str, password: str, *, token: bool = False
) -> KafkaConnection:
    """An authenticated connection; ``SaslLoginFailed`` carries the broker's error and whether
    the broker then closed the connection."""
    digest = DIGESTS[mechanism]
    connection = KafkaConnection(port)
    try:
        handshake = connection.call(ApiKey.SASL_HANDSHAKE, 1, mechanism=mechanism)
        if handshake.error_code != Errors.NONE:
            raise SaslLoginFailed(handshake.error_code, f"mechanisms {handshake.mechanisms}")
        extensions = ",tokenauth=true" if token else ""
        client_first_bare = f"n={saslname(username)},r={secrets.token_urlsafe(18)}{extensions}"
        server_first = _authenticate(connection, f"n,,{client_first_bare}".encode()).decode()
        attributes = dict(item.split("=", 1) for item in server_first.split(","))
        salted = hashlib.pbkdf2_hmac(
            digest, password.encode(), base64.b64decode(attributes["s"]), int(attributes["i"])
        )
        client_key = _hmac(salted, b"Client Key", digest)
        without_proof = f"c=biws,r={attributes['r']}"
        auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
        signature = _hmac(hashlib.new(digest, client_key).digest(), auth_message, digest)
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True)))
        server_final = _authenticate(connection, f"{without_proof},p={proof.decode()}".encode())
        server_signature = _hmac(_hmac(salted, b"Server Key", digest), auth_message, digest)
        expected = b"v=" + base64.b64encode(server_signature)
        assert server_final == expected, f"server signature {server_final!r} does not verify"
    except SaslLoginFailed as failure:
        failure.closed_by_peer = connection.closed_by_peer()
        connection.close()
        raise
    except BaseException:
        connection.close()
        raise
    return connection


def _authenticate(connection: KafkaConnection, token: bytes) -> bytes:
    response = connection.call(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=token)
    if response.error_code != Errors.NONE:
        raise SaslLoginFailed(response.error_code, response.error_message)
    return bytes(response.auth_bytes)
