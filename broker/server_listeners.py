"""The broker's Kafka listeners as ``BrokerServer`` starts them: one ``KafkaListener`` per
``listeners`` entry, each with its security (SSL, SASL) read from its key material, one
broker-wide connection count, and the advertised endpoints the broker registers with.

Why a module of its own: turning ``listeners``, ``advertised.listeners``,
``listener.security.protocol.map`` and the connection limits into bound sockets is one step of
start-up with its own failures (a port in use, a key store that does not decrypt); out of
``server.py`` it leaves ``BrokerServer``'s composition and its start-up and shutdown order
readable in one place.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

from pykraft.broker.acceptor import resolve_per_ip_overrides
from pykraft.broker.config import BrokerConfig, Endpoint
from pykraft.broker.connection_quotas import ConnectionLimits, ConnectionQuotas
from pykraft.broker.lifecycle import BrokerStartupError
from pykraft.broker.metrics import BrokerMetrics
from pykraft.broker.network import Dispatch, KafkaListener
from pykraft.broker.quotas_channel import ChannelThrottles
from pykraft.broker.sasl_authentication import listener_authentication
from pykraft.broker.sasl_mechanisms import ScramCredentialSource
from pykraft.metadata.auth.tls_settings import TlsSettingsError
from pykraft.metadata.records import BrokerEndpoint

T = TypeVar("T")


async def start_kafka_listeners(
    config: BrokerConfig,
    listeners: list[KafkaListener],
    *,
    dispatch: Dispatch,
    metrics: BrokerMetrics,
    scram_credentials: ScramCredentialSource,
    monotonic_ms: Callable[[], int],
    throttles: ChannelThrottles | None = None,
) -> tuple[BrokerEndpoint, ...]:
    """Bind every listener, appending each to ``listeners`` as it starts (so shutdown closes
    the ones bound before a failure); the advertised endpoints, with their bound ports."""
    bound: dict[str, int] = {}
    limits = ConnectionLimits(
        max_connections=config.max_connections,
        max_connections_per_ip=config.max_connections_per_ip,
        max_connections_per_ip_overrides=await resolve_per_ip_overrides(
            config.max_connections_per_ip_overrides
        ),
    )
    # One count for every listener: max.connections is broker-wide.
    quotas = ConnectionQuotas(limits, inter_broker_listener=config.inter_broker_listener_name)
    for endpoint in config.listeners:
        listener = KafkaListener(
            dispatch,
            host=endpoint.host,
            port=endpoint.port,
            listener_name=endpoint.listener_name,
            max_request_bytes=config.socket_request_max_bytes,
            metrics=metrics,
            quotas=quotas,
            connections_max_idle_ms=config.connections_max_idle_ms,
            listen_backlog=config.socket_listen_backlog_size,
            authentication=security_or_startup_error(
                functools.partial(
                    listener_authentication,
                    config.listener_security[endpoint.listener_name],
                    scram_credentials,
                )
            ),
            failed_authentication_delay_ms=config.connection_failed_authentication_delay_ms,
            monotonic_ms=monotonic_ms,
            throttles=throttles,
        )
        try:
            await listener.start()
        except OSError as error:
            raise BrokerStartupError(
                f"cannot listen on {endpoint} (listeners): {error.strerror}"
            ) from None
        listeners.append(listener)
        bound[endpoint.listener_name] = listener.port
    for listener in listeners:
        listener.set_peers(listeners)
    return tuple(
        _advertised(e, bound, int(config.listener_security[e.listener_name].security_protocol))
        for e in config.advertised_listeners
    )


def security_or_startup_error(build: Callable[[], T]) -> T:
    """Key material is read at start-up: a file that is missing or does not decrypt stops the
    broker with the property named (``TlsSettingsError``)."""
    try:
        return build()
    except TlsSettingsError as error:
        raise BrokerStartupError(str(error)) from None


def _advertised(
    endpoint: Endpoint, bound: dict[str, int], security_protocol: int
) -> BrokerEndpoint:
    """An advertised listener as registered, with Kafka's security protocol id."""
    port = endpoint.port or bound.get(endpoint.listener_name, 0)
    return BrokerEndpoint(
        name=endpoint.listener_name,
        host=endpoint.host,
        port=port,
        security_protocol=security_protocol,
    )
