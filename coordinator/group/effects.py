"""What the pure group coordinator asks its shell to do: answer requests, append records.

Every call into ``coordinator.group.coordinator.GroupCoordinator`` returns one ``Effects``:

* ``answers``: (request id, result) pairs. A request is answered in the ``Effects`` of the call
  that carried it (a Heartbeat, an error) or of a later call: a JoinGroup when the rebalance
  completes (another member's join, a timer in ``poll``), a SyncGroup when the leader's
  assignment is stored, an OffsetCommit when its records are.
* ``appends``: records for a ``__consumer_offsets`` partition, to append with acks=-1; the shell
  reports the outcome with ``GroupCoordinator.on_append_done(write_id, ...)``. An append of a
  TxnOffsetCommit names its ``TransactionalProducer``: the shell writes it as that producer's
  transactional batch (KIP-98), so the partition's COMMIT or ABORT marker settles it.

The result types carry Kafka's fields (``JoinGroupResult``, ``SyncGroupResult``,
``LeaveGroupResult`` of ``GroupCoordinator.scala``); handlers turn them into responses.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition

NO_GENERATION = -1
NO_MEMBER_ID = ""
NO_LEADER = ""


@attrs.frozen
class JoinedMember:
    """One entry of the member list the leader receives."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@attrs.frozen(kw_only=True)
class JoinGroupResult:
    member_id: str
    error: Errors
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = NO_LEADER
    skip_assignment: bool = False
    # Only the leader gets the members (with their metadata for the chosen protocol).
    members: tuple[JoinedMember, ...] = ()


@attrs.frozen(kw_only=True)
class SyncGroupResult:
    error: Errors
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@attrs.frozen
class HeartbeatResult:
    error: Errors


@attrs.frozen
class MemberLeaveResult:
    member_id: str
    group_instance_id: str | None
    error: Errors


@attrs.frozen
class LeaveGroupResult:
    error: Errors
    members: tuple[MemberLeaveResult, ...] = ()


@attrs.frozen
class OffsetCommitResult:
    errors: Mapping[TopicPartition, Errors]


@attrs.frozen(kw_only=True)
class ConsumerGroupHeartbeatResult:
    """ConsumerGroupHeartbeat's answer (KIP-848); ``assignment`` None: not sent (unchanged).
    Topic ids are the image's Kafka base64 strings."""

    error: Errors
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: Mapping[str, frozenset[int]] | None = None


Result = (
    JoinGroupResult
    | SyncGroupResult
    | HeartbeatResult
    | LeaveGroupResult
    | OffsetCommitResult
    | ConsumerGroupHeartbeatResult
)


@attrs.frozen
class Answer:
    request_id: int
    result: Result


@attrs.frozen
class CoordinatorRecord:
    key: bytes
    # None: a tombstone.
    value: bytes | None


@attrs.frozen
class TransactionalProducer:
    """The producer whose transaction a TxnOffsetCommit belongs to (its batch header's ids)."""

    producer_id: int
    producer_epoch: int


@attrs.frozen
class Append:
    """Records for partition ``partition`` of ``__consumer_offsets``, written as one batch."""

    write_id: int
    partition: int
    records: tuple[CoordinatorRecord, ...]
    timestamp_ms: int
    # Set for a TxnOffsetCommit: a transactional batch of this producer; else a plain batch.
    producer: TransactionalProducer | None = None


@attrs.define
class Effects:
    answers: list[Answer] = attrs.Factory(list)
    appends: list[Append] = attrs.Factory(list)

    def answer(self, request_id: int, result: Result) -> None:
        self.answers.append(Answer(request_id, result))

    def merge(self, other: Effects) -> None:
        self.answers.extend(other.answers)
        self.appends.extend(other.appends)

    def result_for(self, request_id: int) -> Result | None:
        """This request's answer, if these effects carry it (tests and the shell)."""
        for answer in self.answers:
            if answer.request_id == request_id:
                return answer.result
        return None
