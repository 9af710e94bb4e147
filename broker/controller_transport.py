"""The retrying HTTP transport under ``ControllerClient``: one request to the controllers, and
how its answer is classified.

Why a module of its own: the route methods (``controller_broker_rpcs.py``, the broker's RPCs;
``controller_admin_calls.py``, the operators' topic, config, ACL and SCRAM calls) only build a
request and name the contract's decoder. Choosing a controller, following NOT_CONTROLLER,
retrying, authenticating (TLS client certificate, HTTP Basic) and turning every failure into
``ControllerError`` is one concern, written once here.

Theory of operation
-------------------
Every request and answer is written and read by the controller's contract (``metadata/api``:
the routes, the types, their JSON, the error body), which the controller serves with too; this
module only carries them. Every call goes through ``ControllerClient._call``, which picks a
controller, sends one request with aiohttp and classifies the answer:

* ``421 NOT_CONTROLLER`` with ``leader`` (``errors.redirect_of``): the write reached a
  follower. The leader's URL is remembered and the request is sent there at once (Kafka's
  clients likewise retry at the controller a NOT_CONTROLLER names).
* ``503 NOT_CONTROLLER`` (no leader during an election), a connection failure, or — for
  idempotent requests only — ``503 REQUEST_TIMED_OUT``: the next controller of the bootstrap
  list is tried after an exponential back-off with jitter (tenacity), until the call's deadline.
  A non-idempotent write (``routes.Route.idempotent``) whose outcome is unknown (timed out) is
  not resent: creating a topic twice would answer TOPIC_ALREADY_EXISTS for a topic this very
  call created.
* any other error: raised at once as ``ControllerRequestError`` (a ``ControllerError`` whose
  ``error`` is the controller's Kafka error name, e.g. TOPIC_ALREADY_EXISTS). An answer the
  contract cannot read is UNKNOWN_SERVER_ERROR (CORRUPT_MESSAGE for a metadata record).

Every failure surfaces as ``broker.controller_api.ControllerError``, so this class
satisfies the admin handlers' ``ControllerClient`` protocol. The loop is bounded by the call's
deadline and ``MAX_ATTEMPTS`` (STYLE.md §7).

Reads (GET) are answered by any controller from its committed image; the client still prefers
the last known leader, whose image is the freshest.

A broker proves who it is to the controllers with its TLS client certificate (issue 11;
``quorum/auth_http.py``): when Kafka's properties put the controller listener on SSL
(``controller.listener.names``, ``listener.security.protocol.map=CONTROLLER:SSL``, the ``ssl.*``
properties, ``listener.name.controller.ssl.*`` first), ``broker.config.controller_tls_settings``
reads them and the client connects over https with ``metadata.auth.tls_context.client_context``:
the broker's key store is its client certificate, the trust store checks the controller's.
"""

from __future__ import annotations

import base64
import logging
import ssl
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self, TypeVar

import aiohttp
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt
from tenacity import stop_after_delay as tenacity_stop_after_delay

from pykraft.broker.controller_api import ControllerError
from pykraft.metadata.api import errors, records, routes
from pykraft.metadata.api.errors import ErrorBody, SnapshotRef
from pykraft.metadata.api.json_fields import Fields, JsonBodyError, JsonObject, parse_json_object

logger = logging.getLogger(__name__)

T = TypeVar("T")
# Query parameters; pairs when a name repeats (``?user=a&user=b``).
Params = Mapping[str, str] | Sequence[tuple[str, str]]

# Bounds (STYLE.md §7).
MAX_ATTEMPTS = 50
DEFAULT_DEADLINE_S = 30.0
REQUEST_TIMEOUT_S = 15.0
DEFAULT_KEEPALIVE_TIMEOUT_S = 15.0  # aiohttp's own default
BACKOFF_INITIAL_S = 0.05
BACKOFF_MAX_S = 1.0
# The JSON body of one answer; a records page of 100,000 records stays well below.
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


class ControllerRequestError(ControllerError):
    """The controller answered with an error; ``status`` is the HTTP status, ``body`` the
    contract's ``ErrorBody``."""

    def __init__(self, status: int, error: str, message: str, body: Mapping[str, Any]) -> None:
        super().__init__(error, message)
        self.status = status
        self.body = dict(body)


class SnapshotRequiredError(ControllerRequestError):
    """The offset asked for is below the controller's retained window (409 SNAPSHOT_REQUIRED)."""

    @property
    def snapshot(self) -> SnapshotRef | None:
        try:
            return errors.error_body_from_json(
                Fields({"error": self.error, "message": self.message, **self.body})
            ).snapshot
        except JsonBodyError:
            return None


