"""KafkaApis: route each request to the handler registered for its API key, frame the answer.

``KafkaApis.dispatch`` is the ``broker.network.Dispatch`` the listener calls. It decides from the
header alone (``protocol.apis.request_disposition``, Kafka's ``SocketServer`` and ``KafkaApis``
rules) what happens:

* an API key no schema here knows, or a version no schema defines: ``UnsupportedRequestError``
  is raised and the listener closes the connection without an answer — what Kafka does for
  every unsupported request: ``Processor.parseRequestHeader`` throws ``InvalidRequestException``
  / ``UnsupportedVersionException`` and ``processChannelException`` closes the channel;
* a known API pykraft does not serve, or a served API at a version outside the advertised
  range: the error response at the request's version, UNSUPPORTED_VERSION in every error code
  (``protocol.unsupported``; issue 9 asks for an answer where Kafka would close). When the
  body does not decode at that version, or it is an acks=0 Produce, the connection closes;
* ApiVersions outside our range: the v0 UNSUPPORTED_VERSION answer listing the ApiVersions range
  (KIP-511; ``ApiKeys.isVersionEnabled`` accepts every ApiVersions version for this reason);
* Produce v0-2, advertised only for librdkafka's compression check (KAFKA-18659): answered here
  with UNSUPPORTED_VERSION on every partition (``protocol.produce.unsupported_version_response``)
  so the Produce handler never sees them; with acks=0 the client reads no answer, so the
  connection is closed instead — how Kafka reports any acks=0 Produce failure;
* Fetch v0-3 (message formats v0/v1, advertised as Kafka 3.9 does): UNSUPPORTED_VERSION on every
  partition asked for (``protocol.legacy_fetch``), so the Fetch handler never sees them;
* otherwise the registered handler runs.

Every API served must have its entry in ``broker.authorization.API_ACL_CHECKS`` (what Kafka
authorizes for it); a handler whose authorizer has no ACLs yet raises ``AuthorizerNotReadyError``
and the request is answered UNKNOWN_SERVER_ERROR, as Kafka answers ``AuthorizerNotReadyException``.

Handlers are registered per ``ApiKey`` (``register`` / ``register_all``); each group of handlers
lives in its own module exposing a ``Mapping[ApiKey, ApiHandler]``. A handler receives the
``RequestContext`` and the body bytes after the request header, and returns the response body
(``bytes`` or ``Segments`` with file slices) or None for no response (acks=0 Produce). The
response header is added here. A handler raising ``ProtocolError`` (malformed body) or anything
else makes the listener close that connection, after the earlier responses.

The ApiVersions handler lives here: it advertises ``protocol.apis.SUPPORTED_API_VERSIONS``.
So do SaslHandshake and SaslAuthenticate as Kafka's ``KafkaApis`` answers them: a request that
reaches ``KafkaApis`` comes from an authenticated connection (``broker.sasl_server`` handles
them before that) or a listener without SASL, so both are ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pykraft.broker.authorization import API_ACL_CHECKS, AuthorizerNotReadyError
from pykraft.broker.network import RequestContext
from pykraft.broker.request_time import REQUEST_TIME, StartsAtOnce
from pykraft.protocol import unsupported
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import (
    SUPPORTED_API_VERSIONS,
    RequestDisposition,
    api_versions_request_is_valid,
    decode_request,
    encode_api_versions_response,
    encode_response,
    encode_unsupported_api_versions_response,
    request_disposition,
    response_class,
)
from pykraft.protocol.errors import Errors, UnsupportedRequestError
from pykraft.protocol.framing import frame_response
from pykraft.protocol.headers import response_header_version
from pykraft.protocol.legacy_fetch import decode_legacy_fetch_request, encode_legacy_fetch_error
from pykraft.protocol.produce import (
    decode_produce_request,
    encode_produce_response,
    unsupported_version_response,
)
from pykraft.protocol.segments import Segments

logger = logging.getLogger(__name__)

# Handlers the listener runs up to their first await at dispatch, with no task unless they
# suspend (``broker.request_time.StartsAtOnce``; issue 18): the hot paths, which reach no
# ``asyncio.timeout``, ``TaskGroup`` or aiohttp before they first wait (plain futures: the
# delayed produce and fetch). Not Metadata (auto topic creation forwards to the controller
# through aiohttp, whose timer needs a task) nor any forwarded API.
STARTS_AT_ONCE = frozenset({ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.API_VERSIONS})

ResponseBody = bytes | Segments
ApiHandler = Callable[[RequestContext, memoryview], Awaitable[ResponseBody | None]]
# (request, handler nanoseconds) -> throttle milliseconds.
RequestQuota = Callable[[RequestContext, int], int]
_REQUEST_QUOTA: contextvars.ContextVar[RequestQuota | None] = contextvars.ContextVar(
    "pykraft_request_quota", default=None
)


class KafkaApis:
    """The ApiKey → handler table and the dispatch the network listener calls."""

    def __init__(self) -> None:
        self._handlers: dict[ApiKey, ApiHandler] = {
            ApiKey.API_VERSIONS: handle_api_versions,
            ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,
            ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
        }

        # KIP-124: records a request's handler time against its request_percentage quota
        # and returns the throttle (broker.quotas_shell.ClientQuotas.record_request).
        self.request_quota: RequestQuota | None = None

    @property
    def registered(self) -> frozenset[ApiKey]:
        return frozenset(self._handlers)

    def register(self, api_key: ApiKey, handler: ApiHandler) -> None:
        """Serve ``api_key`` with ``handler``; an API may be registered once."""
        if api_key not in SUPPORTED_API_VERSIONS:
            raise ValueError(f"{api_key.name} is not in the ApiVersions table; it cannot be served")
        if api_key in self._handlers:
            raise ValueError(f"{api_key.name} already has a handler")
        if api_key not in API_ACL_CHECKS:
            raise ValueError(
                f"{api_key.name} has no entry in broker.authorization.API_ACL_CHECKS; "
                "say what Kafka authorizes before serving it"
            )
        self._handlers[api_key] = handler

    def register_all(self, handlers: Mapping[ApiKey, ApiHandler]) -> None:
        for api_key, handler in handlers.items():
            self.register(api_key, handler)

    def dispatch(self, context: RequestContext, body: memoryview) -> Awaitable[Segments | None]:
        """Route one request; raises ``UnsupportedRequestError`` where no answer can be encoded
        (the listener then closes the connection, as Kafka does)."""
        header = context.header
        disposition = request_disposition(header.api_key, header.api_version)
        if disposition is RequestDisposition.CLOSE_CONNECTION:
            raise UnsupportedRequestError(
                header.api_key, header.api_version, "unknown API or version not advertised"
            )
        if disposition is RequestDisposition.ANSWER_UNSUPPORTED_API_VERSIONS:
            return self._respond(context, body, _answer_unsupported_api_versions)
        if disposition is RequestDisposition.ANSWER_UNSUPPORTED_PRODUCE:
            return self._respond(context, body, _answer_legacy_produce)
        if disposition is RequestDisposition.ANSWER_UNSUPPORTED_FETCH:
            return self._respond(context, body, _answer_legacy_fetch)
        if disposition is RequestDisposition.ANSWER_UNSUPPORTED:
            return self._respond(context, body, _answer_unsupported)
        handler = self._handlers.get(ApiKey(header.api_key))
        if handler is None:
            # Advertised but nothing registered: a wiring bug in the broker's start-up.
            logger.error("no handler registered for advertised API %s", ApiKey(header.api_key))
            raise UnsupportedRequestError(header.api_key, header.api_version, "no handler")
        if header.api_key in STARTS_AT_ONCE:
            return StartsAtOnce(self._respond(context, body, handler))
        return self._respond(context, body, handler)

    async def _respond(
        self, context: RequestContext, body: memoryview, handler: ApiHandler
    ) -> Segments | None:
        if self.request_quota is not None:
            _REQUEST_QUOTA.set(self.request_quota)  # this request's task only
        try:
            response = await handler(context, body)
        except AuthorizerNotReadyError:
            response = _answer_authorizer_not_ready(context, body)
        if response is None:
            return None
        header = context.header
        header_version = response_header_version(header.api_key, header.api_version)
        return frame_response(header.correlation_id, header_version, response)


def kafka_python_handler(
    handle: Callable[[RequestContext, Any], Awaitable[Any]],
) -> ApiHandler:
    """Adapt a handler of decoded kafka-python request objects to an ``ApiHandler``.

    The body is decoded with ``protocol.apis.decode_request`` (a malformed body raises
    ``MalformedRequestError``: the connection closes) and the returned response object is
    encoded at the request's version; returning None sends nothing.
    """

    async def handler(context: RequestContext, body: memoryview) -> ResponseBody | None:
        header = context.header
        request = decode_request(header.api_key, header.api_version, body)
        response = await handle(context, request)
        if response is None:
            return None
        # KIP-219: the response carries the larger of its own throttle and the request quota's.
        throttle_ms = request_throttle_ms(context)
        current = getattr(response, "throttle_time_ms", None)
        if current is not None and throttle_ms > current:
            response.throttle_time_ms = throttle_ms
        return encode_response(header.api_key, header.api_version, response)

    return handler


def request_throttle_ms(context: RequestContext) -> int:
    """KIP-124: record the time this request's handler has run so far against its
    request_percentage quota; the throttle for its response (0 without request quotas, or
    outside a request the listener timed)."""
    record = _REQUEST_QUOTA.get()
    timer = REQUEST_TIME.get()
    if record is None or timer is None:
        return 0
    return record(context, timer.nanos)


async def handle_api_versions(context: RequestContext, body: memoryview) -> ResponseBody:
    """ApiVersions v0-v3 (``KafkaApis.handleApiVersionsRequest``).

    A v3 request whose client software name or version breaks KIP-511's pattern gets
    INVALID_REQUEST and an empty list, at the version it asked for.
    """
    version = context.header.api_version
    request = decode_request(ApiKey.API_VERSIONS, version, body)
    if not api_versions_request_is_valid(request):
        return encode_api_versions_response(version, error_code=Errors.INVALID_REQUEST)
    return encode_api_versions_response(version)


async def handle_sasl_handshake(context: RequestContext, body: memoryview) -> ResponseBody:
    """``KafkaApis.handleSaslHandshakeRequest``: ILLEGAL_SASL_STATE, no mechanisms."""
    version = context.header.api_version
    decode_request(ApiKey.SASL_HANDSHAKE, version, body)
    response = response_class(ApiKey.SASL_HANDSHAKE)(
        version=version, error_code=int(Errors.ILLEGAL_SASL_STATE), mechanisms=[]
    )
    return encode_response(ApiKey.SASL_HANDSHAKE, version, response)


async def handle_sasl_authenticate(context: RequestContext, body: memoryview) -> ResponseBody:
    """``KafkaApis.handleSaslAuthenticateRequest``: ILLEGAL_SASL_STATE with Kafka's message."""
    version = context.header.api_version
    decode_request(ApiKey.SASL_AUTHENTICATE, version, body)
    response = response_class(ApiKey.SASL_AUTHENTICATE)(
        version=version,
        error_code=int(Errors.ILLEGAL_SASL_STATE),
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
        session_lifetime_ms=0,
    )
    return encode_response(ApiKey.SASL_AUTHENTICATE, version, response)


