"""``--command-config`` for the tools that run a real Kafka client library: a Kafka client
properties file (``AdminClientConfig`` / ``ConsumerConfig`` names, as ``kafka-consumer-groups.sh``,
``kafka-configs.sh`` and ``kafka-get-offsets.sh`` take it) turned into librdkafka's settings
(confluent-kafka) and kafka-python's keyword arguments.

The TLS and SASL rules are ``admin_config``'s (one parser for every tool): ``security.protocol``
PLAINTEXT / SSL / SASL_PLAINTEXT / SASL_SSL; ``ssl.truststore.location`` (PEM) or librdkafka's
``ssl.ca.location``; ``ssl.keystore.location`` (PEM: key and chain in one file) as the client
certificate; ``sasl.mechanism`` (or librdkafka's ``sasl.mechanisms``) with ``sasl.jaas.config``'s
user (or ``sasl.username`` / ``sasl.password``). Only the properties both libraries understand are
carried over, so a Java client's file (``ssl.truststore.type``, ``sasl.jaas.config``) never
reaches librdkafka as an unknown key. The password stays out of every error message.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from pykraft.admin_config import client_security_of
from pykraft.command_config import CommandConfigError, sasl_credentials
from pykraft.properties import ConfigError, Properties

PEM = "PEM"
# Kafka's empty ssl.endpoint.identification.algorithm turns host name checks off;
# librdkafka says it with "none".
_NO_ENDPOINT_CHECK = "none"


def load_client_properties(path: Path | None) -> dict[str, str]:
    """The file's properties, checked as ``admin_config`` checks them (bad security settings
    raise ``CommandConfigError`` naming the file and the property)."""
    if path is None:
        return {}
    try:
        values = dict(Properties.load(path).values)
    except ConfigError as error:
        raise CommandConfigError(str(error)) from None
    client_security_of(values, str(path))
    return values


def _protocol(values: Mapping[str, str]) -> str:
    return values.get("security.protocol", "PLAINTEXT").upper()


def _mechanism(values: Mapping[str, str]) -> str:
    return values.get("sasl.mechanism", values.get("sasl.mechanisms", "GSSAPI")).upper()


def _ca_file(values: Mapping[str, str]) -> str | None:
    return values.get("ssl.ca.location", values.get("ssl.truststore.location"))


@attrs.frozen
class _ClientNames:
    """One client library's names for the settings carried over from Kafka's properties."""

    client_id: str
    security_protocol: str
    ca_file: str
    certificate_file: str
    key_file: str
    key_password: str
    sasl_mechanism: str
    sasl_username: str
    sasl_password: str


_LIBRDKAFKA = _ClientNames(
    client_id="client.id",
    security_protocol="security.protocol",
    ca_file="ssl.ca.location",
    certificate_file="ssl.certificate.location",
    key_file="ssl.key.location",
    key_password="ssl.key.password",
    sasl_mechanism="sasl.mechanisms",
    sasl_username="sasl.username",
    sasl_password="sasl.password",
)
_KAFKA_PYTHON = _ClientNames(
    client_id="client_id",
    security_protocol="security_protocol",
    ca_file="ssl_cafile",
    certificate_file="ssl_certfile",
    key_file="ssl_keyfile",
    key_password="ssl_password",
    sasl_mechanism="sasl_mechanism",
    sasl_username="sasl_plain_username",
    sasl_password="sasl_plain_password",
)


def _client_settings(values: Mapping[str, str], names: _ClientNames, source: str) -> dict[str, Any]:
    """The client id, TLS files and SASL credentials of ``values`` under ``names``."""
    config: dict[str, Any] = {}
    if "client.id" in values:
        config[names.client_id] = values["client.id"]
    protocol = _protocol(values)
    config[names.security_protocol] = protocol
    if protocol in ("SSL", "SASL_SSL"):
        ca_file = _ca_file(values)
        if ca_file:
            config[names.ca_file] = ca_file
        keystore = values.get("ssl.keystore.location")
        if keystore:
            config[names.certificate_file] = keystore
            config[names.key_file] = values.get("ssl.key.location", keystore)
        if "ssl.key.password" in values:
            config[names.key_password] = values["ssl.key.password"]
    if protocol.startswith("SASL_"):
        username, password = sasl_credentials(values, source)
        config[names.sasl_mechanism] = _mechanism(values)
        config[names.sasl_username] = username
        config[names.sasl_password] = password
    return config


def _uses_tls(values: Mapping[str, str]) -> bool:
    return _protocol(values) in ("SSL", "SASL_SSL")


def librdkafka_config(
    bootstrap_servers: str, values: Mapping[str, str], source: str = "--command-config"
) -> dict[str, Any]:
    """confluent-kafka's configuration for ``values`` (Kafka's client property names)."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers}
    config.update(_client_settings(values, _LIBRDKAFKA, source))
    algorithm = values.get("ssl.endpoint.identification.algorithm")
    if _uses_tls(values) and algorithm is not None:
        config["ssl.endpoint.identification.algorithm"] = algorithm or _NO_ENDPOINT_CHECK
    return config


def kafka_python_config(
    bootstrap_servers: str, values: Mapping[str, str], source: str = "--command-config"
) -> dict[str, Any]:
    """kafka-python's keyword arguments for ``values`` (Kafka's client property names)."""
    config: dict[str, Any] = {"bootstrap_servers": bootstrap_servers.split(",")}
    config.update(_client_settings(values, _KAFKA_PYTHON, source))
    if _uses_tls(values) and values.get("ssl.endpoint.identification.algorithm") == "":
        config["ssl_check_hostname"] = False
    return config