class _Retry(Exception):
    """An answer that another attempt may fix; ``immediately`` for a leader redirect."""

    def __init__(self, error: ControllerError, *, immediately: bool = False) -> None:
        super().__init__(str(error))
        self.error = error
        self.immediately = immediately


def normalize_url(address: str, scheme: str = "http") -> str:
    """``host:port`` or ``http://host:port`` (any trailing slash dropped) as a base URL;
    ``scheme`` for an address without one."""
    address = address.strip().rstrip("/")
    return address if "://" in address else f"{scheme}://{address}"


def _backoff(state: RetryCallState) -> float:
    outcome = state.outcome
    error = outcome.exception() if outcome is not None else None
    if isinstance(error, _Retry) and error.immediately:
        return 0.0
    return float(min(BACKOFF_MAX_S, BACKOFF_INITIAL_S * 2 ** (state.attempt_number - 1)))


class ControllerTransport:
    """aiohttp client of the controllers' ``/v1`` API, without its routes; closed with
    ``close``."""

    def __init__(
        self,
        bootstrap: Sequence[str],
        *,
        deadline_s: float = DEFAULT_DEADLINE_S,
        bearer_token: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        basic_auth: tuple[str, str] | None = None,
        keepalive_timeout_s: float = DEFAULT_KEEPALIVE_TIMEOUT_S,
    ) -> None:
        if not bootstrap:
            raise ValueError("at least one controller address is needed")
        # ssl_context: https, with the client certificate it holds (controller_tls_settings).
        self._ssl_context = ssl_context
        scheme = "http" if ssl_context is None else "https"
        self.urls = [normalize_url(address, scheme) for address in bootstrap]
        self.deadline_s = deadline_s
        self._headers = {"Authorization": f"Bearer {bearer_token}"} if bearer_token else {}
        if basic_auth is not None:
            # An operator's HTTP Basic over TLS (quorum/auth_basic.py); never logged.
            assert ssl_context is not None, "Basic credentials are sent over TLS only"
            user, password = basic_auth
            token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            self._headers = {"Authorization": f"Basic {token}"}  # RFC 7617
        # How long an idle pooled connection is kept: a broker's heartbeat client keeps its
        # connection across beats, since the controller takes one closed while idle for a dead
        # process (quorum/broker_channels.py).
        self._keepalive_timeout_s = keepalive_timeout_s
        self._leader_url: str | None = None
        self._next_index = 0
        self._session: aiohttp.ClientSession | None = None

    @property
    def leader_url(self) -> str | None:
        """The active controller's URL as last learned (a redirect or a successful write)."""
        return self._leader_url

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ transport

    def _target(self) -> str:
        if self._leader_url is not None:
            return self._leader_url
        return self.urls[self._next_index % len(self.urls)]

    def _forget(self, url: str) -> None:
        """``url`` failed: try the next bootstrap controller next time."""
        if self._leader_url == url:
            self._leader_url = None
        if url in self.urls:
            self._next_index = self.urls.index(url) + 1
        else:
            self._next_index += 1

    async def _call(
        self,
        route: routes.Route,
        path: str,
        *,
        body: JsonObject | None = None,
        params: Params | None = None,
        idempotent: bool | None = None,
        timeout_s: float = REQUEST_TIMEOUT_S,
        deadline_s: float | None = None,
    ) -> bytes:
        """The payload of a successful answer; ``idempotent`` defaults to the route's.

        An explicit ``deadline_s`` bounds each attempt too: the retry policy stops only between
        attempts, so a controller that takes the request and goes silent (partitioned away)
        would otherwise hold a heartbeat for ``timeout_s`` — past the session a new active
        controller grants, which then fences the broker (tests/chaos/test_network_faults.py)."""
        resend = route.idempotent if idempotent is None else idempotent
        if deadline_s is not None:
            timeout_s = min(timeout_s, deadline_s)
        retrying = AsyncRetrying(
            stop=(
                tenacity_stop_after_delay(deadline_s or self.deadline_s)
                | stop_after_attempt(MAX_ATTEMPTS)
            ),
            wait=_backoff,
            retry=retry_if_exception_type(_Retry),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    return await self._attempt(route.method, path, body, params, resend, timeout_s)
        except _Retry as last:
            raise last.error from None
        raise AssertionError("tenacity returns or raises")

    async def _attempt(
        self,
        method: str,
        path: str,
        body: JsonObject | None,
        params: Params | None,
        idempotent: bool,
        timeout_s: float,
    ) -> bytes:
        url = self._target()
        if self._session is None:
            connector = aiohttp.TCPConnector(
                ssl=True if self._ssl_context is None else self._ssl_context,
                keepalive_timeout=self._keepalive_timeout_s,
            )
            self._session = aiohttp.ClientSession(headers=self._headers, connector=connector)
        try:
            async with self._session.request(
                method,
                url + path,
                json=body,
                params=params,
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as response:
                if (response.content_length or 0) > MAX_RESPONSE_BYTES:
                    raise ControllerError(
                        "UNKNOWN_SERVER_ERROR",
                        f"{url} answered {response.content_length} bytes, over the limit",
                    )
                payload = await response.read()
                status = response.status
                active = response.headers.get(records.ACTIVE_CONTROLLER_HEADER)
        except (aiohttp.ClientConnectionError, TimeoutError) as error:
            # Every connection failure: refused, reset (also while writing the request on a
            # pooled connection the controller closed: ClientConnectionResetError, which once
            # stopped a broker's metadata loader when a controller was killed), disconnected.
            self._forget(url)
            failure = ControllerError(
                "REQUEST_TIMED_OUT", f"controller {url} is unreachable: {error or 'timed out'}"
            )
            # Not connected at all: nothing was sent, so even a write may be resent.
            sent = not isinstance(error, aiohttp.ClientConnectorError)
            if sent and not idempotent:
                raise failure from None
            raise _Retry(failure) from None
        if status < 400:
            if active is not None and normalize_url(active) != url:
                self._leader_url = normalize_url(active)  # a standby named the leader
            return payload
        return self._raise_error(url, status, error_body_of(status, payload), idempotent)

    def _raise_error(self, url: str, status: int, body: ErrorBody, idempotent: bool) -> bytes:
        failure_class = (
            SnapshotRequiredError
            if body.error == errors.SNAPSHOT_REQUIRED
            else ControllerRequestError
        )
        failure = failure_class(status, body.error, body.message, errors.error_body_to_json(body))
        leader = errors.redirect_of(body)
        if leader is not None and normalize_url(leader) != url:
            self._leader_url = normalize_url(leader)
            raise _Retry(failure, immediately=True)
        if body.error == "NOT_CONTROLLER":
            self._forget(url)
            raise _Retry(failure)
        if body.error == "REQUEST_TIMED_OUT" and idempotent:
            raise _Retry(failure)
        raise failure

    def _remember_leader(self) -> None:
        """A write succeeded: the controller that took it is the leader."""
        self._leader_url = self._target()

    async def _read(
        self,
        route: routes.Route,
        path: str,
        decode: Callable[[Fields], T],
        *,
        params: Params | None = None,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> T:
        """A GET answered by any controller, decoded by the contract."""
        payload = await self._call(route, path, params=params, timeout_s=timeout_s)
        return decode_answer(route, payload, decode)

    async def _write(
        self,
        route: routes.Route,
        path: str,
        body: JsonObject | None,
        decode: Callable[[Fields], T],
        *,
        idempotent: bool | None = None,
        deadline_s: float | None = None,
    ) -> T:
        payload = await self._call(
            route, path, body=body, idempotent=idempotent, deadline_s=deadline_s
        )
        self._remember_leader()
        return decode_answer(route, payload, decode)

    async def _read_route(
        self,
        route: routes.Route,
        decode: Callable[[Fields], T],
        *,
        params: Params | None = None,
    ) -> T:
        """``_read`` of a route whose path has no parameters."""
        return await self._read(route, route.path(), decode, params=params)

    async def _write_route(
        self,
        route: routes.Route,
        body: JsonObject | None,
        decode: Callable[[Fields], T],
        *,
        idempotent: bool | None = None,
        deadline_s: float | None = None,
    ) -> T:
        """``_write`` to a route whose path has no parameters."""
        return await self._write(
            route, route.path(), body, decode, idempotent=idempotent, deadline_s=deadline_s
        )


def decode_answer(route: routes.Route, payload: bytes, decode: Callable[[Fields], T]) -> T:
    """A successful answer read by the contract; one it cannot read is the controller's
    failure (UNKNOWN_SERVER_ERROR), never a KeyError in the caller."""
    try:
        return decode(Fields(parse_json_object(payload, max_depth=None)))
    except JsonBodyError as error:
        raise ControllerError(
            "UNKNOWN_SERVER_ERROR",
            f"the answer to {route.method} {route.template} does not read: {error}",
        ) from None


def error_body_of(status: int, payload: bytes) -> ErrorBody:
    """A failed answer's body; one that does not read still fails, with its HTTP status."""
    try:
        return errors.error_body_from_json(Fields(parse_json_object(payload, max_depth=None)))
    except JsonBodyError:
        return ErrorBody(
            error="UNKNOWN_SERVER_ERROR",
            message=f"HTTP {status} without the controller's error body",
        )
