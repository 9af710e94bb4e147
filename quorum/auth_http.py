"""The doors of the controller's HTTP API: who is asking, and may they.

Why TLS with client certificates, and HTTP Basic for operators: issue 11 offers TLS client
certificates or a SASL/SCRAM-derived token. Brokers already hold a certificate for their Kafka
listeners, so mutual TLS costs them nothing and proves the identity in the handshake, before a
byte of HTTP is read — no token to mint, rotate, leak in a log or replay, no clock to agree on.
A token would have needed a SCRAM exchange over HTTP (several round trips and server state per
login) and still TLS to keep it from being replayed. Operators may present a certificate too, or
``Authorization: Basic`` over the same TLS, checked against the SCRAM credentials the cluster
already keeps (``quorum/auth_basic.py``), so one password serves Kafka clients and the admin API.

Per request (``guard``, wrapped around every handler by ``service_http.add_routes``):

1. **Authenticate.** PLAINTEXT listener: ``User:ANONYMOUS``, as Kafka's PLAINTEXT. TLS listener:
   the peer certificate's principal (``metadata/auth/principal.py``,
   ``ssl.principal.mapping.rules``); without one, a valid Basic header's ``User:<name>``;
   neither: 401 SASL_AUTHENTICATION_FAILED, with ``WWW-Authenticate: Basic realm="pykraft"`` (RFC
   7235 §3.1: a 401 must carry a challenge; RFC 7617 names Basic's).
   With ``ssl.client.auth=required`` a client without a certificate never gets past the handshake.
2. **Authorize** by the route's access column (``metadata/api/routes.py``) through
   ``quorum/auth.py``: 403 CLUSTER_AUTHORIZATION_FAILED or TOPIC_AUTHORIZATION_FAILED. What needs
   the body (the topic to create, the broker id of a broker RPC) is checked by the handler with
   ``require_topic`` / ``require_broker`` right after reading it, before anything is written.

The principal is kept on the request (``principal_of``) for the handlers.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Iterable

import attrs
from aiohttp import web

from pykraft.metadata.api.errors import ApiError, ErrorBody, status_of
from pykraft.metadata.api.routes import Access, ResourceOf, Route
from pykraft.metadata.auth.principal import (
    ANONYMOUS,
    KafkaPrincipal,
    MappingRule,
    PrincipalError,
    principal_from_certificate,
    user,
)
from pykraft.metadata.image import MetadataImage
from pykraft.protocol.errors import Errors
from pykraft.quorum import auth_basic
from pykraft.quorum.auth import (
    Authorizer,
    BrokerBinding,
    ImageAuthorizer,
    Refusal,
    check_group,
    check_route,
    describable,
)
from pykraft.quorum.config import ControllerConfig

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Bounds (STYLE.md §7): password checks cost milliseconds of CPU each; at most this many run at
# once, the rest are refused rather than queued.
MAX_CONCURRENT_PASSWORD_CHECKS = 4
PRINCIPAL = "pykraft.principal"
# RFC 7235 §3.1: "The server generating a 401 response MUST send a WWW-Authenticate header
# field containing at least one challenge"; Basic is the scheme a password is accepted by.
UNAUTHORIZED_STATUS = 401
BASIC_CHALLENGE = 'Basic realm="pykraft"'


class Refused(Exception):
    """Answer ``body`` with HTTP ``status`` and ``headers`` (a 401 carries the challenge)."""

    def __init__(self, status: int, body: ErrorBody) -> None:
        super().__init__(body.message)
        self.status = status
        self.body = body
        self.headers: dict[str, str] = (
            {"WWW-Authenticate": BASIC_CHALLENGE} if status == UNAUTHORIZED_STATUS else {}
        )


@attrs.define
class Doors:
    """What every door needs: how callers authenticate and the authorizer that decides."""

    tls: bool
    mapping_rules: tuple[MappingRule, ...]
    # None: no authorizer.class.name, everything is allowed (Kafka's default).
    authorizer: Authorizer | None
    binding: BrokerBinding
    # The SCRAM credentials of the current image (None: Basic is never accepted).
    credentials: Callable[[], auth_basic.ScramCredentials] | None = None
    _password_checks: int = 0

    @classmethod
    def open(cls) -> Doors:
        """PLAINTEXT without an authorizer: everyone is ANONYMOUS and allowed (Kafka's
        defaults)."""
        return cls(tls=False, mapping_rules=(), authorizer=None, binding=BrokerBinding())

    @classmethod
    def of(cls, config: ControllerConfig, image: Callable[[], MetadataImage]) -> Doors:
        """The doors of a controller whose current metadata image ``image`` returns: its ACLs
        authorize, its SCRAM credentials check Basic passwords."""
        authorizer: Authorizer | None = (
            ImageAuthorizer.of(
                lambda: image().acls, config.super_users, config.allow_everyone_if_no_acl_found
            )
            if config.authorizer_enabled
            else None
        )
        return cls(
            tls=config.http_tls is not None,
            mapping_rules=(
                config.http_tls.principal_mapping_rules if config.http_tls is not None else ()
            ),
            authorizer=authorizer,
            binding=BrokerBinding(config.broker_principal),
            credentials=lambda: image().scram,
        )

    async def authenticate(self, request: web.Request) -> KafkaPrincipal:
        if not self.tls:
            return ANONYMOUS
        certificate = _peer_certificate(request)
        if certificate is not None:
            try:
                return principal_from_certificate(certificate, self.mapping_rules)
            except PrincipalError as error:
                raise _unauthenticated(str(error)) from None
        basic = auth_basic.parse_basic(request.headers.get("Authorization"))
        if basic is None:
            raise _unauthenticated(
                "Present a client certificate, or Authorization: Basic with a SCRAM user's "
                "password."
            )
        if self.credentials is None or not await self._verify(basic):
            # Never name the password, nor say whether the user exists.
            raise _unauthenticated(f"Authentication failed for user {basic.user!r}.")
        return user(basic.user)

    async def _verify(self, basic: auth_basic.BasicCredentials) -> bool:
        assert self.credentials is not None
        if self._password_checks >= MAX_CONCURRENT_PASSWORD_CHECKS:
            raise Refused(
                status_of(Errors.REQUEST_TIMED_OUT),
                ErrorBody.of(
                    ApiError.of(Errors.REQUEST_TIMED_OUT, "Too many password checks in flight")
                ),
            )
        self._password_checks += 1
        try:
            return await asyncio.to_thread(auth_basic.verify, self.credentials(), basic)
        finally:
            self._password_checks -= 1


DOORS_KEY = web.AppKey("doors", Doors)


def _peer_certificate(request: web.Request) -> bytes | None:
    transport = request.transport
    ssl_object = None if transport is None else transport.get_extra_info("ssl_object")
    if not isinstance(ssl_object, ssl.SSLObject | ssl.SSLSocket):
        return None
    return ssl_object.getpeercert(binary_form=True)


def _unauthenticated(message: str) -> Refused:
    error = ApiError.of(Errors.SASL_AUTHENTICATION_FAILED, message)
    return Refused(status_of(error.error), ErrorBody.of(error))


def _raise_refusal(refusal: Refusal | None) -> None:
    if refusal is not None:
        error = ApiError.of(refusal.error, refusal.message)
        raise Refused(status_of(error.error), ErrorBody.of(error))


def principal_of(request: web.Request) -> KafkaPrincipal:
    principal = request.get(PRINCIPAL)
    assert isinstance(principal, KafkaPrincipal), "guard() authenticates every route first"
    return principal


def _host(request: web.Request) -> str:
    return request.remote or ""


def _path_topic(request: web.Request, access: Access) -> str | None:
    """The topic a path-authorized route is about (None: a cluster-wide resource)."""
    if access.resource is ResourceOf.TOPIC_IN_PATH:
        return request.match_info["name"]
    if (
        access.resource is ResourceOf.CONFIG_IN_PATH
        and request.match_info["resource_type"].lower() == "topic"
    ):
        return request.match_info["resource_name"]
    return None


def guard(route: Route, handler: Handler) -> Handler:
    """``handler`` behind the route's door: authenticate, then the checks the path allows."""
    access = route.access

    async def guarded(request: web.Request) -> web.StreamResponse:
        doors = request.app[DOORS_KEY]
        principal = await doors.authenticate(request)
        request[PRINCIPAL] = principal
        if access.resource is not ResourceOf.TOPIC_IN_BODY:
            _raise_refusal(
                check_route(
                    doors.authorizer,
                    principal,
                    _host(request),
                    access,
                    topic=_path_topic(request, access),
                    group=(
                        request.match_info["group"]
                        if access.resource is ResourceOf.GROUP_IN_PATH
                        else None
                    ),
                )
            )
        return await handler(request)

    return guarded


def require_topic(request: web.Request, access: Access, topic: str) -> None:
    """The check of a TOPIC_IN_BODY route, once the body named the topic."""
    doors = request.app[DOORS_KEY]
    _raise_refusal(
        check_route(doors.authorizer, principal_of(request), _host(request), access, topic=topic)
    )


def require_broker(request: web.Request, broker_id: int) -> None:
    """The caller must be broker ``broker_id``'s principal (``pykraft.broker.principal``)."""
    _raise_refusal(request.app[DOORS_KEY].binding.check(principal_of(request), broker_id))


def require_group(request: web.Request, operation: str, group: str) -> None:
    """``operation`` on consumer group ``group`` (a group named outside the path)."""
    doors = request.app[DOORS_KEY]
    _raise_refusal(
        check_group(doors.authorizer, principal_of(request), _host(request), operation, group)
    )


def visible_topics(request: web.Request, names: Iterable[str]) -> set[str]:
    """The topics of ``names`` the caller may DESCRIBE."""
    doors = request.app[DOORS_KEY]
    return set(describable(doors.authorizer, principal_of(request), _host(request), names))
