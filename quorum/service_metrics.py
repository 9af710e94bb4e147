"""``GET /metrics``: the controller's Prometheus text (``quorum/metrics.py``), on its HTTP port.

Answered by every controller, active or not (each has its own Raft state; only the active one
reports ActiveControllerCount 1), under the same doors as ``/v1/cluster`` (DESCRIBE on the
cluster). Reads only what the event loop owns: the image, the committed offset and pysyncobj's
leader and term, never a call onto the Raft thread, so a busy Raft thread does not stall
scraping.
"""

from __future__ import annotations

from aiohttp import web

from pykraft.metadata.api import routes
from pykraft.quorum.metrics import ControllerSnapshot
from pykraft.quorum.node import ControllerNode
from pykraft.quorum.service_http import add_routes, node_of

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def snapshot(node: ControllerNode) -> ControllerSnapshot:
    active = node.is_leader()
    leader_id = node.leader_id()
    term = getattr(node.raft, "raftCurrentTerm", None)
    if active:
        state = "leader"
    elif leader_id is not None:
        state = "follower"
    else:
        state = "unattached"  # Kafka's state with no leader known and no vote cast
    return ControllerSnapshot(
        image=node.view.image,
        active=active,
        leader_id=leader_id,
        raft_term=term if isinstance(term, int) else None,
        raft_state=state,
        committed_offset=node.raft.state.last_offset,
    )


async def get_metrics(request: web.Request) -> web.Response:
    node = node_of(request)
    text = node.metrics.render(snapshot(node), node.clock.monotonic_ms())
    response = web.Response(text=text)
    # aiohttp's content_type setter rejects parameters; Prometheus wants the version.
    response.headers["Content-Type"] = PROMETHEUS_CONTENT_TYPE
    return response


def add_metrics_routes(app: web.Application) -> None:
    add_routes(app, [(routes.METRICS, get_metrics)])
