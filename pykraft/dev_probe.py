"""One look at a ``pykraft dev`` cluster's processes over their HTTP APIs: a ``ClusterView``.

The shell around ``pykraft/dev_ready.py``: it asks every controller ``GET /v1/cluster`` (the
one that names itself as controller is the active one), the active controller
``GET /v1/brokers``, and each broker its own ``GET /v1/broker``; a process that does not answer
within ``PROBE_TIMEOUT_S`` counts as not up yet. Blocking (urllib), as ``pykraft dev`` waits on
threads, not an event loop. With ``--secure`` the controllers are asked over TLS with the
admin's certificate (``dev_secure``), which may describe the cluster.
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from pykraft.dev_layout import ClusterLayout
from pykraft.dev_ready import (
    ClusterView,
    Readiness,
    RegisteredBroker,
    internal_replication_factor,
    readiness,
)

PROBE_TIMEOUT_S = 2.0


def get_json(url: str, context: ssl.SSLContext | None = None) -> Any | None:
    """The JSON body of ``GET url``; None when it cannot be had (not up, refused, not JSON)."""
    try:
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_S, context=context) as response:
            return json.loads(response.read())
    except (OSError, ValueError):
        return None


def look(
    layout: ClusterLayout,
    broker_properties: Mapping[str, str],
    context: ssl.SSLContext | None = None,
) -> Readiness:
    """Probe ``layout``'s processes once and judge them (``dev_ready.readiness``), with the
    internal topics' replication factor from the brokers' properties."""
    view = probe(
        [(c.node_id, c.http_url) for c in layout.controllers],
        [(b.node_id, b.http_url) for b in layout.brokers],
        context,
    )
    return readiness(
        [c.node_id for c in layout.controllers],
        [b.node_id for b in layout.brokers],
        internal_replication_factor(broker_properties),
        view,
    )


def probe(
    controller_urls: Sequence[tuple[int, str]],
    broker_urls: Sequence[tuple[int, str]],
    context: ssl.SSLContext | None = None,
) -> ClusterView:
    """Ask every process once. ``*_urls``: (node id, HTTP base URL) pairs."""
    up: set[int] = set()
    leader_id: int | None = None
    for node_id, url in controller_urls:
        cluster = get_json(url + "/v1/cluster", context)
        if not isinstance(cluster, dict):
            continue
        up.add(node_id)
        if cluster.get("controller_id") == node_id:
            leader_id = node_id
    registered = None
    if leader_id is not None:
        leader_url = dict(controller_urls)[leader_id]
        registered = _registered(get_json(leader_url + "/v1/brokers", context))
    states = {node_id: _broker_state(get_json(url + "/v1/broker")) for node_id, url in broker_urls}
    return ClusterView(
        leader_id=leader_id,
        registered=registered,
        broker_states=states,
        controllers_up=frozenset(up),
    )


def _registered(body: Any) -> tuple[RegisteredBroker, ...] | None:
    try:
        return tuple(
            RegisteredBroker(
                broker_id=int(b["broker_id"]),
                fenced=bool(b["fenced"]),
                in_controlled_shutdown=bool(b.get("in_controlled_shutdown", False)),
            )
            for b in body["brokers"]
        )
    except (TypeError, KeyError, ValueError):
        return None


def _broker_state(body: Any) -> str | None:
    state = body.get("state") if isinstance(body, dict) else None
    return state if isinstance(state, str) else None
