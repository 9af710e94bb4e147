"""``client_properties``: a Kafka client properties file (``--command-config``) as librdkafka's
and kafka-python's settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.client_properties import (
    kafka_python_config,
    librdkafka_config,
    load_client_properties,
)
from pykraft.command_config import CommandConfigError

JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="alice" password="alice-secret";'
)
JAVA_SASL_SSL = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.jaas.config": JAAS,
    "ssl.truststore.type": "PEM",
    "ssl.truststore.location": "/tls/ca.pem",
    "client.id": "ops",
}


def test_plaintext_by_default() -> None:
    assert librdkafka_config("h:1", {}) == {
        "bootstrap.servers": "h:1",
        "security.protocol": "PLAINTEXT",
    }
    assert kafka_python_config("h:1,h:2", {}) == {
        "bootstrap_servers": ["h:1", "h:2"],
        "security_protocol": "PLAINTEXT",
    }


def test_a_java_clients_file_becomes_librdkafkas_names() -> None:
    assert librdkafka_config("h:1", JAVA_SASL_SSL) == {
        "bootstrap.servers": "h:1",
        "client.id": "ops",
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": "/tls/ca.pem",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }


def test_a_java_clients_file_becomes_kafka_pythons_arguments() -> None:
    config = kafka_python_config("h:1", {**JAVA_SASL_SSL, "ssl.keystore.location": "/tls/me.pem"})
    assert config["ssl_cafile"] == "/tls/ca.pem"
    assert config["ssl_certfile"] == config["ssl_keyfile"] == "/tls/me.pem"
    assert (config["sasl_mechanism"], config["sasl_plain_username"]) == ("SCRAM-SHA-512", "alice")


def test_empty_endpoint_identification_turns_host_checks_off() -> None:
    values = {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": ""}
    assert librdkafka_config("h:1", values)["ssl.endpoint.identification.algorithm"] == "none"
    assert kafka_python_config("h:1", values)["ssl_check_hostname"] is False


def test_load_checks_security_and_hides_the_password(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n")
    with pytest.raises(CommandConfigError, match=r"sasl\.mechanism=GSSAPI is not supported"):
        load_client_properties(path)
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.username=bob\nsasl.password=hunter2\n"
    )
    assert load_client_properties(path)["sasl.username"] == "bob"
    assert load_client_properties(None) == {}


def test_tls_settings_are_carried_only_over_tls() -> None:
    # SASL_PLAINTEXT: credentials, but no TLS file, password or host check reaches the client.
    values = {
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "plain",
        "sasl.username": "bob",
        "sasl.password": "bob-secret",
        "ssl.truststore.location": "/tls/ca.pem",
        "ssl.keystore.location": "/tls/me.pem",
        "ssl.key.password": "key-secret",
        "ssl.endpoint.identification.algorithm": "",
    }
    assert librdkafka_config("h:1", values) == {
        "bootstrap.servers": "h:1",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": "bob",
        "sasl.password": "bob-secret",
    }
    assert kafka_python_config("h:1", values) == {
        "bootstrap_servers": ["h:1"],
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "bob",
        "sasl_plain_password": "bob-secret",
    }


def test_a_separate_key_file_and_its_password_over_ssl() -> None:
    values = {
        "security.protocol": "SSL",
        "ssl.keystore.location": "/tls/chain.pem",
        "ssl.key.location": "/tls/key.pem",
        "ssl.key.password": "key-secret",
        "ssl.endpoint.identification.algorithm": "https",
    }
    assert librdkafka_config("h:1", values) == {
        "bootstrap.servers": "h:1",
        "security.protocol": "SSL",
        "ssl.certificate.location": "/tls/chain.pem",
        "ssl.key.location": "/tls/key.pem",
        "ssl.key.password": "key-secret",
        "ssl.endpoint.identification.algorithm": "https",
    }
    assert kafka_python_config("h:1", values) == {
        "bootstrap_servers": ["h:1"],
        "security_protocol": "SSL",
        "ssl_certfile": "/tls/chain.pem",
        "ssl_keyfile": "/tls/key.pem",
        "ssl_password": "key-secret",
    }
