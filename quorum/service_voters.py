"""AddRaftVoter / RemoveRaftVoter routes (KIP-853): the shell around ``quorum/voter_changes.py``.

``POST /v1/quorum/voters/add`` and ``/remove`` (``metadata/api/voters.py``) run on the active
controller, one change at a time, as Kafka's ``AddVoterHandler`` / ``RemoveVoterHandler``:

1. ``require_leader`` (a standby redirects: NOT_CONTROLLER, also when the leadership moves
   before the decision), then the leader's Raft state read on the Raft thread
   (``MetadataRaft.voter_change_state``) and the pure decision;
2. an added voter's Raft listener is probed, and the voters the leader reaches plus the new
   one must be a majority of the new set (``voter_changes.check_new_voter_ready``; Kafka's
   API_VERSIONS probe and catch-up check before ``appendVotersRecord``): REQUEST_TIMED_OUT
   with nothing appended otherwise;
3. the change is proposed as one pysyncobj membership entry carrying the new voter set
   (``MetadataRaft.propose_voter_change``) and awaited until it commits, bounded by
   ``controller.quorum.request.timeout.ms`` (Kafka: the same bound);
4. an added voter must then hold the committed log within the request's ``TimeoutMs``
   (``voter_changes.is_caught_up`` over pysyncobj's match index), polled every
   ``CATCH_UP_POLL_S``; past it, REQUEST_TIMED_OUT.

The leader cannot remove itself in pysyncobj: it hands its leadership to the most caught-up
voter (``SyncObj.transferLeadership``) and answers NOT_CONTROLLER, which a caller retries at the
new leader (Kafka's leader instead resigns after the change commits).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

from aiohttp import web
from pysyncobj import FAIL_REASON

from pykraft.metadata.api import routes
from pykraft.metadata.api.errors import ErrorBody, status_of
from pykraft.metadata.api.voters import (
    AddVoterRequest,
    add_voter_from_json,
    remove_voter_from_json,
)
from pykraft.protocol.errors import Errors
from pykraft.quorum.node import ControllerNode
from pykraft.quorum.raft import describe_failure
from pykraft.quorum.service_http import ErrorAnswer, add_routes, json_response, node_of, read_body
from pykraft.quorum.service_quorum import raft_status
from pykraft.quorum.voter_changes import (
    LeaderView,
    Listener,
    PendingVoterChange,
    Refusal,
    Voter,
    VoterChangeKind,
    check_new_voter_ready,
    decide_add_voter,
    decide_remove_voter,
    is_caught_up,
    refusal_at_append,
)

# How often the leader looks at a new voter's progress while it catches up.
CATCH_UP_POLL_S = 0.05
# The longest the leader waits for a new voter's Raft listener to accept a connection.
PROBE_TIMEOUT_S = 1.0
STATE_TIMEOUT_S = 2.0
# The one change in flight per controller process (Kafka: per LeaderState).
PENDING_KEY = web.AppKey("pending_voter_change", dict)


@contextlib.contextmanager
def _in_flight(pending_slot: dict[str, Any], change: PendingVoterChange) -> Iterator[None]:
    """``change`` is the one in flight while the block runs (the next decision refuses a
    second change: ``voter_changes``); it is cleared after, unless it is no longer the one."""
    pending_slot["change"] = change
    try:
        yield
    finally:
        if pending_slot.get("change") is change:
            pending_slot.pop("change")


def _refuse(refusal: Refusal) -> ErrorAnswer:
    return ErrorAnswer(
        status_of(refusal.error),
        ErrorBody(
            error=refusal.error.name, message=refusal.message or _default_message(refusal.error)
        ),
    )


def _default_message(error: Errors) -> str:
    if error is Errors.NOT_LEADER_OR_FOLLOWER:
        return "This controller is no longer the leader of the metadata quorum."
    return error.name


def _refused_before_proposing(node: ControllerNode, refusal: Refusal) -> ErrorAnswer:
    """A refusal before anything was proposed. Kafka's NOT_LEADER_OR_FOLLOWER (the leadership
    moved between the route's check and the decision) is the HTTP API's NOT_CONTROLLER here,
    naming the new leader, so callers resend as they do for every write not yet made."""
    if refusal.error is Errors.NOT_LEADER_OR_FOLLOWER:
        node.require_leader()
    return _refuse(refusal)


async def _leader_view(node: ControllerNode, pending: PendingVoterChange | None) -> LeaderView:
    future = node.raft.call_in_raft_thread(node.raft.voter_change_state)
    try:
        committed_in_term, last_change_committed = await asyncio.wait_for(
            asyncio.wrap_future(future), STATE_TIMEOUT_S
        )
    except TimeoutError:
        raise _refuse(
            Refusal(error=Errors.REQUEST_TIMED_OUT, message="The Raft thread is busy; retry.")
        ) from None
    return LeaderView(
        cluster_id=node.config.cluster_id,
        is_leader=node.is_leader(),
        committed_in_term=committed_in_term,
        last_change_committed=last_change_committed,
        voters=node.raft.voter_set,
        pending=pending,
        now_ms=node.clock.monotonic_ms(),
        kraft_version=node.config.kraft_version,
    )


async def _commit_change(node: ControllerNode, kind: VoterChangeKind, voter: Voter) -> None:
    """Propose the membership entry and wait for it to commit."""
    current = node.raft.voter_set
    new_set = (
        current.with_voter(voter) if kind is VoterChangeKind.ADD else current.without(voter.node_id)
    )
    loop = asyncio.get_running_loop()
    future: asyncio.Future[tuple[Any, int]] = loop.create_future()
    node.raft.propose_voter_change(kind, voter, new_set, node.bridge.result_callback(future))
    try:
        _, fail_reason = await asyncio.wait_for(future, node.config.request_timeout_ms / 1000)
    except TimeoutError:
        raise _refuse(
            Refusal(
                error=Errors.REQUEST_TIMED_OUT,
                message=f"The voter change of {voter.node_id} did not commit in time",
            )
        ) from None
    if fail_reason == FAIL_REASON.SUCCESS:
        return
    if fail_reason == FAIL_REASON.REQUEST_DENIED:
        # Refused at the append (SyncObj.__changeCluster, RaftVoterHooks): its term's first
        # entry or the last change not applied yet, or the voter set changed since the decision.
        view = await _leader_view(node, None)
        raise _refuse(
            refusal_at_append(
                committed_in_term=view.committed_in_term,
                last_change_committed=view.last_change_committed,
            )
        )
    raise _refuse(
        Refusal(
            error=Errors.NOT_LEADER_OR_FOLLOWER,
            message=f"Leadership changed before the voter change committed "
            f"({describe_failure(fail_reason)})",
        )
    )


async def _probe_new_voter(node: ControllerNode, voter: Voter, deadline_ms: int) -> None:
    """Refuse (REQUEST_TIMED_OUT, nothing appended) a new voter whose Raft listener does not
    answer, or whose addition would need more voters than the leader reaches
    (``voter_changes.check_new_voter_ready``)."""
    timeout_s = min(PROBE_TIMEOUT_S, max(0.0, (deadline_ms - node.clock.monotonic_ms()) / 1000))
    address = voter.raft_address
    reachable = False
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(address.host, address.port), timeout_s
        )
        writer.close()
        reachable = True
    except (OSError, TimeoutError):
        pass
    status = await raft_status(node)
    current = node.raft.voter_set
    self_address = str(node.config.self_raft_address)
    connected = 1 + sum(
        1
        for other in current.voters
        if str(other.raft_address) != self_address
        and status.get(f"partner_node_status_server_{other.raft_address}") == 2
    )
    refused = check_new_voter_ready(
        voter, reachable=reachable, connected_voters=connected, new_set=current.with_voter(voter)
    )
    if refused is not None:
        raise _refuse(refused)


async def _wait_caught_up(node: ControllerNode, voter: Voter, deadline_ms: int) -> None:
    key = f"match_idx_server_{voter.raft_address}"
    while True:
        status = await raft_status(node)
        match_index = status.get(key)
        commit_index = status.get("commit_idx")
        if type(commit_index) is int and is_caught_up(
            match_index=match_index if type(match_index) is int else None,
            leader_commit_index=commit_index,
        ):
            return
        if node.clock.monotonic_ms() >= deadline_ms:
            raise _refuse(
                Refusal(
                    error=Errors.REQUEST_TIMED_OUT,
                    message=f"Aborted add voter operation for {voter.node_id} since it is "
                    "lagging behind (it stays a voter: remove it to undo)",
                )
            )
        if not node.is_leader():
            raise _refuse(Refusal(error=Errors.NOT_LEADER_OR_FOLLOWER))
        await asyncio.sleep(CATCH_UP_POLL_S)


async def add_voter(request: web.Request) -> web.Response:
    node = node_of(request)
    node.require_leader()
    body = await read_body(request, add_voter_from_json)
    pending_slot = request.app[PENDING_KEY]
    view = await _leader_view(node, pending_slot.get("change"))
    decision = _decide_add(view, body)
    if isinstance(decision, Refusal):
        raise _refused_before_proposing(node, decision)
    deadline_ms = view.now_ms + body.timeout_ms
    change = PendingVoterChange(kind=VoterChangeKind.ADD, voter=decision, deadline_ms=deadline_ms)
    with _in_flight(pending_slot, change):
        await _probe_new_voter(node, decision, deadline_ms)
        await _commit_change(node, VoterChangeKind.ADD, decision)
        await _wait_caught_up(node, decision, deadline_ms)
    return json_response({})


def _decide_add(view: LeaderView, body: AddVoterRequest) -> Voter | Refusal:
    return decide_add_voter(
        view,
        cluster_id=body.cluster_id,
        voter_id=body.voter_id,
        directory_id=body.voter_directory_id,
        listeners=tuple(Listener(name=i.name, host=i.host, port=i.port) for i in body.listeners),
    )


async def remove_voter(request: web.Request) -> web.Response:
    node = node_of(request)
    node.require_leader()
    body = await read_body(request, remove_voter_from_json)
    pending_slot = request.app[PENDING_KEY]
    view = await _leader_view(node, pending_slot.get("change"))
    decision = decide_remove_voter(
        view,
        cluster_id=body.cluster_id,
        voter_id=body.voter_id,
        directory_id=body.voter_directory_id,
    )
    if isinstance(decision, Refusal):
        raise _refused_before_proposing(node, decision)
    if decision.node_id == node.config.node_id:
        node.raft.call_in_raft_thread(node.raft.transferLeadership)
        raise ErrorAnswer(
            status_of(Errors.NOT_CONTROLLER, leader_known=False),
            ErrorBody(
                error=Errors.NOT_CONTROLLER.name,
                message=f"Controller {decision.node_id} is the active controller and hands its "
                "leadership to another voter first; retry with the new active controller.",
            ),
        )
    change = PendingVoterChange(
        kind=VoterChangeKind.REMOVE,
        voter=decision,
        deadline_ms=view.now_ms + node.config.request_timeout_ms,
    )
    with _in_flight(pending_slot, change):
        await _commit_change(node, VoterChangeKind.REMOVE, decision)
    return json_response({})


def add_voter_routes(app: web.Application) -> None:
    app[PENDING_KEY] = {}
    add_routes(app, [(routes.ADD_RAFT_VOTER, add_voter), (routes.REMOVE_RAFT_VOTER, remove_voter)])
