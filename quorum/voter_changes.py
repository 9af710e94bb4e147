"""The controller quorum's voter set and the decisions of AddRaftVoter / RemoveRaftVoter (KIP-853).

Kafka 3.9 keeps the voter set in ``VotersRecord`` control records of the metadata log and changes
it one voter at a time: ``KafkaRaftClient.handleAddVoterRequest`` / ``handleRemoveVoterRequest``
check the cluster id and the leadership, then ``AddVoterHandler`` / ``RemoveVoterHandler`` check,
in this order, that no other change is in flight, that the leader has committed in its epoch
(its high watermark is known), that the last voter change is committed, and that the voter is
new (DUPLICATE_VOTER) or present with the same directory id (VOTER_NOT_FOUND). pykraft's Raft is
pysyncobj: a voter is a pysyncobj member (its Raft address) plus the Kafka identity Kafka keeps
in ``VoterSet.VoterNode`` — node id, directory id, endpoints. This module makes every decision
as a pure function of the request, the voter set and ``now_ms``; ``quorum/service_voters.py``
carries them out on ``quorum/raft.py``.

A static quorum (``controller.quorum.voters``) has kraft.version 0 and, as Kafka 3.9's, answers
both with UNSUPPORTED_VERSION "Cluster doesn't support adding voter because the kraft.version
feature is 0" (``AddVoterHandler``; "removing" in ``RemoveVoterHandler``), after the pending and
high-watermark checks; only a dynamic quorum (``quorum/raft_dynamic.py``) changes voters.

Where pykraft answers differently from Kafka, and why:

* A founding voter (``pykraft.quorum.initial.controllers``) has no directory id: Kafka's
  ``ReplicaKey.NO_DIRECTORY_ID`` (the zero uuid), which Kafka refuses in RemoveRaftVoter
  (INVALID_REQUEST). Here the zero uuid is how a request names a voter whose directory id is
  unknown; a non-zero id never matches it.
* Removing the last voter is refused with INVALID_REQUEST (Kafka's ``VoterSet`` cannot be
  empty; its handler leaves that check as a TODO).
* A new voter catches up after it joins, not before: pysyncobj replicates only to members, so
  the observer waits idle until it is added. Before the append the leader checks what it can
  (``check_new_voter_ready``): the new voter's Raft listener answers, and the voters it reaches
  plus the new one are a majority of the new set; otherwise REQUEST_TIMED_OUT and nothing is
  appended. ``TimeoutMs`` then bounds how long the leader waits for it to hold the committed
  log; past it the answer is REQUEST_TIMED_OUT, as Kafka's for a lagging voter, but the voter
  stays in the set (remove it to undo).
* pysyncobj's leader cannot remove itself: the leader hands its leadership to the most
  caught-up voter and answers NOT_CONTROLLER, which the caller retries at the new leader.
"""

from __future__ import annotations

import enum

import attrs

from pykraft.protocol.errors import Errors
from pykraft.quorum.config import HostPort, parse_host_port

# ReplicaKey.NO_DIRECTORY_ID: the zero uuid in Kafka's text form (URL-safe base64, no padding).
NO_DIRECTORY_ID = "AAAAAAAAAAAAAAAAAAAAAA"
# The listener names of an AddRaftVoter request: the pysyncobj port and the HTTP API.
RAFT_LISTENER = "RAFT"
CONTROLLER_LISTENER = "CONTROLLER"
# AddVoterHandler / RemoveVoterHandler's answer while the leader's high watermark is unknown.
HWM_NOT_ESTABLISHED = (
    "Request timed out waiting for leader to establish HWM and fence previous voter changes"
)
# Bound on a request's listeners (STYLE.md §7); Kafka's request has one per listener name.
MAX_LISTENERS = 16


@attrs.frozen(kw_only=True)
class Voter:
    """Kafka's ``VoterSet.VoterNode``: a voter's key (id, directory id) and its endpoints."""

    node_id: int
    directory_id: str
    raft_address: HostPort
    # The controller's HTTP listener; None when it is not known (a static voter without
    # controller.quorum.http.voters).
    http_listener: HostPort | None = None


@attrs.frozen
class VoterSet:
    """The voters, sorted by node id. Invariant: node ids and Raft addresses are unique."""

    voters: tuple[Voter, ...]

    def __attrs_post_init__(self) -> None:
        ids = [voter.node_id for voter in self.voters]
        addresses = [str(voter.raft_address) for voter in self.voters]
        assert ids == sorted(set(ids)), ids
        assert len(set(addresses)) == len(addresses), addresses

    @staticmethod
    def of(voters: list[Voter] | tuple[Voter, ...]) -> VoterSet:
        return VoterSet(tuple(sorted(voters, key=lambda voter: voter.node_id)))

    @property
    def node_ids(self) -> tuple[int, ...]:
        return tuple(voter.node_id for voter in self.voters)

    def get(self, node_id: int) -> Voter | None:
        return next((voter for voter in self.voters if voter.node_id == node_id), None)

    def by_raft_address(self, address: str) -> Voter | None:
        return next((v for v in self.voters if str(v.raft_address) == address), None)

    def with_voter(self, voter: Voter) -> VoterSet:
        return VoterSet.of([*self.voters, voter])

    def without(self, node_id: int) -> VoterSet:
        return VoterSet.of([voter for voter in self.voters if voter.node_id != node_id])


