"""A throwaway certificate authority and certificates for tests (``pykraft/certs.py`` makes them).

``make_tls_material(directory)`` writes ``ca.pem`` (the trust store), ``server.pem`` (key and
chain, SANs ``localhost`` and ``127.0.0.1``) and one ``<name>.pem`` key store per client
(subject ``CN=<name>,OU=test,O=pykraft``), and returns their paths and PEM text. Certificates are
valid for a day.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import attrs

from pykraft.certs import LOCAL_SANS, CertificateAuthority, KeyStore


@attrs.frozen
class TlsMaterial:
    ca_path: Path
    ca_pem: str
    server: KeyStore
    clients: dict[str, KeyStore]


def make_tls_material(
    directory: Path, clients: tuple[str, ...] = ("alice",), key_password: str | None = None
) -> TlsMaterial:
    """A CA, a server key store and one key store per client name, written to ``directory``;
    ``key_password`` encrypts every private key (``ssl.key.password``)."""
    now = datetime.datetime.now(datetime.UTC)
    ca = CertificateAuthority.create("pykraft test CA", now)
    ca_path = directory / "ca.pem"
    ca_path.write_text(ca.certificate_pem)
    return TlsMaterial(
        ca_path=ca_path,
        ca_pem=ca.certificate_pem,
        server=ca.issue(
            directory / "server.pem", "broker", now, sans=LOCAL_SANS, key_password=key_password
        ),
        clients={
            name: ca.issue(directory / f"{name}.pem", name, now, key_password=key_password)
            for name in clients
        },
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
