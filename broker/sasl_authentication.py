"""Builds each listener's ``ListenerAuthentication`` from its ``ListenerSecurity`` — the TLS
server context and the per-connection SASL authenticator (the shell around
``broker.sasl_server``: it supplies the randomness — SCRAM server nonces, bootstrap salts —
that the pure core takes as parameters) — and the broker's own ``ClientSecurity`` towards the
other brokers' inter-broker listener.

SCRAM credentials come from a ``ScramCredentialSource``. ``BrokerServer`` passes the one it
has; ``listener_scram_source`` layers the listener's bootstrap users (``broker.sasl_config``)
over it. Wire the metadata image's KIP-554 ``UserScramCredentialRecord``s in as that source
once the image carries them (issue 11, work-acl).
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Mapping

from pykraft.broker.config import BrokerConfig
from pykraft.broker.network import ListenerAuthentication
from pykraft.broker.sasl_config import ListenerSecurity
from pykraft.broker.sasl_mechanisms import (
    PLAIN,
    SCRAM_MECHANISMS,
    SCRAM_MIN_ITERATIONS,
    PlainServer,
    SaslServer,
    ScramCredentialSource,
    ScramServer,
    StaticScramCredentials,
)
from pykraft.broker.sasl_server import MechanismFactory, SaslAuthenticator
from pykraft.fetcher.broker_connection import ClientSecurity
from pykraft.metadata.auth.principal import KafkaPrincipal
from pykraft.metadata.auth.scram import ScramCredential, ScramMechanism, credential_from_password
from pykraft.metadata.auth.tls_context import client_context, server_context
from pykraft.metadata.auth.tls_settings import listener_prefix
from pykraft.protocol.sasl_client import SaslClientCredentials

# RFC 5802 asks for an unpredictable nonce; 18 random bytes -> 24 printable characters.
SCRAM_NONCE_BYTES = 18
SCRAM_SALT_BYTES = 16


class LayeredScramCredentials:
    """The first source that knows the user wins."""

    def __init__(self, *sources: ScramCredentialSource) -> None:
        self._sources = sources

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        for source in self._sources:
            credential = source.scram_credential(user, mechanism)
            if credential is not None:
                return credential
        return None

    def token_credential(
        self, token_id: str, mechanism: str
    ) -> tuple[ScramCredential, KafkaPrincipal] | None:
        for source in self._sources:
            found = source.token_credential(token_id, mechanism)
            if found is not None:
                return found
        return None


def listener_scram_source(
    security: ListenerSecurity, fallback: ScramCredentialSource
) -> ScramCredentialSource:
    derived = {
        (name, mechanism): credential_from_password(
            ScramMechanism.from_mechanism_name(mechanism),
            password,
            secrets.token_bytes(SCRAM_SALT_BYTES),
            SCRAM_MIN_ITERATIONS,
        )
        for mechanism, users in security.scram_bootstrap_users.items()
        for name, password in users.items()
    }
    return LayeredScramCredentials(StaticScramCredentials(derived), fallback)


def listener_authentication(
    security: ListenerSecurity, scram_credentials: ScramCredentialSource
) -> ListenerAuthentication:
    ssl_context = None
    rules = None
    if security.tls is not None:
        ssl_context = server_context(security.tls, listener_prefix(security.listener_name))
        rules = security.tls.principal_mapping_rules
    new_authenticator = None
    if security.security_protocol.uses_sasl:
        factories = _mechanism_factories(
            security, listener_scram_source(security, scram_credentials)
        )

        def new_authenticator() -> SaslAuthenticator:
            return SaslAuthenticator(factories)

    if rules is None:
        return ListenerAuthentication(ssl_context, new_sasl_authenticator=new_authenticator)
    return ListenerAuthentication(ssl_context, rules, new_authenticator)


def inter_broker_client_security(config: BrokerConfig) -> ClientSecurity:
    """How this broker connects to other brokers' ``inter.broker.listener.name``: Kafka uses
    that listener's own ``ssl.*`` in client mode (its trust store checks the leader, its key
    store is the client certificate) and ``sasl.mechanism.inter.broker.protocol`` with the
    broker's JAAS ``username``/``password``."""
    security = config.listener_security[config.inter_broker_listener_name]
    ssl_context = None
    if security.tls is not None:
        ssl_context = client_context(security.tls, listener_prefix(security.listener_name))
    sasl = None
    mechanism = config.inter_broker_sasl_mechanism
    if mechanism is not None:
        credentials = security.client_credentials[mechanism]
        sasl = SaslClientCredentials(mechanism, credentials.username, credentials.password)
    return ClientSecurity(ssl_context, sasl)


def _mechanism_factories(
    security: ListenerSecurity, credentials: ScramCredentialSource
) -> Mapping[str, MechanismFactory]:
    factories: dict[str, MechanismFactory] = {}
    for mechanism in security.sasl_mechanisms:
        if mechanism == PLAIN:
            factories[mechanism] = functools.partial(PlainServer, security.plain_users)
        else:
            assert mechanism in SCRAM_MECHANISMS
            factories[mechanism] = _scram_factory(mechanism, credentials)
    return factories


def _scram_factory(mechanism: str, credentials: ScramCredentialSource) -> MechanismFactory:
    def factory() -> SaslServer:
        return ScramServer(mechanism, credentials, secrets.token_urlsafe(SCRAM_NONCE_BYTES))

    return factory
