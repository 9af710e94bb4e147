"""Drive ``UnifiedGroupCoordinator``'s consumer groups like the shell does: request ids, a
simulated clock, appends completed at once (or held), answers collected; a reload replays
every record appended so far into a fresh coordinator."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from pykraft.coordinator.group.consumer_heartbeat import (
    ConsumerGroupConfig,
    ConsumerGroupHeartbeatRequest,
)
from pykraft.coordinator.group.consumer_records import TopicMetadata
from pykraft.coordinator.group.effects import Append, ConsumerGroupHeartbeatResult, Effects, Result
from pykraft.coordinator.group.offsets import LogRecord, OffsetsReplay
from pykraft.coordinator.group.rebalance import GroupConfig
from pykraft.coordinator.group.unified import UnifiedGroupCoordinator
from pykraft.protocol.errors import Errors

GROUP = "orders-app"
START_MS = 1_000_000
REBALANCE_TIMEOUT_MS = 30_000


def topic(name: str, partitions: int) -> TopicMetadata:
    # Kafka base64 topic ids: any 22-character url-safe string of 16 bytes.
    import base64

    raw = name.encode().ljust(16, b"\0")[:16]
    return TopicMetadata(base64.urlsafe_b64encode(raw).decode().rstrip("="), name, partitions)


@attrs.frozen(kw_only=True)
class Joined:
    """A join's answer with the member id it got ("" on an error)."""

    error: Errors
    error_message: str | None
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Mapping[str, frozenset[int]] | None


class ConsumerHarness:
    def __init__(self, topics: list[TopicMetadata], **consumer: Any) -> None:
        self.config = GroupConfig(
            offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0
        )
        self.consumer_config = ConsumerGroupConfig(**consumer)
        self.ids = 0
        self.coordinator = self._new_coordinator()
        self.now_ms = START_MS
        self.request_ids = 0
        self.answers: dict[int, Result] = {}
        self.appended: list[Append] = []
        self.held: list[Append] = []
        self.hold_appends = False
        self.set_topics(topics)
        self._load(self.coordinator, [])

    def _new_coordinator(self) -> UnifiedGroupCoordinator:
        return UnifiedGroupCoordinator(self.config, self._member_id, self.consumer_config)

    def _member_id(self) -> str:
        self.ids += 1
        return f"member-{self.ids}"

    def _load(self, coordinator: UnifiedGroupCoordinator, appends: list[Append]) -> None:
        needed, _ = coordinator.begin_loading(0, 0, self.now_ms)
        assert needed
        replay = OffsetsReplay()
        for offset, append in enumerate(appends):
            replay.replay(LogRecord(offset, r.key, r.value) for r in append.records)
        coordinator.complete_loading(0, 0, replay.loaded(self.now_ms), self.now_ms)

    def set_topics(self, topics: list[TopicMetadata]) -> None:
        self.topics = {t.topic_name: t for t in topics}
        self.coordinator.update_topics(self.topics)

    def topic_id(self, name: str) -> str:
        return self.topics[name].topic_id

    # ------------------------------------------------------------------ plumbing

    def take(self, effects: Effects) -> None:
        for answer in effects.answers:
            assert answer.request_id not in self.answers
            self.answers[answer.request_id] = answer.result
        for append in effects.appends:
            self.appended.append(append)
            if self.hold_appends:
                self.held.append(append)
            else:
                self.take(
                    self.coordinator.on_append_done(append.write_id, Errors.NONE, 0, self.now_ms)
                )
        self._poll_due()

    def _poll_due(self) -> None:
        """Deadlines already due are acted on at once, as the shell's timer does."""
        deadline = self.coordinator.next_deadline_ms()
        if deadline is not None and deadline <= self.now_ms:
            self.take(self.coordinator.poll(self.now_ms))

    def release(self, error: Errors = Errors.NONE) -> None:
        """Complete the held appends with ``error``; a failed append never reaches the log
        (a reload does not see it)."""
        held, self.held = self.held, []
        if error is not Errors.NONE:
            self.appended = [a for a in self.appended if a not in held]
        for append in held:
            self.take(self.coordinator.on_append_done(append.write_id, error, 0, self.now_ms))

    def advance(self, ms: int) -> None:
        self.now_ms += ms
        self.take(self.coordinator.poll(self.now_ms))

    def heartbeat(self, **fields: Any) -> int:
        fields.setdefault("group_id", GROUP)
        fields.setdefault("member_id", "")
        if fields.get("member_epoch") == 0:
            fields.setdefault("rebalance_timeout_ms", REBALANCE_TIMEOUT_MS)
            fields.setdefault("topic_partitions", {})
        self.request_ids += 1
        request = ConsumerGroupHeartbeatRequest(**fields)
        self.take(
            self.coordinator.handle_consumer_group_heartbeat(request, self.request_ids, self.now_ms)
        )
        return self.request_ids

    def answer(self, request_id: int) -> ConsumerGroupHeartbeatResult:
        result = self.answers[request_id]
        assert isinstance(result, ConsumerGroupHeartbeatResult)
        return result

    def call(self, **fields: Any) -> ConsumerGroupHeartbeatResult:
        return self.answer(self.heartbeat(**fields))

    def join(self, topics: tuple[str, ...] = (), **fields: Any) -> Joined:
        if "subscribed_topic_regex" not in fields:
            fields.setdefault("subscribed_topic_names", topics)
        result = self.call(member_epoch=0, **fields)
        return Joined(
            error=result.error,
            error_message=result.error_message,
            member_id=result.member_id or "",
            member_epoch=result.member_epoch,
            heartbeat_interval_ms=result.heartbeat_interval_ms,
            assignment=result.assignment,
        )

    def replayed(self) -> UnifiedGroupCoordinator:
        """A new coordinator that replays every record appended so far."""
        fresh = self._new_coordinator()
        fresh.update_topics(self.topics)
        self._load(fresh, self.appended)
        return fresh

    def reload(self) -> UnifiedGroupCoordinator:
        """A failover: the replayed coordinator takes over."""
        self.coordinator = self.replayed()
        return self.coordinator
