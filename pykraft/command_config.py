"""``--command-config``: how an admin tool reaches a secure controller, in Kafka's client names.

Why Kafka's names: ``kafka-acls.sh --command-config`` and ``kafka-configs.sh --command-config``
take an admin client's properties file, and ``pykraft dev --secure`` writes one
(``client.properties``), so the same file serves a Java client and ``pykraft acls``,
``pykraft user-scram`` and ``pykraft topics``. The controller's doors (``quorum/auth_http.py``)
take a TLS client certificate or HTTP Basic over TLS, so:

* ``security.protocol`` PLAINTEXT (the default): http, anonymous;
* ``SSL``: https, trusting ``ssl.truststore.*`` (PEM, KIP-651; or librdkafka's
  ``ssl.ca.location``), presenting
  ``ssl.keystore.*`` when given (mutual TLS);
* ``SASL_SSL``: https as above, and the SASL user's name and password (``sasl.jaas.config``'s
  ``username``/``password``, or librdkafka's ``sasl.username``/``sasl.password``) sent as HTTP
  Basic, which the controller checks against the user's SCRAM credentials.
* ``SASL_PLAINTEXT`` is refused: it would send a password in clear.

The password is kept out of every repr and error message.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from pykraft.broker.controller_client import ControllerClient
from pykraft.metadata.auth.jaas import JaasConfigError, parse_jaas_config
from pykraft.metadata.auth.tls_context import client_context
from pykraft.metadata.auth.tls_settings import TlsSettingsError, parse_tls_settings
from pykraft.properties import ConfigError, Properties

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT")


class CommandConfigError(ValueError):
    """The ``--command-config`` file cannot be used; the message names the file and property."""


@attrs.frozen
class ControllerConnection:
    """What ``ControllerClient`` needs: TLS (None: http) and HTTP Basic credentials."""

    ssl_context: ssl.SSLContext | None = None
    basic_auth: tuple[str, str] | None = attrs.field(default=None, repr=False)

    def client(self, urls: Sequence[str], deadline_s: float) -> ControllerClient:
        return ControllerClient(
            urls, deadline_s=deadline_s, ssl_context=self.ssl_context, basic_auth=self.basic_auth
        )


def load_command_config(path: Path | None) -> ControllerConnection:
    if path is None:
        return ControllerConnection()
    try:
        properties = Properties.load(path)
    except ConfigError as error:
        raise CommandConfigError(str(error)) from None
    return connection_of(properties.values, str(path))


def connection_of(values: Mapping[str, str], source: str) -> ControllerConnection:
    protocol = values.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise CommandConfigError(
            f"{source}: security.protocol={protocol} is not one of {', '.join(PROTOCOLS)}"
        )
    if protocol == "PLAINTEXT":
        return ControllerConnection()
    if protocol == "SASL_PLAINTEXT":
        raise CommandConfigError(
            f"{source}: security.protocol=SASL_PLAINTEXT would send the password in clear; "
            "the controllers take credentials over TLS only (SASL_SSL or SSL)"
        )
    if "ssl.ca.location" in values and "ssl.truststore.location" not in values:
        # librdkafka's name for a PEM trust store (its properties file works here too).
        values = {**values, "ssl.truststore.type": "PEM"} | {
            "ssl.truststore.location": values["ssl.ca.location"]
        }
    try:
        context = client_context(parse_tls_settings(values))
    except TlsSettingsError as error:
        raise CommandConfigError(f"{source}: {error}") from None
    basic = sasl_credentials(values, source) if protocol == "SASL_SSL" else None
    return ControllerConnection(context, basic)


def sasl_credentials(values: Mapping[str, str], source: str) -> tuple[str, str]:
    """The SASL user and password: librdkafka's ``sasl.username``/``sasl.password``, else the
    ``username``/``password`` options of Kafka's ``sasl.jaas.config``."""
    if "sasl.username" in values and "sasl.password" in values:
        return values["sasl.username"], values["sasl.password"]
    jaas = values.get("sasl.jaas.config")
    if jaas is None:
        raise CommandConfigError(
            f"{source}: security.protocol=SASL_SSL needs sasl.jaas.config (username and "
            "password) or sasl.username and sasl.password"
        )
    try:
        options = parse_jaas_config(jaas, "sasl.jaas.config").options
    except JaasConfigError as error:
        raise CommandConfigError(f"{source}: {error}") from None
    if "username" not in options or "password" not in options:
        raise CommandConfigError(f"{source}: sasl.jaas.config needs username and password")
    return options["username"], options["password"]
