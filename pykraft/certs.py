"""A throwaway certificate authority and the PEM key stores it signs, made with ``cryptography``.

Why shipped code: ``pykraft dev --secure`` needs a CA, a certificate per node and one for the
admin so that trying TLS costs one command, and the tests need the same material; one generator
serves both (``tests/tls_material.py`` builds on it). The files are Kafka's PEM stores (KIP-651):
a trust store holding the CA certificate (``ssl.truststore.type=PEM``) and key stores holding a
PKCS#8 private key followed by its certificate (``ssl.keystore.type=PEM``,
``ssl.keystore.location``), optionally encrypted with ``ssl.key.password``.

Subjects are ``CN=<name>,OU=<unit>,O=pykraft``, so Kafka's mapping rule
``RULE:^CN=([^,]+),.*$/$1/`` turns a certificate into ``User:<name>`` (KIP-371,
``metadata/auth/principal.py``). EC P-256 keys keep generation fast. Not a production PKI: no
revocation, no intermediate, and the CA key lives next to what it signed.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

# Certificates start this far in the past, so a clock a little behind still accepts them.
CLOCK_SKEW = datetime.timedelta(minutes=5)
# The SANs of a server certificate valid on this machine only (pykraft dev listens on 127.0.0.1).
LOCAL_SANS = ("localhost", "127.0.0.1")
PRIVATE_FILE_MODE = 0o600


@attrs.frozen
class KeyStore:
    """One PEM key store as written: the file, and its parts as text."""

    path: Path
    certificate_pem: str
    key_pem: str = attrs.field(repr=False)


def _name(common_name: str, unit: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "pykraft"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _general_name(text: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(text))
    except ValueError:
        return x509.DNSName(text)


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None) -> str:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    ).decode()


def write_private(path: Path, text: str) -> None:
    """Write ``text`` readable by the owner only (mode 0600 from the first byte)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
    path.chmod(PRIVATE_FILE_MODE)


@attrs.frozen
class CertificateAuthority:
    """A self-signed CA that issues key stores; ``now`` is passed in (no clock here)."""

    name: x509.Name
    key: ec.EllipticCurvePrivateKey = attrs.field(repr=False)
    certificate: x509.Certificate
    unit: str
    validity: datetime.timedelta

    @classmethod
    def create(
        cls,
        common_name: str,
        now: datetime.datetime,
        *,
        unit: str = "test",
        validity: datetime.timedelta = datetime.timedelta(days=1),
    ) -> CertificateAuthority:
        key = ec.generate_private_key(ec.SECP256R1())
        name = _name(common_name, unit)
        certificate = _sign(name, key.public_key(), name, key, now, validity, ca=True, sans=())
        return cls(name, key, certificate, unit, validity)

    @classmethod
    def load(cls, certificate_pem: bytes, key_pem: bytes, unit: str) -> CertificateAuthority:
        """A CA written earlier by ``write`` (``pykraft dev --secure`` run again)."""
        certificate = x509.load_pem_x509_certificate(certificate_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey), "certs.py only writes EC keys"
        validity = certificate.not_valid_after_utc - certificate.not_valid_before_utc
        return cls(certificate.subject, key, certificate, unit, validity - CLOCK_SKEW)

    @property
    def certificate_pem(self) -> str:
        return self.certificate.public_bytes(serialization.Encoding.PEM).decode()

    def write(self, trust_store: Path, key_file: Path) -> None:
        """The trust store (the CA certificate, public) and the CA's key (0600)."""
        trust_store.write_text(self.certificate_pem, encoding="utf-8")
        write_private(key_file, _key_pem(self.key, None))

    def issue(
        self,
        path: Path,
        common_name: str,
        now: datetime.datetime,
        *,
        sans: tuple[str, ...] = (),
        key_password: str | None = None,
    ) -> KeyStore:
        """A fresh key and its certificate for ``CN=<common_name>``, written to ``path`` (0600)
        as one PEM key store; ``key_password`` encrypts the key (``ssl.key.password``)."""
        key = ec.generate_private_key(ec.SECP256R1())
        certificate = _sign(
            _name(common_name, self.unit),
            key.public_key(),
            self.name,
            self.key,
            now,
            self.validity,
            ca=False,
            sans=sans,
        )
        certificate_pem = certificate.public_bytes(serialization.Encoding.PEM).decode()
        key_pem = _key_pem(key, key_password)
        write_private(path, key_pem + certificate_pem)
        return KeyStore(path, certificate_pem, key_pem)


def _sign(
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    now: datetime.datetime,
    validity: datetime.timedelta,
    *,
    ca: bool,
    sans: tuple[str, ...],
) -> x509.Certificate:
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if sans:
        names = [_general_name(text) for text in sans]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())
