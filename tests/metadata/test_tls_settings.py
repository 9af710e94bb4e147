"""Kafka's ssl.* properties (KIP-651 PEM stores, listener prefixes) -> TlsSettings."""

from __future__ import annotations

import pytest

from pykraft.metadata.auth.tls_settings import (
    DEFAULT_ENABLED_PROTOCOLS,
    ClientAuth,
    PemKeyStore,
    PemTrustStore,
    TlsSettingsError,
    listener_prefix,
    parse_tls_settings,
)

CERT = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"


def test_defaults_are_kafkas() -> None:
    settings = parse_tls_settings({})
    assert settings.keystore is None
    assert settings.truststore == PemTrustStore()
    assert settings.client_auth is ClientAuth.NONE
    assert settings.enabled_protocols == DEFAULT_ENABLED_PROTOCOLS == ("TLSv1.2", "TLSv1.3")
    assert settings.check_hostname  # ssl.endpoint.identification.algorithm=https


def test_listener_prefix_overrides_property_by_property() -> None:
    # AbstractConfig.valuesWithPrefixOverride: the prefixed value wins, others fall through.
    values = {
        "ssl.keystore.location": "/base.pem",
        "ssl.client.auth": "requested",
        "listener.name.internal.ssl.client.auth": "required",
    }
    settings = parse_tls_settings(values, listener_prefix("INTERNAL"))
    assert settings.client_auth is ClientAuth.REQUIRED
    assert settings.keystore == PemKeyStore(location="/base.pem")


def test_inline_pem_key_store_and_trust_store() -> None:
    settings = parse_tls_settings(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": CERT,
            "ssl.keystore.key": KEY,
            "ssl.key.password": "secret",
            "ssl.truststore.type": "pem",
            "ssl.truststore.certificates": CERT,
        }
    )
    assert settings.keystore == PemKeyStore(None, CERT.strip(), KEY.strip(), "secret")
    assert settings.truststore == PemTrustStore(None, CERT.strip())


def test_secrets_never_in_repr() -> None:
    settings = parse_tls_settings(
        {
            "ssl.keystore.certificate.chain": CERT,
            "ssl.keystore.key": KEY,
            "ssl.key.password": "hunter2",
        }
    )
    assert "hunter2" not in repr(settings)
    assert "PRIVATE KEY" not in repr(settings)


def test_mapping_rules_apply() -> None:
    settings = parse_tls_settings(
        {"ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=.*$/$1/L,DEFAULT"}
    )
    rules = settings.principal_mapping_rules
    assert [rule.apply("CN=Alice,OU=eng,O=acme") for rule in rules[:1]] == ["alice"]


def test_endpoint_identification_may_be_turned_off() -> None:
    settings = parse_tls_settings({"ssl.endpoint.identification.algorithm": ""})
    assert not settings.check_hostname


@pytest.mark.parametrize(
    ("values", "prefix", "property_name"),
    [
        ({"ssl.keystore.type": "JKS"}, "", "ssl.keystore.type"),
        ({"listener.name.ssl.ssl.truststore.type": "PKCS12"}, "listener.name.ssl.",
         "listener.name.ssl.ssl.truststore.type"),
        ({"ssl.keystore.location": "/k.pem", "ssl.keystore.key": KEY}, "",
         "ssl.keystore.location"),
        ({"ssl.keystore.key": KEY}, "", "ssl.keystore.certificate.chain"),
        ({"ssl.keystore.certificate.chain": CERT}, "", "ssl.keystore.key"),
        ({"ssl.keystore.certificate.chain": CERT, "ssl.keystore.key": "not pem"}, "",
         "ssl.keystore.key"),
        ({"ssl.truststore.certificates": "garbage"}, "", "ssl.truststore.certificates"),
        ({"ssl.truststore.location": "/ca.pem", "ssl.truststore.certificates": CERT}, "",
         "ssl.truststore.location"),
        ({"ssl.key.password": "x"}, "", "ssl.key.password"),
        ({"ssl.client.auth": "maybe"}, "", "ssl.client.auth"),
        ({"ssl.enabled.protocols": "SSLv3"}, "", "ssl.enabled.protocols"),
        ({"ssl.enabled.protocols": " , "}, "", "ssl.enabled.protocols"),
        ({"ssl.endpoint.identification.algorithm": "ldap"}, "",
         "ssl.endpoint.identification.algorithm"),
        ({"listener.name.x.ssl.principal.mapping.rules": "RULE:("}, "listener.name.x.",
         "listener.name.x.ssl.principal.mapping.rules"),
    ],
)  # fmt: skip
def test_bad_values_name_the_property(
    values: dict[str, str], prefix: str, property_name: str
) -> None:
    with pytest.raises(TlsSettingsError) as raised:
        parse_tls_settings(values, prefix)
    assert raised.value.property_name == property_name
    assert "hunter2" not in str(raised.value)


def test_key_text_is_not_echoed_in_errors() -> None:
    with pytest.raises(TlsSettingsError) as raised:
        parse_tls_settings(
            {"ssl.keystore.certificate.chain": CERT, "ssl.keystore.key": "hunter2-not-pem"}
        )
    assert "hunter2" not in str(raised.value)
