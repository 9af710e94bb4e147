"""Each Kafka listener's security: its protocol, TLS settings and SASL mechanisms, from Kafka's
properties (pure; ``broker.config`` calls it for every listener).

* ``listener.security.protocol.map`` gives each listener one of ``SecurityProtocol``
  (Kafka's ids: PLAINTEXT 0, SSL 1, SASL_PLAINTEXT 2, SASL_SSL 3).
* SSL and SASL_SSL listeners read ``ssl.*`` with the ``listener.name.<name>.`` prefix
  (``metadata.auth.tls_settings``); a SASL_SSL listener honours only the prefixed
  ``ssl.client.auth`` (KIP-684).
* SASL listeners: ``listener.name.<name>.sasl.enabled.mechanisms`` (else
  ``sasl.enabled.mechanisms``; Kafka's default GSSAPI is refused: pykraft has PLAIN,
  SCRAM-SHA-256, SCRAM-SHA-512), and per mechanism the JAAS config
  ``listener.name.<name>.<mechanism, lower case>.sasl.jaas.config`` (Kafka's broker-side
  lookup, ``JaasContext.loadServerContext``): ``PlainLoginModule`` lists its users as
  ``user_<name>="<password>"``; ``username``/``password`` of either login module are the
  broker's own credentials when it connects to this listener as a client (inter-broker).
  pykraft also reads ``user_<name>="<password>"`` from a SCRAM mechanism's JAAS config as
  bootstrap users (Kafka's ``ScramLoginModule`` ignores them; Kafka stores SCRAM users only in
  the metadata log): until the metadata image carries KIP-554 credentials, this is how a SCRAM
  listener gets users. The broker derives salted credentials from them at start-up
  (``broker.sasl_authentication``) and keeps no password.
* ``sasl.mechanism.inter.broker.protocol`` (Kafka's default GSSAPI) must be enabled on the
  inter-broker listener when that listener uses SASL (KafkaConfig's check).

Passwords are read only to be digested (PLAIN users) or used as the broker's client
credentials; they never appear in a ``repr`` or an error message.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs

from pykraft.broker.sasl_mechanisms import PLAIN, SUPPORTED_MECHANISMS, PlainUsers
from pykraft.metadata.auth.jaas import JaasConfigError, parse_jaas_config
from pykraft.metadata.auth.tls_settings import (
    ClientAuth,
    TlsSettings,
    TlsSettingsError,
    listener_prefix,
    parse_tls_settings,
)

# Kafka's default for sasl.enabled.mechanisms and sasl.mechanism.inter.broker.protocol.
KAFKA_DEFAULT_MECHANISM = "GSSAPI"


class SecurityProtocol(enum.IntEnum):
    PLAINTEXT = 0
    SSL = 1
    SASL_PLAINTEXT = 2
    SASL_SSL = 3

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


class SecurityConfigError(ValueError):
    def __init__(self, property_name: str, message: str) -> None:
        super().__init__(f"invalid value for {property_name}: {message}")
        self.property_name = property_name


@attrs.frozen
class ClientCredentials:
    """The broker's own SASL user on a listener (JAAS ``username``/``password``)."""

    username: str
    password: str = attrs.field(repr=False)


@attrs.frozen(kw_only=True)
class ListenerSecurity:
    listener_name: str
    security_protocol: SecurityProtocol
    tls: TlsSettings | None = None
    # sasl.enabled.mechanisms, in the configured order (SaslHandshake lists them so).
    sasl_mechanisms: tuple[str, ...] = ()
    plain_users: PlainUsers = attrs.field(factory=lambda: PlainUsers({}))
    # SCRAM mechanism -> user -> password of its JAAS user_<name> options (see the docstring).
    scram_bootstrap_users: Mapping[str, Mapping[str, str]] = attrs.field(factory=dict, repr=False)
    # mechanism -> the broker's credentials for it (inter-broker connections).
    client_credentials: Mapping[str, ClientCredentials] = attrs.field(factory=dict, repr=False)


