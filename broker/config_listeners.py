"""The broker's listeners and their security, parsed from Kafka's properties: ``listeners``,
``advertised.listeners``, ``listener.security.protocol.map``, ``inter.broker.listener.name``,
each listener's SSL and SASL settings (``broker.sasl_config``), the inter-broker SASL mechanism,
and the TLS the broker's controller client connects with (``controller.listener.names``).

Why a module of its own: these properties relate to one another (every listener needs a
protocol, every advertised one a reachable address, the inter-broker listener must be
advertised) and to the key material, apart from the rest of ``BrokerConfig``'s flat table of
numbers (``config.py``, which builds the config from both). The address types and the error
every property raises (``BrokerConfigError``, ``Endpoint``, ``HostPort``) are defined here, the
lower of the two modules, and ``config.py`` exports them as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import attrs

from pykraft.broker.sasl_config import (
    ListenerSecurity,
    SecurityConfigError,
    SecurityProtocol,
    inter_broker_mechanism,
    parse_listener_security,
)
from pykraft.metadata.auth.tls_settings import (
    TlsSettings,
    TlsSettingsError,
    listener_prefix,
    parse_tls_settings,
)

LISTENER_SECURITY_PROTOCOL_MAP_DEFAULT = (
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
)


class BrokerConfigError(ValueError):
    """A broker property is missing or invalid; ``property_name`` names it."""

    def __init__(self, property_name: str, message: str) -> None:
        super().__init__(f"invalid value for {property_name}: {message}")
        self.property_name = property_name


@attrs.frozen
class Endpoint:
    """One entry of ``listeners`` / ``advertised.listeners``: ``NAME://host:port``."""

    listener_name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


@attrs.frozen
class HostPort:
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def list_property(values: Mapping[str, str], name: str) -> list[str] | None:
    raw = values.get(name)
    if raw is None:
        return None
    return [item.strip() for item in raw.split(",") if item.strip()]


def parse_host_port(text: str, name: str) -> HostPort:
    host, separator, port = text.strip().rpartition(":")
    if not separator or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise BrokerConfigError(name, f"expected host:port, got {text!r}")
    return HostPort(host.strip("[]"), int(port))


def _parse_endpoint(text: str, name: str) -> Endpoint:
    listener_name, separator, address = text.partition("://")
    listener_name = listener_name.strip().upper()
    if not separator or not listener_name:
        raise BrokerConfigError(name, f"expected NAME://host:port, got {text!r}")
    host_port = parse_host_port(address, name)
    return Endpoint(listener_name, host_port.host, host_port.port)


def _security_protocols(values: Mapping[str, str]) -> dict[str, str]:
    name = "listener.security.protocol.map"
    protocols: dict[str, str] = {}
    for item in list_property(values, name) or LISTENER_SECURITY_PROTOCOL_MAP_DEFAULT.split(","):
        listener, separator, protocol = item.partition(":")
        if not separator or not listener.strip() or not protocol.strip():
            raise BrokerConfigError(name, f"expected LISTENER:PROTOCOL, got {item!r}")
        protocols[listener.strip().upper()] = protocol.strip().upper()
    return protocols


def _endpoints(values: Mapping[str, str], name: str, items: list[str]) -> tuple[Endpoint, ...]:
    if not items:
        raise BrokerConfigError(name, "no listener given")
    protocols = _security_protocols(values)
    endpoints = tuple(_parse_endpoint(item, name) for item in items)
    seen: set[str] = set()
    for endpoint in endpoints:
        if endpoint.listener_name in seen:
            raise BrokerConfigError(name, f"listener {endpoint.listener_name} is listed twice")
        seen.add(endpoint.listener_name)
        protocol = protocols.get(endpoint.listener_name)
        if protocol is None:
            raise BrokerConfigError(
                name,
                f"listener {endpoint.listener_name} has no entry in listener.security.protocol.map",
            )
        if protocol not in SecurityProtocol.__members__:
            raise BrokerConfigError(
                "listener.security.protocol.map",
                f"listener {endpoint.listener_name} maps to {protocol}; expected one of "
                f"{', '.join(SecurityProtocol.__members__)}",
            )
    return endpoints


def listener_security_of(
    values: Mapping[str, str], endpoints: tuple[Endpoint, ...]
) -> Mapping[str, ListenerSecurity]:
    protocols = _security_protocols(values)
    security: dict[str, ListenerSecurity] = {}
    for endpoint in endpoints:
        name = endpoint.listener_name
        if name not in security:
            protocol = SecurityProtocol[protocols[name]]
            try:
                security[name] = parse_listener_security(values, name, protocol)
            except SecurityConfigError as error:
                raise BrokerConfigError(error.property_name, _message(error)) from None
    return MappingProxyType(security)


def inter_broker_mechanism_of(values: Mapping[str, str], security: ListenerSecurity) -> str | None:
    try:
        return inter_broker_mechanism(values, security)
    except SecurityConfigError as error:
        raise BrokerConfigError(error.property_name, _message(error)) from None


def _message(error: ValueError) -> str:
    return str(error).split(": ", 1)[-1]


def listeners_of(values: Mapping[str, str]) -> tuple[Endpoint, ...]:
    items = list_property(values, "listeners")
    return _endpoints(
        values, "listeners", items if items is not None else ["PLAINTEXT://127.0.0.1:9092"]
    )


def advertised_listeners_of(
    values: Mapping[str, str], listeners: tuple[Endpoint, ...]
) -> tuple[Endpoint, ...]:
    items = list_property(values, "advertised.listeners")
    name = "advertised.listeners" if items is not None else "listeners"
    advertised = listeners if items is None else _endpoints(values, name, items)
    for endpoint in advertised:
        # Kafka refuses to advertise the meta-address; pykraft also cannot look up a hostname
        # to advertise for an empty host, so it asks for advertised.listeners instead.
        if endpoint.host in ("", "0.0.0.0", "::"):
            raise BrokerConfigError(
                "advertised.listeners",
                f"cannot advertise {endpoint}: set advertised.listeners to an address clients "
                "can reach",
            )
        # Port 0 in listeners means "any free port"; the process advertises the bound port.
        if endpoint.port == 0 and items is not None:
            raise BrokerConfigError("advertised.listeners", f"cannot advertise port 0 ({endpoint})")
    return advertised


def inter_broker_listener_of(values: Mapping[str, str], advertised: tuple[Endpoint, ...]) -> str:
    name = (values.get("inter.broker.listener.name") or "PLAINTEXT").strip().upper()
    if all(endpoint.listener_name != name for endpoint in advertised):
        raise BrokerConfigError(
            "inter.broker.listener.name",
            f"{name} is not one of advertised.listeners "
            f"({', '.join(e.listener_name for e in advertised)})",
        )
    return name


def controller_tls_settings(values: Mapping[str, str]) -> TlsSettings | None:
    """The TLS a client of the controllers connects with, from Kafka's properties: the first of
    ``controller.listener.names`` (default CONTROLLER) mapped to SSL by
    ``listener.security.protocol.map``; None (http) otherwise. Issue 11: the broker's
    certificate is its identity to the controllers (quorum/auth_http.py)."""
    name = values.get("controller.listener.names", "CONTROLLER").split(",")[0].strip().upper()
    for item in values.get("listener.security.protocol.map", "").split(","):
        listener, _, protocol = item.partition(":")
        if listener.strip().upper() == name and protocol.strip().upper() == "SSL":
            try:
                return parse_tls_settings(values, listener_prefix(name))
            except TlsSettingsError as error:
                raise BrokerConfigError(error.property_name, str(error)) from None
    return None
