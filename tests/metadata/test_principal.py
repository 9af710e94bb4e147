"""KafkaPrincipal parsing and the TLS principal: the cases of Kafka's SslPrincipalMapperTest."""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from pykraft.metadata.auth.principal import (
    ANONYMOUS,
    KafkaPrincipal,
    PrincipalError,
    map_dn,
    parse_mapping_rules,
    principal_from_certificate,
    user,
)


@pytest.mark.parametrize(
    ("rules", "dn", "expected"),
    [
        ("DEFAULT", "CN=Duke,OU=ServiceUsers,O=Org,C=US", "CN=Duke,OU=ServiceUsers,O=Org,C=US"),
        (r"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "CN=Duke,OU=ServiceUsers,O=Org,C=US", "Duke"),
        (r"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L", "CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
        (r"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/U", "CN=Duke,OU=ServiceUsers,O=Org,C=US", "DUKE"),
        (r"RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$2/, DEFAULT", "CN=Duke,OU=SU,O=Org", "Duke@SU"),
        (
            r"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/, DEFAULT",
            "CN=Duke,OU=Other,O=Org",
            "CN=Duke,OU=Other,O=Org",
        ),
        (r"RULE:^CN=([^,]*)/$1/", "CN=a/b", "a/b"),
    ],
)
def test_mapping_rules_as_kafka_applies_them(rules: str, dn: str, expected: str) -> None:
    assert map_dn(dn, parse_mapping_rules(rules)) == expected


def test_no_rule_matching_refuses_the_dn() -> None:
    with pytest.raises(PrincipalError, match="No rules apply to CN=x"):
        map_dn("CN=x", parse_mapping_rules(r"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/"))


@pytest.mark.parametrize("bad", ["RULE:^CN=(.*?)", "RULE:(/x/", "NOPE", "DEFAULT,,"])
def test_a_malformed_rule_is_refused_with_a_clear_error(bad: str) -> None:
    with pytest.raises(PrincipalError, match=r"ssl\.principal\.mapping\.rules"):
        parse_mapping_rules(bad)


def test_principal_text_round_trips_and_refuses_bad_text() -> None:
    assert KafkaPrincipal.parse("User:alice") == user("alice")
    assert str(user("CN=a,O=b")) == "User:CN=a,O=b"
    assert KafkaPrincipal.parse("User:CN=a:b") == user("CN=a:b")
    for bad in ("alice", ":alice", "User:"):
        with pytest.raises(PrincipalError):
            KafkaPrincipal.parse(bad)


def _certificate(common_name: str) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Org"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "ServiceUsers"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.DER)


def test_a_certificate_subject_is_the_rfc2253_dn_most_specific_first() -> None:
    der = _certificate("Duke")
    default = parse_mapping_rules("DEFAULT")
    assert principal_from_certificate(der, default) == user("CN=Duke,OU=ServiceUsers,O=Org,C=US")
    mapped = parse_mapping_rules(r"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L")
    assert principal_from_certificate(der, mapped) == user("duke")
    assert principal_from_certificate(None, default) == ANONYMOUS
    with pytest.raises(PrincipalError, match="cannot be read"):
        principal_from_certificate(b"not a certificate", default)
