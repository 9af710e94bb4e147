"""Kafka's ``ssl.*`` properties, parsed once for brokers and controllers (no I/O here).

A listener's TLS is configured as Kafka's: every ``ssl.*`` property may be overridden per
listener with the prefix ``listener.name.<listener name, lower case>.`` (Kafka's
``ListenerName.configPrefix`` and ``AbstractConfig.valuesWithPrefixOverride``: a prefixed value
wins over the unprefixed one, property by property). Key material is PEM only (KIP-651):

* ``ssl.keystore.type=PEM`` with either ``ssl.keystore.location`` — one file holding the
  private key and the certificate chain — or inline ``ssl.keystore.certificate.chain`` and
  ``ssl.keystore.key`` (never both, as Kafka's ``DefaultSslEngineFactory.PemStore`` refuses);
  ``ssl.key.password`` decrypts an encrypted PKCS#8 key;
* ``ssl.truststore.type=PEM`` with ``ssl.truststore.location`` or inline
  ``ssl.truststore.certificates``; with neither, the system's default trust anchors;
* ``ssl.client.auth`` ``none`` (Kafka's default) | ``requested`` | ``required``;
* ``ssl.enabled.protocols`` (Kafka's default ``TLSv1.2,TLSv1.3``);
* ``ssl.endpoint.identification.algorithm`` (``https``, Kafka's default since 2.0, checks the
  server's host name; empty turns it off);
* ``ssl.principal.mapping.rules`` (KIP-371; ``metadata.auth.principal`` applies them).

Secrets (``ssl.key.password``, an inline ``ssl.keystore.key``) are kept out of ``repr`` so no log
line can print them. Every bad value raises ``TlsSettingsError`` naming the property.
``metadata.auth.tls_context`` turns the settings into an ``ssl.SSLContext``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs

from pykraft.metadata.auth.principal import (
    DEFAULT_RULES,
    MappingRule,
    PrincipalError,
    parse_mapping_rules,
)

PEM = "PEM"
# Kafka's SslConfigs.DEFAULT_SSL_ENABLED_PROTOCOLS.
DEFAULT_ENABLED_PROTOCOLS = ("TLSv1.2", "TLSv1.3")
# Older versions Kafka would still name are refused: OpenSSL builds disable them anyway.
SUPPORTED_PROTOCOLS = ("TLSv1.2", "TLSv1.3")
# Kafka's SslConfigs.DEFAULT_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM.
DEFAULT_ENDPOINT_IDENTIFICATION_ALGORITHM = "https"


class TlsSettingsError(ValueError):
    """An ``ssl.*`` property is missing or invalid; ``property_name`` names it (with prefix)."""

    def __init__(self, property_name: str, message: str) -> None:
        super().__init__(f"invalid value for {property_name}: {message}")
        self.property_name = property_name


class ClientAuth(enum.Enum):
    """``ssl.client.auth`` (Kafka's ``SslClientAuth``)."""

    NONE = "none"
    REQUESTED = "requested"
    REQUIRED = "required"


@attrs.frozen
class PemKeyStore:
    """The key and chain: a file (``location``) or inline text (``chain`` and ``key``)."""

    location: str | None = None
    certificate_chain: str | None = None
    key: str | None = attrs.field(default=None, repr=False)
    key_password: str | None = attrs.field(default=None, repr=False)


@attrs.frozen
class PemTrustStore:
    """Trust anchors: a file, inline certificates, or (both None) the system defaults."""

    location: str | None = None
    certificates: str | None = None


@attrs.frozen(kw_only=True)
class TlsSettings:
    keystore: PemKeyStore | None = None
    truststore: PemTrustStore = PemTrustStore()
    client_auth: ClientAuth = ClientAuth.NONE
    enabled_protocols: tuple[str, ...] = DEFAULT_ENABLED_PROTOCOLS
    # "" or None: the peer's host name is not checked (Kafka's empty value).
    endpoint_identification_algorithm: str = DEFAULT_ENDPOINT_IDENTIFICATION_ALGORITHM
    principal_mapping_rules: tuple[MappingRule, ...] = attrs.field(
        factory=lambda: parse_mapping_rules(",".join(DEFAULT_RULES))
    )

    @property
    def check_hostname(self) -> bool:
        return self.endpoint_identification_algorithm.lower() == "https"


def listener_prefix(listener_name: str) -> str:
    """Kafka's ``ListenerName.configPrefix``: ``listener.name.<name in lower case>.``."""
    return f"listener.name.{listener_name.lower()}."


class _Properties:
    """Looks ``name`` up with the prefix first, and remembers which spelling it found."""

    def __init__(self, values: Mapping[str, str], prefix: str) -> None:
        self._values = values
        self._prefix = prefix

    def spelled(self, name: str) -> str:
        prefixed = self._prefix + name
        return prefixed if self._prefix and prefixed in self._values else name

    def get(self, name: str) -> str | None:
        raw = self._values.get(self.spelled(name))
        if raw is None:
            return None
        stripped = raw.strip()
        return stripped or None


def parse_tls_settings(values: Mapping[str, str], prefix: str = "") -> TlsSettings:
    """``ssl.*`` properties (``prefix`` e.g. ``listener.name.ssl.``) -> ``TlsSettings``."""
    properties = _Properties(values, prefix)
    return TlsSettings(
        keystore=_keystore(properties),
        truststore=_truststore(properties),
        client_auth=_client_auth(properties),
        enabled_protocols=_enabled_protocols(properties),
        endpoint_identification_algorithm=_endpoint_identification(values, properties),
        principal_mapping_rules=_mapping_rules(properties),
    )


def _store_type(properties: _Properties, name: str) -> None:
    store_type = properties.get(name)
    if store_type is not None and store_type.upper() != PEM:
        raise TlsSettingsError(
            properties.spelled(name),
            f"{store_type!r}: pykraft reads PEM key material only (KIP-651); set {name}=PEM",
        )


def _keystore(properties: _Properties) -> PemKeyStore | None:
    _store_type(properties, "ssl.keystore.type")
    location = properties.get("ssl.keystore.location")
    chain = properties.get("ssl.keystore.certificate.chain")
    key = properties.get("ssl.keystore.key")
    password = properties.get("ssl.key.password")
    if location is not None and (chain is not None or key is not None):
        raise TlsSettingsError(
            properties.spelled("ssl.keystore.location"),
            "set either a key store file or inline ssl.keystore.certificate.chain and "
            "ssl.keystore.key, not both",
        )
    if (chain is None) != (key is None):
        missing = "ssl.keystore.key" if key is None else "ssl.keystore.certificate.chain"
        raise TlsSettingsError(
            properties.spelled(missing),
            "missing; an inline PEM key store needs both the certificate chain and the key",
        )
    if chain is not None:
        _check_pem(properties, "ssl.keystore.certificate.chain", chain, "CERTIFICATE")
        assert key is not None
        _check_pem(properties, "ssl.keystore.key", key, "PRIVATE KEY")
    if location is None and chain is None:
        if password is not None:
            raise TlsSettingsError(
                properties.spelled("ssl.key.password"), "set, but no key store is configured"
            )
        return None
    return PemKeyStore(location, chain, key, password)


def _truststore(properties: _Properties) -> PemTrustStore:
    _store_type(properties, "ssl.truststore.type")
    location = properties.get("ssl.truststore.location")
    certificates = properties.get("ssl.truststore.certificates")
    if location is not None and certificates is not None:
        raise TlsSettingsError(
            properties.spelled("ssl.truststore.location"),
            "set either a trust store file or inline ssl.truststore.certificates, not both",
        )
    if certificates is not None:
        _check_pem(properties, "ssl.truststore.certificates", certificates, "CERTIFICATE")
    return PemTrustStore(location, certificates)


def _check_pem(properties: _Properties, name: str, text: str, label: str) -> None:
    """Inline PEM must hold at least one ``-----BEGIN ...<label>-----`` block (the value itself
    is never echoed: it may be a key)."""
    if "-----BEGIN " not in text or f"{label}-----" not in text:
        raise TlsSettingsError(
            properties.spelled(name), f"not PEM: expected a -----BEGIN ...{label}----- block"
        )


def _client_auth(properties: _Properties) -> ClientAuth:
    raw = properties.get("ssl.client.auth")
    if raw is None:
        return ClientAuth.NONE
    try:
        return ClientAuth(raw.lower())
    except ValueError:
        raise TlsSettingsError(
            properties.spelled("ssl.client.auth"),
            f"{raw!r} is not one of required, requested, none",
        ) from None


def _enabled_protocols(properties: _Properties) -> tuple[str, ...]:
    raw = properties.get("ssl.enabled.protocols")
    if raw is None:
        return DEFAULT_ENABLED_PROTOCOLS
    protocols = tuple(item.strip() for item in raw.split(",") if item.strip())
    unknown = [protocol for protocol in protocols if protocol not in SUPPORTED_PROTOCOLS]
    if unknown or not protocols:
        raise TlsSettingsError(
            properties.spelled("ssl.enabled.protocols"),
            f"{raw!r}: list one or more of {', '.join(SUPPORTED_PROTOCOLS)}",
        )
    return protocols


def _endpoint_identification(values: Mapping[str, str], properties: _Properties) -> str:
    name = "ssl.endpoint.identification.algorithm"
    if properties.spelled(name) not in values:
        return DEFAULT_ENDPOINT_IDENTIFICATION_ALGORITHM
    raw = (properties.get(name) or "").lower()
    if raw not in ("", "https"):
        raise TlsSettingsError(properties.spelled(name), f"{raw!r}: use https or leave it empty")
    return raw


def _mapping_rules(properties: _Properties) -> tuple[MappingRule, ...]:
    raw = properties.get("ssl.principal.mapping.rules")
    try:
        return parse_mapping_rules(raw or "DEFAULT")
    except PrincipalError as error:
        raise TlsSettingsError(
            properties.spelled("ssl.principal.mapping.rules"), str(error)
        ) from None
