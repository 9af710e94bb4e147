"""The SASL authenticator of one connection on a SASL_PLAINTEXT or SASL_SSL listener: whole
request frames in, response frames and an outcome out; no I/O (Kafka's
``SaslServerAuthenticator``, whose states and answers it follows).

Theory of operation. Until authentication completes the network shell hands every frame here
instead of to ``KafkaApis``. States (``SaslState``) and their legal transitions:

* ``HANDSHAKE_OR_VERSIONS_REQUEST`` (start) -> ``HANDSHAKE_REQUEST`` after a valid ApiVersions
  (answered here, with the broker's table; an unsupported or invalid ApiVersions is answered
  with its error and the state stays), -> ``AUTHENTICATE`` after a SaslHandshake naming an
  enabled mechanism;
* ``HANDSHAKE_REQUEST`` -> ``AUTHENTICATE`` after the SaslHandshake;
* ``AUTHENTICATE`` -> ``COMPLETE`` when the mechanism accepts the last token (the principal is
  ``User:<authorization id>``);
* any state -> ``FAILED``: the answer (if any) is written, then the connection closes.

What closes the connection, as in Kafka: any request other than ApiVersions/SaslHandshake
before the handshake ("Unexpected Kafka request of type X during SASL handshake", no answer);
a second ApiVersions after a valid one; a SaslHandshake for a mechanism not enabled (answered
UNSUPPORTED_SASL_MECHANISM with the enabled list first); during ``AUTHENTICATE`` a request that
is not SaslAuthenticate (a SaslHandshake is answered ILLEGAL_SASL_STATE first, others get no
answer); a failed token (SASL_AUTHENTICATION_FAILED with the mechanism's message or Kafka's
generic "Authentication failed during authentication due to invalid credentials with SASL
mechanism <m>"); more than ``MAX_SASL_TOKENS`` tokens.

SaslHandshake v0 (before KIP-152): the tokens that follow are raw size-prefixed SASL bytes, with
no Kafka header, and so are the answers; a failure just closes.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from pykraft.broker.sasl_mechanisms import SaslAuthenticationError, SaslError, SaslServer
from pykraft.metadata.auth.principal import KafkaPrincipal
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import (
    SUPPORTED_API_VERSIONS,
    api_versions_request_is_valid,
    decode_request,
    encode_api_versions_response,
    encode_response,
    encode_unsupported_api_versions_response,
    response_class,
)
from pykraft.protocol.errors import Errors, ProtocolError
from pykraft.protocol.framing import encode_frame, frame_response
from pykraft.protocol.headers import parse_request_header, response_header_version
from pykraft.protocol.segments import Segments

# SCRAM needs two tokens, PLAIN one; a client sending more is not following any mechanism.
MAX_SASL_TOKENS = 4
# Kafka's sasl.server.max.receive.size default (BrokerSecurityConfigs): the largest frame
# accepted before authentication.
SASL_SERVER_MAX_RECEIVE_SIZE = 524_288

# mechanism name -> a fresh server for one connection.
MechanismFactory = Callable[[], SaslServer]


class SaslState(enum.Enum):
    HANDSHAKE_OR_VERSIONS_REQUEST = "handshake_or_versions_request"
    HANDSHAKE_REQUEST = "handshake_request"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


_TRANSITIONS: Mapping[SaslState, frozenset[SaslState]] = {
    SaslState.HANDSHAKE_OR_VERSIONS_REQUEST: frozenset(
        {SaslState.HANDSHAKE_REQUEST, SaslState.AUTHENTICATE, SaslState.FAILED}
    ),
    SaslState.HANDSHAKE_REQUEST: frozenset({SaslState.AUTHENTICATE, SaslState.FAILED}),
    SaslState.AUTHENTICATE: frozenset({SaslState.COMPLETE, SaslState.FAILED}),
    SaslState.COMPLETE: frozenset(),
    SaslState.FAILED: frozenset(),
}


class IllegalSaslTransitionError(AssertionError):
    pass


@attrs.frozen
class SaslStep:
    """What one frame produced: bytes to write (size prefix included), whether to close after
    writing them, and the principal once authenticated; ``reason`` is for the log only."""

    response: Segments | None = None
    close: bool = False
    principal: KafkaPrincipal | None = None
    reason: str = ""


class SaslAuthenticator:
    def __init__(self, mechanisms: Mapping[str, MechanismFactory]) -> None:
        """``mechanisms``: the listener's ``sasl.enabled.mechanisms``, in order, each with a
        factory for its server."""
        assert mechanisms, "a SASL listener enables at least one mechanism"
        self._mechanisms = dict(mechanisms)
        self.state = SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
        self._mechanism = ""
        self._server: SaslServer | None = None
        self._raw_tokens = False
        self._tokens = 0

    @property
    def enabled_mechanisms(self) -> list[str]:
        return list(self._mechanisms)

    def _become(self, state: SaslState) -> None:
        if state not in _TRANSITIONS[self.state]:
            raise IllegalSaslTransitionError(f"SASL state {self.state.name} -> {state.name}")
        self.state = state

    def _fail(self, reason: str, response: Segments | None = None) -> SaslStep:
        self._become(SaslState.FAILED)
        return SaslStep(response, close=True, reason=reason)

    def handle_frame(self, frame: bytes) -> SaslStep:
        """One frame (without its size prefix) read before authentication completed."""
        assert self.state not in (SaslState.COMPLETE, SaslState.FAILED), self.state
        if self.state is SaslState.AUTHENTICATE and self._raw_tokens:
            return self._handle_token(frame, None)
        try:
            header, body_start = parse_request_header(memoryview(frame))
        except ProtocolError as error:
            return self._fail(f"invalid request header before authentication: {error}")
        body = memoryview(frame)[body_start:]
        try:
            return self._handle_request(
                header.api_key, header.api_version, header.correlation_id, body
            )
        except ProtocolError as error:
            return self._fail(f"malformed {_name(header.api_key)} during SASL: {error}")

    def _handle_request(
        self, api_key: int, version: int, correlation_id: int, body: memoryview
    ) -> SaslStep:
        if self.state is SaslState.AUTHENTICATE:
            if (
                api_key == ApiKey.SASL_AUTHENTICATE
                and version in SUPPORTED_API_VERSIONS[ApiKey.SASL_AUTHENTICATE]
            ):
                request = decode_request(api_key, version, body)
                return self._handle_token(bytes(request.auth_bytes), (correlation_id, version))
            reason = (
                f"Unexpected Kafka request of type {_name(api_key)} during SASL authentication."
            )
            if (
                api_key == ApiKey.SASL_HANDSHAKE
                and version in SUPPORTED_API_VERSIONS[ApiKey.SASL_HANDSHAKE]
            ):
                return self._fail(
                    reason,
                    self._handshake_response(correlation_id, version, Errors.ILLEGAL_SASL_STATE),
                )
            return self._fail(reason)
        if api_key == ApiKey.API_VERSIONS and self.state is SaslState.HANDSHAKE_OR_VERSIONS_REQUEST:
            return self._handle_api_versions(correlation_id, version, body)
        if (
            api_key == ApiKey.SASL_HANDSHAKE
            and version in SUPPORTED_API_VERSIONS[ApiKey.SASL_HANDSHAKE]
        ):
            return self._handle_handshake(correlation_id, version, body)
        return self._fail(
            f"Unexpected Kafka request of type {_name(api_key)} during SASL handshake."
        )

    def _handle_api_versions(self, correlation_id: int, version: int, body: memoryview) -> SaslStep:
        # SaslServerAuthenticator.handleApiVersionsRequest: an unsupported or invalid request is
        # answered with its error and the client may try again.
        if version not in SUPPORTED_API_VERSIONS[ApiKey.API_VERSIONS]:
            return SaslStep(
                frame_response(correlation_id, 0, encode_unsupported_api_versions_response())
            )
        header_version = response_header_version(ApiKey.API_VERSIONS, version)
        if not api_versions_request_is_valid(decode_request(ApiKey.API_VERSIONS, version, body)):
            error = encode_api_versions_response(version, error_code=Errors.INVALID_REQUEST)
            return SaslStep(frame_response(correlation_id, header_version, error))
        self._become(SaslState.HANDSHAKE_REQUEST)
        return SaslStep(
            frame_response(correlation_id, header_version, encode_api_versions_response(version))
        )

    def _handle_handshake(self, correlation_id: int, version: int, body: memoryview) -> SaslStep:
        mechanism = decode_request(ApiKey.SASL_HANDSHAKE, version, body).mechanism
        factory = self._mechanisms.get(mechanism)
        if factory is None:
            response = self._handshake_response(
                correlation_id, version, Errors.UNSUPPORTED_SASL_MECHANISM
            )
            return self._fail(f"Unsupported SASL mechanism {mechanism!r}", response)
        self._mechanism = mechanism
        self._server = factory()
        self._raw_tokens = version == 0
        self._become(SaslState.AUTHENTICATE)
        return SaslStep(self._handshake_response(correlation_id, version, Errors.NONE))

    def _handshake_response(self, correlation_id: int, version: int, error: Errors) -> Segments:
        response = response_class(ApiKey.SASL_HANDSHAKE)(
            version=version, error_code=int(error), mechanisms=self.enabled_mechanisms
        )
        body = encode_response(ApiKey.SASL_HANDSHAKE, version, response)
        return frame_response(
            correlation_id, response_header_version(ApiKey.SASL_HANDSHAKE, version), body
        )

    def _handle_token(self, token: bytes, request: tuple[int, int] | None) -> SaslStep:
        """``request``: (correlation id, SaslAuthenticate version), or None for a raw token."""
        assert self._server is not None
        self._tokens += 1
        if self._tokens > MAX_SASL_TOKENS:
            return self._fail(f"more than {MAX_SASL_TOKENS} SASL tokens")
        try:
            challenge = self._server.evaluate_response(token)
        except SaslAuthenticationError as error:
            return self._fail(str(error), self._authenticate_error(request, str(error)))
        except SaslError as error:
            # Kafka: "DO NOT include error message from the SaslException in the client
            # response since it may contain sensitive data like the existence of the user."
            message = (
                "Authentication failed during authentication due to invalid credentials with "
                f"SASL mechanism {self._mechanism}"
            )
            return self._fail(f"{message}: {error}", self._authenticate_error(request, message))
        principal = None
        if self._server.complete:
            self._become(SaslState.COMPLETE)
            principal = self._server.principal
        if request is None:
            return SaslStep(Segments.of([encode_frame(challenge)]), principal=principal)
        return SaslStep(
            self._authenticate_response(request, Errors.NONE, None, challenge), principal=principal
        )

    def _authenticate_error(self, request: tuple[int, int] | None, message: str) -> Segments | None:
        if request is None:
            return None  # raw tokens have no way to carry an error: the connection closes
        return self._authenticate_response(request, Errors.SASL_AUTHENTICATION_FAILED, message, b"")

    def _authenticate_response(
        self, request: tuple[int, int], error: Errors, message: str | None, token: bytes
    ) -> Segments:
        correlation_id, version = request
        response: Any = response_class(ApiKey.SASL_AUTHENTICATE)(
            version=version, error_code=int(error), error_message=message, auth_bytes=token,
            session_lifetime_ms=0,
        )  # fmt: skip
        body = encode_response(ApiKey.SASL_AUTHENTICATE, version, response)
        return frame_response(
            correlation_id, response_header_version(ApiKey.SASL_AUTHENTICATE, version), body
        )


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api_key {api_key}"