class VoterChangeKind(enum.Enum):
    ADD = "add"
    REMOVE = "remove"


@attrs.frozen(kw_only=True)
class PendingVoterChange:
    """The one voter change in flight (Kafka's ``LeaderState`` add/remove handler state)."""

    kind: VoterChangeKind
    voter: Voter
    deadline_ms: int

    def expired(self, now_ms: int) -> bool:
        return now_ms >= self.deadline_ms


@attrs.frozen(kw_only=True)
class Refusal:
    """An expected failure: the Kafka error and the message Kafka gives with it."""

    error: Errors
    message: str | None = None


@attrs.frozen(kw_only=True)
class Listener:
    name: str
    host: str
    port: int


@attrs.frozen(kw_only=True)
class LeaderView:
    """What the deciding functions need of the controller that received the request."""

    cluster_id: str | None
    is_leader: bool
    # The leader has committed an entry of its own term (Kafka: its high watermark is known).
    committed_in_term: bool
    # The last membership change is applied (committed) on the leader.
    last_change_committed: bool
    voters: VoterSet
    pending: PendingVoterChange | None
    now_ms: int
    # Kafka's kraft.version feature level (quorum/config.py): voter changes need 1.
    kraft_version: int = 1


def check_cluster_id(requested: str | None, cluster_id: str | None) -> Refusal | None:
    """``KafkaRaftClient.hasValidClusterId``: a request without one passes (old clients)."""
    if not requested or cluster_id is None or requested == cluster_id:
        return None
    return Refusal(
        error=Errors.INCONSISTENT_CLUSTER_ID,
        message=f'The given id "{requested}" doesn\'t match the cluster id "{cluster_id}"',
    )


def _common_checks(view: LeaderView, cluster_id: str | None) -> Refusal | None:
    """The checks AddVoter and RemoveVoter share, in Kafka's order."""
    refused = check_cluster_id(cluster_id, view.cluster_id)
    if refused is not None:
        return refused
    if not view.is_leader:
        # validateLeaderOnlyRequest: a replica that is not the leader.
        return Refusal(error=Errors.NOT_LEADER_OR_FOLLOWER)
    return None


def _state_checks(view: LeaderView, kind: VoterChangeKind) -> Refusal | None:
    """``AddVoterHandler`` / ``RemoveVoterHandler``'s checks in their order: a change pending,
    the high watermark, kraft.version (``KRaftVersion.isReconfigSupported``), the last
    VotersRecord committed."""
    if view.pending is not None and not view.pending.expired(view.now_ms):
        return Refusal(
            error=Errors.REQUEST_TIMED_OUT,
            message="Request timed out waiting for leader to handle previous voter change request",
        )
    if not view.committed_in_term:
        return Refusal(
            error=Errors.REQUEST_TIMED_OUT,
            message=HWM_NOT_ESTABLISHED,
        )
    if view.kraft_version < 1:
        verb = "adding" if kind is VoterChangeKind.ADD else "removing"
        return Refusal(
            error=Errors.UNSUPPORTED_VERSION,
            message=f"Cluster doesn't support {verb} voter because the kraft.version feature "
            f"is {view.kraft_version}",
        )
    if not view.last_change_committed:
        return Refusal(
            error=Errors.REQUEST_TIMED_OUT,
            message="Request timed out waiting for voters to commit the latest voter change",
        )
    return None


def _address_of(listeners: tuple[Listener, ...], name: str) -> HostPort | None:
    for listener in listeners:
        if listener.name.upper() == name and listener.host and 0 < listener.port < 65536:
            return HostPort(host=listener.host, port=listener.port)
    return None


def decide_add_voter(
    view: LeaderView,
    *,
    cluster_id: str | None,
    voter_id: int,
    directory_id: str,
    listeners: tuple[Listener, ...],
) -> Voter | Refusal:
    """AddRaftVoter: the voter to add, or why not (``handleAddVoterRequest``,
    ``AddVoterHandler``)."""
    refused = _common_checks(view, cluster_id)
    if refused is not None:
        return refused
    if voter_id < 0 or directory_id == NO_DIRECTORY_ID or len(listeners) > MAX_LISTENERS:
        return Refusal(
            error=Errors.INVALID_REQUEST, message="Add voter request didn't include a valid voter"
        )
    raft_address = _address_of(listeners, RAFT_LISTENER)
    if raft_address is None:
        return Refusal(
            error=Errors.INVALID_REQUEST,
            message="Add voter request didn't include the endpoint for the default listener "
            f"{RAFT_LISTENER}",
        )
    refused = _state_checks(view, VoterChangeKind.ADD)
    if refused is not None:
        return refused
    if view.voters.get(voter_id) is not None:
        return Refusal(
            error=Errors.DUPLICATE_VOTER,
            message=f"The voter id for ReplicaKey(id={voter_id}, directoryId={directory_id}) is "
            f"already part of the set of voters {list(view.voters.node_ids)}.",
        )
    if view.voters.by_raft_address(str(raft_address)) is not None:
        return Refusal(
            error=Errors.DUPLICATE_VOTER,
            message=f"The Raft address {raft_address} is already a voter's.",
        )
    return Voter(
        node_id=voter_id,
        directory_id=directory_id,
        raft_address=raft_address,
        http_listener=_address_of(listeners, CONTROLLER_LISTENER),
    )


