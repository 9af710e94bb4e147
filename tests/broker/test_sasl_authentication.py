"""Each listener's authentication and the broker's inter-broker client security, built from
its properties (throwaway CA from tests/tls_material.py; no sockets)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.broker.config import BrokerConfig
from pykraft.broker.sasl_authentication import (
    inter_broker_client_security,
    listener_authentication,
)
from pykraft.broker.sasl_mechanisms import StaticScramCredentials
from pykraft.metadata.auth.tls_settings import TlsSettingsError
from pykraft.protocol.sasl_client import SaslClientCredentials
from tests.tls_material import make_tls_material, secure_listener_properties

BASE = {"node.id": "1", "controller.quorum.bootstrap.servers": "127.0.0.1:19093"}
NO_USERS = StaticScramCredentials({})


def secure_config(tmp_path: Path, **extra: str) -> BrokerConfig:
    material = make_tls_material(tmp_path)
    properties = secure_listener_properties(material, 9092, 9093, 9094, 9095)
    return BrokerConfig.from_properties({**BASE, **properties, **extra})


def test_each_listener_gets_its_tls_and_sasl(tmp_path: Path) -> None:
    config = secure_config(tmp_path)
    security = config.listener_security
    plaintext = listener_authentication(security["PLAINTEXT"], NO_USERS)
    assert plaintext.ssl_context is None and plaintext.new_sasl_authenticator is None
    tls = listener_authentication(security["SSL"], NO_USERS)
    assert tls.ssl_context is not None and tls.new_sasl_authenticator is None
    sasl_ssl = listener_authentication(security["SASL_SSL"], NO_USERS)
    assert sasl_ssl.ssl_context is not None and sasl_ssl.new_sasl_authenticator is not None
    authenticator = sasl_ssl.new_sasl_authenticator()
    assert authenticator.enabled_mechanisms == ["PLAIN", "SCRAM-SHA-512"]
    # A fresh authenticator (and SASL state) per connection.
    assert sasl_ssl.new_sasl_authenticator() is not authenticator


def test_a_missing_key_store_file_names_the_property(tmp_path: Path) -> None:
    config = secure_config(
        tmp_path, **{"listener.name.ssl.ssl.keystore.location": str(tmp_path / "gone.pem")}
    )
    with pytest.raises(TlsSettingsError) as raised:
        listener_authentication(config.listener_security["SSL"], NO_USERS)
    assert raised.value.property_name == "listener.name.ssl.ssl.keystore.location"


def test_inter_broker_client_uses_the_listeners_tls_and_the_brokers_credentials(
    tmp_path: Path,
) -> None:
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="broker" password="broker-secret";'
    )
    config = secure_config(
        tmp_path,
        **{
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas,
        },
    )
    security = inter_broker_client_security(config)
    assert security.ssl_context is not None and security.ssl_context.check_hostname
    assert security.sasl == SaslClientCredentials("SCRAM-SHA-512", "broker", "broker-secret")


def test_plaintext_inter_broker_client_has_no_security(tmp_path: Path) -> None:
    security = inter_broker_client_security(secure_config(tmp_path))
    assert security.ssl_context is None and security.sasl is None
