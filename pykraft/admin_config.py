"""``--command-config`` for tools that speak the Kafka protocol to brokers: an admin client's
properties (Kafka's ``AdminClientConfig`` names) turned into ``fetcher.broker_connection``'s
``ClientSecurity`` and the client's timeouts.

``pykraft.command_config`` reads the same file for the controllers' HTTP API; here the same
properties reach a broker's Kafka listener, so every ``security.protocol`` Kafka has is taken:

* ``PLAINTEXT`` (the default): no TLS, no SASL;
* ``SSL``: TLS with ``ssl.truststore.*`` (PEM, or librdkafka's ``ssl.ca.location``) and, when
  given, ``ssl.keystore.*`` as the client certificate — parsed by ``command_config`` as for the
  controllers;
* ``SASL_PLAINTEXT`` / ``SASL_SSL``: SASL with ``sasl.mechanism`` (librdkafka:
  ``sasl.mechanisms``; Kafka's default GSSAPI is not served here, so PLAIN, SCRAM-SHA-256 or
  SCRAM-SHA-512 must be named) and the user of ``sasl.jaas.config`` (or ``sasl.username`` /
  ``sasl.password``), then TLS as above for SASL_SSL.

Timeouts keep Kafka's admin client names and defaults: ``request.timeout.ms`` (30000, one
request), ``default.api.timeout.ms`` (60000, one call with its retries), ``retry.backoff.ms``
(100). The password stays out of every repr and message.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import attrs

from pykraft.command_config import CommandConfigError, connection_of, sasl_credentials
from pykraft.fetcher.broker_connection import ClientSecurity
from pykraft.properties import ConfigError, Properties
from pykraft.protocol.sasl_client import PLAIN, SCRAM_MECHANISMS, SaslClientCredentials

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
DEFAULT_SASL_MECHANISM = "GSSAPI"  # Kafka's SaslConfigs.DEFAULT_SASL_MECHANISM
REQUEST_TIMEOUT_MS_DEFAULT = 30_000
DEFAULT_API_TIMEOUT_MS_DEFAULT = 60_000
RETRY_BACKOFF_MS_DEFAULT = 100
CLIENT_ID_DEFAULT = "pykraft-admin"


@attrs.frozen
class AdminConfig:
    security: ClientSecurity = attrs.field(factory=ClientSecurity)
    client_id: str = CLIENT_ID_DEFAULT
    request_timeout_ms: int = REQUEST_TIMEOUT_MS_DEFAULT
    default_api_timeout_ms: int = DEFAULT_API_TIMEOUT_MS_DEFAULT
    retry_backoff_ms: int = RETRY_BACKOFF_MS_DEFAULT


def load_admin_config(path: Path | None) -> AdminConfig:
    if path is None:
        return AdminConfig()
    try:
        properties = Properties.load(path)
    except ConfigError as error:
        raise CommandConfigError(str(error)) from None
    return admin_config_of(properties.values, str(path))


def admin_config_of(values: Mapping[str, str], source: str) -> AdminConfig:
    return AdminConfig(
        security=client_security_of(values, source),
        client_id=values.get("client.id", CLIENT_ID_DEFAULT) or CLIENT_ID_DEFAULT,
        request_timeout_ms=_positive_ms(values, "request.timeout.ms", source),
        default_api_timeout_ms=_positive_ms(values, "default.api.timeout.ms", source),
        retry_backoff_ms=_positive_ms(values, "retry.backoff.ms", source),
    )


def client_security_of(values: Mapping[str, str], source: str) -> ClientSecurity:
    protocol = values.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise CommandConfigError(
            f"{source}: security.protocol={protocol} is not one of {', '.join(PROTOCOLS)}"
        )
    ssl_context = None
    if protocol in ("SSL", "SASL_SSL"):
        # The TLS half is the controllers' (command_config): one parser for ssl.* everywhere.
        ssl_context = connection_of({**values, "security.protocol": "SSL"}, source).ssl_context
    sasl = None
    if protocol.startswith("SASL_"):
        mechanism = values.get(
            "sasl.mechanism", values.get("sasl.mechanisms", DEFAULT_SASL_MECHANISM)
        ).upper()
        if mechanism not in SASL_MECHANISMS:
            raise CommandConfigError(
                f"{source}: sasl.mechanism={mechanism} is not supported: one of "
                f"{', '.join(SASL_MECHANISMS)}"
            )
        username, password = sasl_credentials(values, source)
        sasl = SaslClientCredentials(mechanism, username, password)
    return ClientSecurity(ssl_context, sasl)


_DEFAULTS = {
    "request.timeout.ms": REQUEST_TIMEOUT_MS_DEFAULT,
    "default.api.timeout.ms": DEFAULT_API_TIMEOUT_MS_DEFAULT,
    "retry.backoff.ms": RETRY_BACKOFF_MS_DEFAULT,
}


def _positive_ms(values: Mapping[str, str], name: str, source: str) -> int:
    raw = values.get(name)
    if raw is None:
        return _DEFAULTS[name]
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise CommandConfigError(f"{source}: {name}={raw} is not a positive number of ms")
    return value