def decide_remove_voter(
    view: LeaderView, *, cluster_id: str | None, voter_id: int, directory_id: str
) -> Voter | Refusal:
    """RemoveRaftVoter: the voter to remove, or why not (``RemoveVoterHandler``)."""
    refused = _common_checks(view, cluster_id)
    if refused is not None:
        return refused
    if voter_id < 0:
        return Refusal(
            error=Errors.INVALID_REQUEST,
            message="Remove voter request didn't include a valid voter",
        )
    refused = _state_checks(view, VoterChangeKind.REMOVE)
    if refused is not None:
        return refused
    voter = view.voters.get(voter_id)
    if voter is None or voter.directory_id != directory_id:
        return Refusal(
            error=Errors.VOTER_NOT_FOUND,
            message=f"Cannot remove voter ReplicaKey(id={voter_id}, directoryId={directory_id}) "
            f"from the set of voters {list(view.voters.node_ids)}",
        )
    if len(view.voters.voters) == 1:
        return Refusal(
            error=Errors.INVALID_REQUEST,
            message=f"Cannot remove voter {voter_id}: it is the last voter of the quorum",
        )
    return voter


def refusal_at_append(*, committed_in_term: bool, last_change_committed: bool) -> Refusal:
    """Why the leader refused to append a change it had decided (pysyncobj's REQUEST_DENIED),
    from its state read just after: the state changed between the decision and the append."""
    if not committed_in_term:
        return Refusal(error=Errors.REQUEST_TIMED_OUT, message=HWM_NOT_ESTABLISHED)
    if not last_change_committed:
        return Refusal(
            error=Errors.REQUEST_TIMED_OUT,
            message="Request timed out waiting for voters to commit the latest voter change",
        )
    return Refusal(
        error=Errors.REQUEST_TIMED_OUT,
        message="The voter set changed before the change was appended; retry",
    )


def check_new_voter_ready(
    voter: Voter, *, reachable: bool, connected_voters: int, new_set: VoterSet
) -> Refusal | None:
    """Before the entry is appended (Kafka's ``AddVoterHandler`` sends API_VERSIONS to the new
    voter and checks ``isReplicaCaughtUp`` first, answering REQUEST_TIMED_OUT with nothing
    appended): the new voter's Raft listener answers, and the voters the leader reaches now
    (``connected_voters``, itself included) with the new one are a majority of the new set,
    so the entry can commit. pysyncobj replicates only to members, so the catch-up itself
    still comes after the append (``is_caught_up``)."""
    key = f"ReplicaKey(id={voter.node_id}, directoryId={voter.directory_id})"
    if not reachable:
        return Refusal(
            error=Errors.REQUEST_TIMED_OUT,
            message=f"New voter {key} is not ready to receive requests",
        )
    if 2 * (connected_voters + 1) <= len(new_set.voters):
        return Refusal(
            error=Errors.REQUEST_TIMED_OUT,
            message=f"Aborted add voter operation for {key}: the leader reaches "
            f"{connected_voters} of the voters {list(new_set.node_ids)}, too few to commit it",
        )
    return None


def is_caught_up(*, match_index: int | None, leader_commit_index: int) -> bool:
    """A new voter holds the committed log: its match index (in Raft entries, as pysyncobj
    counts) reaches the leader's commit index. Kafka's ``LeaderState.isReplicaCaughtUp``
    compares the replica's fetch offset with the leader's log end in the same way."""
    return match_index is not None and match_index >= leader_commit_index


def voter_to_json(voter: Voter) -> dict[str, object]:
    """A voter as the voters file, the dump header and membership entries carry it."""
    http = voter.http_listener
    return {
        "node_id": voter.node_id,
        "directory_id": voter.directory_id,
        "raft": str(voter.raft_address),
        "http": None if http is None else str(http),
    }


def _host_port(text: object) -> HostPort:
    if type(text) is not str:
        raise ValueError(f"expected host:port, got {text!r:.80}")
    return parse_host_port(text, "voter")  # ControllerConfigError is a ValueError


def voter_from_json(value: object) -> Voter:
    """Raises ``ValueError`` on anything but ``voter_to_json``'s shape."""
    if type(value) is not dict:
        raise ValueError(f"a voter must be an object, got {value!r:.80}")
    node_id, directory_id, http = value.get("node_id"), value.get("directory_id"), value.get("http")
    if type(node_id) is not int or node_id < 0 or type(directory_id) is not str:
        raise ValueError(f"malformed voter {value!r:.120}")
    return Voter(
        node_id=node_id,
        directory_id=directory_id,
        raft_address=_host_port(value.get("raft")),
        http_listener=None if http is None else _host_port(http),
    )
