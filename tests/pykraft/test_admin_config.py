"""``pykraft.admin_config``: an admin client's ``--command-config`` as the security and timeouts
of the tool's Kafka connections to brokers — every ``security.protocol`` Kafka has (SASL over
PLAINTEXT included, unlike the controllers' HTTP doors), Kafka's and librdkafka's property names,
Kafka's defaults, and clear errors that never repeat a password."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.admin_config import (
    DEFAULT_API_TIMEOUT_MS_DEFAULT,
    REQUEST_TIMEOUT_MS_DEFAULT,
    RETRY_BACKOFF_MS_DEFAULT,
    AdminConfig,
    admin_config_of,
    client_security_of,
    load_admin_config,
)
from pykraft.command_config import CommandConfigError
from pykraft.protocol.sasl_client import SaslClientCredentials
from tests.tls_material import make_tls_material

SECRET = "alice-secret"
JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    f'username="alice" password="{SECRET}";'
)


def test_no_command_config_is_plaintext_with_kafkas_admin_defaults() -> None:
    config = load_admin_config(None)
    assert config == AdminConfig()
    assert config.security.ssl_context is None and config.security.sasl is None
    assert (config.request_timeout_ms, config.default_api_timeout_ms, config.retry_backoff_ms) == (
        30_000,
        60_000,
        100,
    )
    assert (REQUEST_TIMEOUT_MS_DEFAULT, DEFAULT_API_TIMEOUT_MS_DEFAULT) == (30_000, 60_000)
    assert RETRY_BACKOFF_MS_DEFAULT == 100


def test_sasl_plaintext_with_scram_from_the_jaas_config() -> None:
    security = client_security_of(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": JAAS,
        },
        "client.properties",
    )
    assert security.ssl_context is None
    assert security.sasl == SaslClientCredentials("SCRAM-SHA-512", "alice", SECRET)
    assert SECRET not in repr(security)


def test_sasl_ssl_in_librdkafkas_names(tmp_path: Path) -> None:
    """``pykraft dev --secure``'s librdkafka properties file works as it is."""
    tls = make_tls_material(tmp_path)
    security = client_security_of(
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": SECRET,
            "ssl.ca.location": str(tls.ca_path),
        },
        "client.properties",
    )
    assert security.ssl_context is not None
    assert security.sasl == SaslClientCredentials("PLAIN", "alice", SECRET)


def test_ssl_with_a_key_store_presents_the_client_certificate(tmp_path: Path) -> None:
    tls = make_tls_material(tmp_path, clients=("admin",))
    security = client_security_of(
        {
            "security.protocol": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(tls.clients["admin"].path),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(tls.ca_path),
        },
        "admin.properties",
    )
    assert security.ssl_context is not None and security.sasl is None


def test_timeouts_and_client_id_are_read_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "admin.properties"
    path.write_text(
        "client.id=ops\nrequest.timeout.ms=5000\ndefault.api.timeout.ms=9000\n"
        "retry.backoff.ms=250\n"
    )
    config = load_admin_config(path)
    assert (config.client_id, config.request_timeout_ms) == ("ops", 5000)
    assert (config.default_api_timeout_ms, config.retry_backoff_ms) == (9000, 250)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"security.protocol": "KERBEROS"}, "security.protocol=KERBEROS is not one of"),
        # Kafka's default mechanism is GSSAPI, which no pykraft listener serves.
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": JAAS},
            "sasl.mechanism=GSSAPI is not supported",
        ),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "needs sasl.jaas"),
        (
            {"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent/ca.pem"},
            "ssl.truststore.location",
        ),
        ({"request.timeout.ms": "soon"}, "request.timeout.ms=soon is not a positive"),
        ({"default.api.timeout.ms": "0"}, "default.api.timeout.ms=0 is not a positive"),
        ({"retry.backoff.ms": "-5"}, "retry.backoff.ms=-5 is not a positive"),
    ],
)
def test_unusable_command_configs_are_clear_errors(values: dict[str, str], message: str) -> None:
    with pytest.raises(CommandConfigError) as error:
        admin_config_of(values, "client.properties")
    assert message in str(error.value) and SECRET not in str(error.value)
    assert str(error.value).startswith("client.properties: ")


def test_a_missing_command_config_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CommandConfigError, match="cannot read config file"):
        load_admin_config(tmp_path / "missing.properties")