def _answer_authorizer_not_ready(context: RequestContext, body: memoryview) -> ResponseBody:
    """Kafka answers ``AuthorizerNotReadyException`` with ``Errors.forException``'s
    UNKNOWN_SERVER_ERROR in every error code (``KafkaApis.handleError``)."""
    header = context.header
    response = unsupported.error_response(
        header.api_key, header.api_version, body, Errors.UNKNOWN_SERVER_ERROR
    )
    if response is None:
        raise UnsupportedRequestError(
            header.api_key, header.api_version, "authorizer not ready, and no error answer"
        )
    return response


async def _answer_unsupported_api_versions(
    context: RequestContext, body: memoryview
) -> ResponseBody:
    # The body of a version we do not know is not parsed, as in Kafka.
    return encode_unsupported_api_versions_response()


async def _answer_unsupported(context: RequestContext, body: memoryview) -> ResponseBody:
    header = context.header
    response = unsupported.error_response(header.api_key, header.api_version, body)
    if response is None:
        raise UnsupportedRequestError(
            header.api_key, header.api_version, "not served, and no error answer can be built"
        )
    return response


async def _answer_legacy_produce(context: RequestContext, body: memoryview) -> ResponseBody:
    version = context.header.api_version
    request = decode_produce_request(body, version)
    if request.acks == 0:
        raise UnsupportedRequestError(ApiKey.PRODUCE, version, "acks=0 Produce below v3")
    return encode_produce_response(unsupported_version_response(request), version)


async def _answer_legacy_fetch(context: RequestContext, body: memoryview) -> ResponseBody:
    version = context.header.api_version
    return encode_legacy_fetch_error(decode_legacy_fetch_request(body, version), version)
