"""The quorum routes of the controller's HTTP service: the Raft state pysyncobj reports.

``raft_status`` reads pysyncobj's ``getStatus`` on the Raft thread; ``GET /v1/quorum`` shows it
as one controller sees it (any controller answers). ``GET /v1/quorum/describe`` is Kafka's
DescribeQuorum (``metadata/api/quorum.py``), answered by the active controller only, as only
Kafka's Raft leader answers it (``KafkaRaftClient.handleDescribeQuorumRequest``); a standby
redirects with 421 NOT_CONTROLLER like a write. The answer is computed by the pure
``quorum/describe_quorum.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from pykraft.metadata.api import routes
from pykraft.metadata.api.admin import QuorumDescription, RaftStatus, VoterStatus, quorum_to_json
from pykraft.metadata.api.errors import ErrorBody, status_of
from pykraft.metadata.api.quorum import Listener, QuorumNode, describe_quorum_to_json
from pykraft.protocol.errors import Errors
from pykraft.quorum.describe_quorum import describe_quorum
from pykraft.quorum.node import ControllerNode
from pykraft.quorum.service_http import ErrorAnswer, add_routes, json_response, node_of
from pykraft.quorum.voter_changes import RAFT_LISTENER

STATUS_TIMEOUT_S = 2.0
# Kafka's name of the listener the controllers serve on (controller.listener.names).
CONTROLLER_LISTENER = "CONTROLLER"


async def raft_status(node: ControllerNode) -> dict[str, Any]:
    """pysyncobj's ``getStatus()``, read on the Raft thread; 503 REQUEST_TIMED_OUT when busy."""
    future = node.raft.call_in_raft_thread(node.raft.getStatus)
    try:
        status: dict[str, Any] = await asyncio.wait_for(
            asyncio.wrap_future(future), STATUS_TIMEOUT_S
        )
    except TimeoutError:
        raise ErrorAnswer(
            status_of(Errors.REQUEST_TIMED_OUT),
            ErrorBody(
                error=Errors.REQUEST_TIMED_OUT.name,
                message="The Raft thread is busy (applying or snapshotting a large batch); "
                "retry shortly.",
            ),
        ) from None
    return status


async def get_quorum(request: web.Request) -> web.Response:
    node = node_of(request)
    status = await raft_status(node)
    return json_response(quorum_to_json(quorum_description(node, status)))


def _optional_int(value: Any) -> int | None:
    return value if type(value) is int else None


def quorum_description(node: ControllerNode, status: dict[str, Any]) -> QuorumDescription:
    """This controller's view of the quorum, from pysyncobj's ``getStatus`` dictionary."""
    config = node.config
    leader = node.is_leader()
    # Lag is counted in Raft entries behind the leader's commit index (only the leader knows).
    commit_index = int(status.get("commit_idx") or 0)
    voters = []
    for voter in node.raft.voter_set.voters:
        node_id, key = voter.node_id, str(voter.raft_address)
        match_index = _optional_int(status.get(f"match_idx_server_{key}")) if leader else None
        if node_id == config.node_id:
            connected: bool | None = True
            match_index = _optional_int(status.get("last_applied")) if leader else None
        else:
            connected = status.get(f"partner_node_status_server_{key}") == 2
        voters.append(
            VoterStatus(
                node_id=node_id,
                raft_address=key,
                url=node.http_url(node_id),
                connected=connected,
                match_index=match_index,
                lag=None if match_index is None else max(0, commit_index - match_index),
            )
        )
    state = {0: "follower", 1: "candidate", 2: "leader"}.get(status.get("state", 0), "unknown")
    if not node.raft.membership.is_voter:
        state = "observer"  # KIP-853: started from bootstrap servers, not (yet) a voter
    has_quorum = status.get("has_quorum")
    return QuorumDescription(
        node_id=config.node_id,
        state=state,
        leader_id=node.leader_id(),
        leader_url=node.leader_url(),
        raft_term=_optional_int(status.get("raft_term")),
        committed_offset=node.raft.state.last_offset,
        applied_offset=node.view.last_offset,
        log_start_offset=node.view.window.start_offset,
        raft=RaftStatus(
            commit_index=_optional_int(status.get("commit_idx")),
            last_applied=_optional_int(status.get("last_applied")),
            log_entries=_optional_int(status.get("log_len")),
            has_quorum=has_quorum if isinstance(has_quorum, bool) else None,
        ),
        voters=tuple(voters),
    )


def _nodes(node: ControllerNode) -> tuple[QuorumNode, ...]:
    """Every voter whose HTTP listener this controller knows (the voter set, KIP-853, or
    controller.quorum.http.voters), with its Raft address as the ``RAFT`` listener."""
    config = node.config
    static = {**config.http_voters, config.node_id: config.http_listener}
    described = []
    for voter in node.raft.voter_set.voters:
        http = voter.http_listener or static.get(voter.node_id)
        listeners = (
            []
            if http is None
            else [Listener(name=CONTROLLER_LISTENER, host=http.host, port=http.port)]
        )
        raft = voter.raft_address
        listeners.append(Listener(name=RAFT_LISTENER, host=raft.host, port=raft.port))
        described.append(QuorumNode(node_id=voter.node_id, listeners=tuple(listeners)))
    return tuple(described)


async def describe(request: web.Request) -> web.Response:
    node = node_of(request)
    node.require_leader()
    status = await raft_status(node)
    if not node.is_leader():  # lost the leadership while the Raft thread answered
        node.require_leader()
    image = node.view.image
    sessions = node.active_controller().sessions
    observers = [
        (broker_id, sessions.session(registration).metadata_offset)
        for broker_id, registration in image.cluster.brokers.items()
    ]
    answer = describe_quorum(
        leader_id=node.config.node_id,
        voters=node.raft.voter_set,
        status=status,
        committed_offset=node.raft.state.last_offset,
        observers=observers,
        nodes=_nodes(node),
        now_ms=node.clock.wall_clock_ms(),
    )
    return json_response(describe_quorum_to_json(answer))


def add_quorum_routes(app: web.Application) -> None:
    add_routes(app, [(routes.QUORUM, get_quorum), (routes.DESCRIBE_QUORUM, describe)])
