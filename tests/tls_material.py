"""A throwaway certificate authority and certificates for tests, made with ``cryptography``.

``make_tls_material(directory)`` writes ``ca.pem`` (the trust store), ``server.pem`` (key and
chain, SANs ``localhost`` and ``127.0.0.1``) and one ``<name>.pem`` key store per client
(subject ``CN=<name>,OU=test,O=pykraft``), and returns their paths and PEM text. EC P-256 keys
keep generation fast; certificates are valid for a day.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@attrs.frozen
class KeyStore:
    path: Path
    certificate_pem: str
    key_pem: str


@attrs.frozen
class TlsMaterial:
    ca_path: Path
    ca_pem: str
    server: KeyStore
    clients: dict[str, KeyStore]


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "pykraft"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "test"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _certificate(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool,
    sans: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(certificate: x509.Certificate) -> str:
    return certificate.public_bytes(serialization.Encoding.PEM).decode()


def _key_pem(key: ec.EllipticCurvePrivateKey, password: bytes | None = None) -> str:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password)
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    ).decode()


def make_tls_material(
    directory: Path, clients: tuple[str, ...] = ("alice",), key_password: str | None = None
) -> TlsMaterial:
    """A CA, a server key store and one key store per client name, written to ``directory``;
    ``key_password`` encrypts every private key (``ssl.key.password``)."""
    password = key_password.encode() if key_password else None
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("pykraft test CA")
    ca = _certificate(ca_name, ca_key, ca_name, ca_key, ca=True)
    ca_path = directory / "ca.pem"
    ca_path.write_text(_pem(ca))

    def key_store(file_name: str, common_name: str, sans: list[x509.GeneralName]) -> KeyStore:
        key = ec.generate_private_key(ec.SECP256R1())
        certificate = _pem(
            _certificate(_name(common_name), key, ca_name, ca_key, ca=False, sans=sans)
        )
        key_pem = _key_pem(key, password)
        path = directory / file_name
        path.write_text(key_pem + certificate)
        return KeyStore(path, certificate, key_pem)

    server_sans: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    return TlsMaterial(
        ca_path=ca_path,
        ca_pem=_pem(ca),
        server=key_store("server.pem", "broker", server_sans),
        clients={name: key_store(f"{name}.pem", name, []) for name in clients},
    )


PLAIN_USERS = {"alice": "alice-secret", "admin": "admin-secret"}
SCRAM_USERS = {"bob": "bob-secret"}


def _jaas(module: str, users: dict[str, str]) -> str:
    options = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return f"org.apache.kafka.common.security.{module} required {options};"


def secure_listener_properties(
    material: TlsMaterial, kafka_port: int, sasl_port: int, ssl_port: int, sasl_ssl_port: int
) -> dict[str, str]:
    """Broker properties for four listeners: PLAINTEXT (kept for the suites' checks and the
    inter-broker listener), SASL_PLAINTEXT and SASL_SSL with PLAIN and SCRAM-SHA-512, and SSL
    requiring client certificates (mutual TLS)."""
    properties = {
        "listeners": f"PLAINTEXT://127.0.0.1:{kafka_port},"
        f"SASL_PLAINTEXT://127.0.0.1:{sasl_port},SSL://127.0.0.1:{ssl_port},"
        f"SASL_SSL://127.0.0.1:{sasl_ssl_port}",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(material.server.path),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(material.ca_path),
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/,DEFAULT",
    }
    for listener in ("sasl_plaintext", "sasl_ssl"):
        properties[f"listener.name.{listener}.plain.sasl.jaas.config"] = _jaas(
            "plain.PlainLoginModule", PLAIN_USERS
        )
        properties[f"listener.name.{listener}.scram-sha-512.sasl.jaas.config"] = _jaas(
            "scram.ScramLoginModule", SCRAM_USERS
        )
    return properties
