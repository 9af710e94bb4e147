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


def librdkafka_config(
    bootstrap_servers: str, values: Mapping[str, str], source: str = "--command-config"
) -> dict[str, Any]:
    """confluent-kafka's configuration for ``values`` (Kafka's client property names)."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers}
    if "client.id" in values:
        config["client.id"] = values["client.id"]
    protocol = _protocol(values)
    config["security.protocol"] = protocol
    if protocol in ("SSL", "SASL_SSL"):
        ca_file = _ca_file(values)
        if ca_file:
            config["ssl.ca.location"] = ca_file
        keystore = values.get("ssl.keystore.location")
        if keystore:
            config["ssl.certificate.location"] = keystore
            config["ssl.key.location"] = values.get("ssl.key.location", keystore)
        if "ssl.key.password" in values:
            config["ssl.key.password"] = values["ssl.key.password"]
        algorithm = values.get("ssl.endpoint.identification.algorithm")
        if algorithm is not None:
            config["ssl.endpoint.identification.algorithm"] = algorithm or _NO_ENDPOINT_CHECK
    if protocol.startswith("SASL_"):
        username, password = sasl_credentials(values, source)
        config["sasl.mechanisms"] = _mechanism(values)
        config["sasl.username"] = username
        config["sasl.password"] = password
    return config


def kafka_python_config(
    bootstrap_servers: str, values: Mapping[str, str], source: str = "--command-config"
) -> dict[str, Any]:
    """kafka-python's keyword arguments for ``values`` (Kafka's client property names)."""
    config: dict[str, Any] = {"bootstrap_servers": bootstrap_servers.split(",")}
    if "client.id" in values:
        config["client_id"] = values["client.id"]
    protocol = _protocol(values)
    config["security_protocol"] = protocol
    if protocol in ("SSL", "SASL_SSL"):
        ca_file = _ca_file(values)
        if ca_file:
            config["ssl_cafile"] = ca_file
        keystore = values.get("ssl.keystore.location")
        if keystore:
            config["ssl_certfile"] = keystore
            config["ssl_keyfile"] = values.get("ssl.key.location", keystore)
        if "ssl.key.password" in values:
            config["ssl_password"] = values["ssl.key.password"]
        if values.get("ssl.endpoint.identification.algorithm") == "":
            config["ssl_check_hostname"] = False
    if protocol.startswith("SASL_"):
        username, password = sasl_credentials(values, source)
        config["sasl_mechanism"] = _mechanism(values)
        config["sasl_plain_username"] = username
        config["sasl_plain_password"] = password
    return config
