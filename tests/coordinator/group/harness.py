"""Drive the pure group coordinator like its shell does: request ids, a simulated clock, and
appends that complete when the test says so."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pykraft.coordinator.group.coordinator import GroupCoordinator, JoinGroupRequest
from pykraft.coordinator.group.effects import (
    Append,
    Effects,
    HeartbeatResult,
    JoinGroupResult,
    LeaveGroupResult,
    OffsetCommitResult,
    Result,
    SyncGroupResult,
    TransactionalProducer,
)
from pykraft.coordinator.group.offsets import FetchedOffset, load_groups
from pykraft.coordinator.group.rebalance import GroupConfig
from pykraft.coordinator.group.records import OffsetAndMetadata
from pykraft.coordinator.group.state import GroupMetadata, Protocol
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition

GROUP = "group"
CLIENT = "consumer"
PROTOCOL_TYPE = "consumer"
SESSION_TIMEOUT_MS = 10_000
REBALANCE_TIMEOUT_MS = 30_000
RANGE = (Protocol("range", b"range-metadata"),)
ROUNDROBIN = (Protocol("roundrobin", b"rr-metadata"),)
START_MS = 1_000_000
TOPIC0 = TopicPartition("pets", 0)
TOPIC1 = TopicPartition("pets", 1)
PRODUCER_ID = 1000
PRODUCER_EPOCH = 2


class Harness:
    """One coordinator owning every ``__consumer_offsets`` partition (1 unless told)."""

    def __init__(self, *, num_partitions: int = 1, load: bool = True, **config: Any) -> None:
        config.setdefault("group_initial_rebalance_delay_ms", 0)
        self.config = GroupConfig(offsets_topic_num_partitions=num_partitions, **config)
        self.suffixes = 0
        self.coordinator = GroupCoordinator(self.config, self._suffix)
        self.now_ms = START_MS
        self.request_ids = 0
        self.answers: dict[int, Result] = {}
        self.pending_appends: list[Append] = []
        self.appended: list[Append] = []
        self.log_end_offset = 0
        if load:
            for partition in range(num_partitions):
                self.load(partition, epoch=0)

    def _suffix(self) -> str:
        self.suffixes += 1
        return f"m{self.suffixes}"

    # ------------------------------------------------------------------ plumbing

    def take(self, effects: Effects) -> Effects:
        """Record what a call returned; deadlines already due are acted on at once, as the
        shell's timer does (a zero initial delay ends right after the first join)."""
        for answer in effects.answers:
            assert answer.request_id not in self.answers, f"answered twice: {answer}"
            self.answers[answer.request_id] = answer.result
        self.pending_appends.extend(effects.appends)
        self.appended.extend(effects.appends)
        deadline = self.coordinator.next_deadline_ms()
        if deadline is not None and deadline <= self.now_ms:
            self.take(self.coordinator.poll(self.now_ms))
        return effects

    def new_request(self) -> int:
        self.request_ids += 1
        return self.request_ids

    def result(self, request_id: int) -> Result | None:
        return self.answers.get(request_id)

    def join_result(self, request_id: int) -> JoinGroupResult:
        result = self.answers[request_id]
        assert isinstance(result, JoinGroupResult), result
        return result

    def sync_result(self, request_id: int) -> SyncGroupResult:
        result = self.answers[request_id]
        assert isinstance(result, SyncGroupResult), result
        return result

    def advance(self, ms: int) -> Effects:
        self.now_ms += ms
        return self.take(self.coordinator.poll(self.now_ms))

    def complete_appends(self, error: Errors = Errors.NONE) -> None:
        """Answer every append in flight, in order; each successful one takes the next log
        offset (one per batch: a record's position in the log is its batch's base offset)."""
        pending, self.pending_appends = self.pending_appends, []
        for append in pending:
            offset = -1
            if error is Errors.NONE:
                offset, self.log_end_offset = self.log_end_offset, self.log_end_offset + 1
            self.take(self.coordinator.on_append_done(append.write_id, error, offset, self.now_ms))

    def complete_first_append(self, error: Errors = Errors.NONE) -> None:
        """Answer only the oldest append in flight (acks=-1 answers may come out of order)."""
        first, *rest = self.pending_appends
        self.pending_appends = [first]
        self.complete_appends(error)
        self.pending_appends = rest + self.pending_appends

    def load(self, partition: int, epoch: int, records: Any = ()) -> tuple[str, ...]:
        needed, effects = self.coordinator.begin_loading(partition, epoch, self.now_ms)
        assert needed
        self.take(effects)
        groups = load_groups(records, self.now_ms)
        loaded, problems = self.coordinator.complete_loading(partition, epoch, groups, self.now_ms)
        self.take(loaded)
        return problems

    def group(self, group_id: str = GROUP) -> GroupMetadata:
        return self.coordinator.groups[group_id]

    # ------------------------------------------------------------------ requests

    def send_join(
        self,
        member_id: str = "",
        *,
        group_id: str = GROUP,
        protocols: tuple[Protocol, ...] = RANGE,
        protocol_type: str = PROTOCOL_TYPE,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        rebalance_timeout_ms: int = REBALANCE_TIMEOUT_MS,
        require_known_member_id: bool = False,
        client_id: str = CLIENT,
        group_instance_id: str | None = None,
        supports_skipping_assignment: bool = False,
    ) -> int:
        request_id = self.new_request()
        request = JoinGroupRequest(
            group_id=group_id,
            member_id=member_id,
            client_id=client_id,
            client_host="/127.0.0.1",
            rebalance_timeout_ms=rebalance_timeout_ms,
            session_timeout_ms=session_timeout_ms,
            protocol_type=protocol_type,
            protocols=protocols,
            require_known_member_id=require_known_member_id,
            group_instance_id=group_instance_id,
            supports_skipping_assignment=supports_skipping_assignment,
        )
        self.take(self.coordinator.handle_join_group(request, request_id, self.now_ms))
        return request_id

    def send_sync(
        self,
        member_id: str,
        generation_id: int,
        assignments: Mapping[str, bytes] | None = None,
        *,
        group_id: str = GROUP,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        group_instance_id: str | None = None,
    ) -> int:
        request_id = self.new_request()
        effects = self.coordinator.handle_sync_group(
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=assignments or {},
            request_id=request_id,
            now_ms=self.now_ms,
            group_instance_id=group_instance_id,
        )
        self.take(effects)
        return request_id

    def heartbeat(
        self,
        member_id: str,
        generation_id: int,
        group_id: str = GROUP,
        group_instance_id: str | None = None,
    ) -> Errors:
        request_id = self.new_request()
        self.take(
            self.coordinator.handle_heartbeat(
                group_id, member_id, generation_id, request_id, self.now_ms, group_instance_id
            )
        )
        result = self.answers[request_id]
        assert isinstance(result, HeartbeatResult)
        return result.error

    def leave(self, *members: tuple[str, str | None], group_id: str = GROUP) -> LeaveGroupResult:
        request_id = self.new_request()
        self.take(self.coordinator.handle_leave_group(group_id, members, request_id, self.now_ms))
        result = self.answers[request_id]
        assert isinstance(result, LeaveGroupResult)
        return result

    def send_commit(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        *,
        member_id: str = "",
        generation_id: int = -1,
        group_id: str = GROUP,
        group_instance_id: str | None = None,
    ) -> int:
        request_id = self.new_request()
        values = {
            tp: v if isinstance(v, OffsetAndMetadata) else self.offset(v)
            for tp, v in offsets.items()
        }
        effects = self.coordinator.handle_commit_offsets(
            group_id=group_id,
            member_id=member_id,
            generation_id=generation_id,
            offsets=values,
            request_id=request_id,
            now_ms=self.now_ms,
            group_instance_id=group_instance_id,
        )
        self.take(effects)
        return request_id

    def commit(
        self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata], **kwargs: Any
    ) -> dict[TopicPartition, Errors]:
        """Commit and complete the append; the per-partition errors."""
        request_id = self.send_commit(offsets, **kwargs)
        self.complete_appends()
        result = self.answers[request_id]
        assert isinstance(result, OffsetCommitResult)
        return dict(result.errors)

    def send_txn_commit(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        *,
        producer_id: int = PRODUCER_ID,
        producer_epoch: int = PRODUCER_EPOCH,
        member_id: str = "",
        generation_id: int = -1,
        group_instance_id: str | None = None,
        group_id: str = GROUP,
    ) -> int:
        request_id = self.new_request()
        values = {
            tp: v if isinstance(v, OffsetAndMetadata) else self.offset(v)
            for tp, v in offsets.items()
        }
        effects = self.coordinator.handle_txn_commit_offsets(
            group_id=group_id,
            producer=TransactionalProducer(producer_id, producer_epoch),
            member_id=member_id,
            generation_id=generation_id,
            group_instance_id=group_instance_id,
            offsets=values,
            request_id=request_id,
            now_ms=self.now_ms,
        )
        self.take(effects)
        return request_id

    def txn_commit(
        self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata], **kwargs: Any
    ) -> dict[TopicPartition, Errors]:
        """TxnOffsetCommit and complete its append; the per-partition errors."""
        request_id = self.send_txn_commit(offsets, **kwargs)
        self.complete_appends()
        result = self.answers[request_id]
        assert isinstance(result, OffsetCommitResult)
        return dict(result.errors)

    def fetch(
        self,
        partitions: list[TopicPartition] | None,
        *,
        require_stable: bool = False,
        group_id: str = GROUP,
    ) -> dict[TopicPartition, FetchedOffset]:
        error, fetched = self.coordinator.fetch_offsets(group_id, partitions, require_stable)
        assert error is Errors.NONE, error
        return {f.topic_partition: f for f in fetched}

    def offset(self, value: int, metadata: str = "") -> OffsetAndMetadata:
        return OffsetAndMetadata(offset=value, metadata=metadata, commit_timestamp_ms=self.now_ms)

    # ------------------------------------------------------------------ whole flows

    def join_new_member(self, **kwargs: Any) -> str:
        """A v4+ join: MEMBER_ID_REQUIRED, then the join with the id (answer may be pending)."""
        first = self.join_result(self.send_join(require_known_member_id=True, **kwargs))
        assert first.error is Errors.MEMBER_ID_REQUIRED, first
        self.last_join = self.send_join(first.member_id, require_known_member_id=True, **kwargs)
        return first.member_id

    def stable_group_of_one(self) -> tuple[str, int]:
        """One member that joined and synced: (member id, generation)."""
        member_id = self.join_new_member()
        joined = self.join_result(self.last_join)
        assert joined.error is Errors.NONE, joined
        sync = self.send_sync(member_id, joined.generation_id, {member_id: b"all"})
        self.complete_appends()
        assert self.sync_result(sync).error is Errors.NONE
        return member_id, joined.generation_id