def parse_listener_security(
    values: Mapping[str, str], listener_name: str, protocol: SecurityProtocol
) -> ListenerSecurity:
    prefix = listener_prefix(listener_name)
    tls = None
    if protocol.uses_tls:
        try:
            tls = parse_tls_settings(values, prefix)
        except TlsSettingsError as error:
            raise SecurityConfigError(error.property_name, str(error).split(": ", 1)[-1]) from None
        if protocol is SecurityProtocol.SASL_SSL and f"{prefix}ssl.client.auth" not in values:
            # KIP-684: a SASL_SSL listener asks for client certificates only when
            # ssl.client.auth is set with its listener prefix; the broker-wide one is ignored.
            tls = attrs.evolve(tls, client_auth=ClientAuth.NONE)
        if tls.keystore is None:
            raise SecurityConfigError(
                f"{prefix}ssl.keystore.location",
                f"missing; listener {listener_name} uses {protocol.name} and needs a key store",
            )
    if not protocol.uses_sasl:
        return ListenerSecurity(listener_name=listener_name, security_protocol=protocol, tls=tls)
    mechanisms = _enabled_mechanisms(values, prefix)
    plain_users = PlainUsers({})
    credentials: dict[str, ClientCredentials] = {}
    scram_users: dict[str, Mapping[str, str]] = {}
    for mechanism in mechanisms:
        name = f"{prefix}{mechanism.lower()}.sasl.jaas.config"
        raw = values.get(name)
        if raw is None:
            if mechanism == PLAIN:
                raise SecurityConfigError(name, "missing; PLAIN needs its users (user_<name>=...)")
            continue
        try:
            jaas = parse_jaas_config(raw, name)
        except JaasConfigError as error:
            raise SecurityConfigError(name, error.message) from None
        users = {key[5:]: value for key, value in jaas.options.items() if key.startswith("user_")}
        if mechanism == PLAIN:
            plain_users = PlainUsers.from_passwords(users)
        elif users:
            scram_users[mechanism] = users
        if "username" in jaas.options and "password" in jaas.options:
            credentials[mechanism] = ClientCredentials(
                jaas.options["username"], jaas.options["password"]
            )
    return ListenerSecurity(
        listener_name=listener_name,
        security_protocol=protocol,
        tls=tls,
        sasl_mechanisms=mechanisms,
        plain_users=plain_users,
        scram_bootstrap_users=scram_users,
        client_credentials=credentials,
    )


def _enabled_mechanisms(values: Mapping[str, str], prefix: str) -> tuple[str, ...]:
    name = f"{prefix}sasl.enabled.mechanisms"
    if name not in values:
        name = "sasl.enabled.mechanisms"
    raw = values.get(name, KAFKA_DEFAULT_MECHANISM)
    mechanisms = tuple(item.strip().upper() for item in raw.split(",") if item.strip())
    unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unsupported or not mechanisms:
        raise SecurityConfigError(
            name,
            f"{raw!r}: pykraft's SASL listeners support {', '.join(SUPPORTED_MECHANISMS)}"
            + (f" (not {', '.join(unsupported)})" if unsupported else ""),
        )
    return mechanisms


def inter_broker_mechanism(values: Mapping[str, str], security: ListenerSecurity) -> str | None:
    """``sasl.mechanism.inter.broker.protocol`` when the inter-broker listener uses SASL."""
    if not security.security_protocol.uses_sasl:
        return None
    name = "sasl.mechanism.inter.broker.protocol"
    mechanism = values.get(name, KAFKA_DEFAULT_MECHANISM).strip().upper()
    if mechanism not in security.sasl_mechanisms:
        raise SecurityConfigError(
            name,
            f"{mechanism} must be included in sasl.enabled.mechanisms of the inter-broker "
            f"listener {security.listener_name} ({', '.join(security.sasl_mechanisms)})",
        )
    if mechanism not in security.client_credentials:
        raise SecurityConfigError(
            f"{listener_prefix(security.listener_name)}{mechanism.lower()}.sasl.jaas.config",
            "needs username and password: the broker's own credentials for inter-broker "
            "connections",
        )
    return mechanism
