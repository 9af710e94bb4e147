"""Incremental fetch sessions (KIP-227) as pure bookkeeping: Kafka's ``FetchSession.scala``
(``CachedPartition``, ``FetchSession``, ``FetchSessionCache``, ``FetchManager.newContext``) and
the epochs of ``FetchMetadata.java`` (``fetcher.fetch_session``, the follower's side). No clock,
no I/O: ``now_ms`` is passed in.

Theory of operation
-------------------
A fetch names a session id and an epoch. A *full* fetch (epoch 0 or -1) lists every partition
it wants and closes the session it names, if any; with epoch 0 it asks for a new session, which
the cache creates when it answers (``full_response``) if it has room or can evict one. The
response then carries the new id (0 when none was created), and the client's next fetch is
*incremental*: it names the session with epoch 1, lists only the partitions whose fetch
parameters changed or that it adds, and ``forgotten_topics_data`` for those it drops
(``FetchSession.update``). The broker reads every partition of the session
(``IncrementalContext.partitions``) and answers only those with something to say:
records, a moved high watermark or log start offset, an error, a diverging epoch, a preferred
read replica (``CachedPartition.maybeUpdateResponseData``). Each incremental fetch moves the
session to the next epoch; an unknown id is FETCH_SESSION_ID_NOT_FOUND, a wrong epoch
INVALID_FETCH_SESSION_EPOCH, and a session opened with topic ids (Fetch v13+) used by an older
version, or the other way round, FETCH_SESSION_TOPIC_ID_ERROR; an incremental fetch that
forgets every partition closes its session and is answered sessionless.

Eviction (``FetchSessionCache.tryEvict``) when all ``max.incremental.fetch.session.cache.slots``
are taken: the least recently used session if it is stale (unused for more than
``MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS``); otherwise the least valuable evictable session
— ordered by (privileged, partitions, id) — if the new one is worth at least as much. A
follower's (privileged) session may evict any consumer session, a consumer's only one created
more than the eviction time ago; evictability is decided when a session is last used
(``touch``), as Kafka does.

Partitions are keyed by whatever the handler uses to name a request's partition (a topic
name or topic id with the partition index), and carry the handler's request value ``R``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Generic, TypeVar

import attrs

from pykraft.fetcher.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    is_full,
    next_epoch,
)
from pykraft.protocol.errors import Errors

# max.incremental.fetch.session.cache.slots; KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS.
MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS = 1000
MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = 120_000
NO_OFFSET = -1

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")


@attrs.frozen
class PartitionOutcome:
    """What a partition's answer says, as far as a session cares."""

    records_bytes: int = 0
    high_watermark: int = NO_OFFSET
    log_start_offset: int = NO_OFFSET
    error: Errors = Errors.NONE
    diverging_epoch: bool = False
    preferred_read_replica: bool = False

    @property
    def applied_high_watermark(self) -> int:
        """The high watermark the fetcher takes from this answer: none from an error or a
        diverging epoch, which it answers by backing off or truncating (Kafka's follower reads
        the high watermark only from an answer it appends). The session remembers this one,
        so an answer it drops is followed by one that carries the high watermark again: a
        follower that truncated after an unclean election otherwise kept a stale high
        watermark until the leader's next moved."""
        if self.error is not Errors.NONE or self.diverging_epoch:
            return NO_OFFSET
        return self.high_watermark


@attrs.define
class CachedPartition(Generic[R]):
    request: R
    high_watermark: int = NO_OFFSET
    local_log_start_offset: int = NO_OFFSET

    def must_respond(self, outcome: PartitionOutcome, update: bool = True) -> bool:
        """``maybeUpdateResponseData``: include this partition? Remembers what was sent."""
        respond = outcome.records_bytes > 0 or outcome.error is not Errors.NONE
        if self.high_watermark != outcome.high_watermark:
            respond = True
        if update:
            self.high_watermark = outcome.applied_high_watermark
        if self.local_log_start_offset != outcome.log_start_offset:
            respond = True
            if update:
                self.local_log_start_offset = outcome.log_start_offset
        return respond or outcome.diverging_epoch or outcome.preferred_read_replica


@attrs.define(eq=False)
class FetchSession(Generic[K, R]):
    id: int
    privileged: bool
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    # Insertion order is the read order; answered partitions move to the end (fairness).
    partitions: dict[K, CachedPartition[R]]
    # Set by the cache's touch: the size it counted and where the session may be evicted from.
    cached_size: int = -1
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)

    def update(self, fetch_data: Mapping[K, R], to_forget: Iterable[K]) -> tuple[int, int, int]:
        """An incremental request's partitions and forgotten ones: (added, updated, removed)."""
        added = updated = removed = 0
        for key, request in fetch_data.items():
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = CachedPartition(request)
                added += 1
            else:
                cached.request = request
                updated += 1
        for key in to_forget:
            if self.partitions.pop(key, None) is not None:
                removed += 1
        return added, updated, removed


@attrs.frozen
class SessionError:
    """Answer ``error`` with no partitions and session id 0."""

    error: Errors


@attrs.frozen
class Sessionless(Generic[K, R]):
    """Read ``partitions`` and answer them all with session id 0."""

    partitions: Mapping[K, R]


@attrs.frozen
class FullContext(Generic[K, R]):
    """Read ``partitions``, answer them all; ``full_response`` may open a session."""

    partitions: Mapping[K, R]
    privileged: bool
    uses_topic_ids: bool


@attrs.frozen
class IncrementalContext(Generic[K, R]):
    """Read every partition of ``session``; ``incremental_response`` picks what to answer."""

    session: FetchSession[K, R]
    expected_epoch: int

    @property
    def partitions(self) -> dict[K, R]:
        return {key: cached.request for key, cached in self.session.partitions.items()}


FetchContext = SessionError | Sessionless[K, R] | FullContext[K, R] | IncrementalContext[K, R]


class FetchSessionCache(Generic[K, R]):
    """Kafka's ``FetchSessionCache`` with ``FetchManager.newContext``; one per broker."""

    def __init__(
        self,
        new_id: Callable[[], int],
        max_entries: int = MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS,
        eviction_ms: int = MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS,
    ) -> None:
        """``new_id``: a random positive session id (Kafka: ``nextInt(1, Int.MaxValue)``);
        one already in use or 0 is drawn again."""
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession[K, R]] = {}
        self.total_partitions = 0  # NumIncrementalFetchPartitionsCached
        self.evictions = 0  # IncrementalFetchSessionEvictionsPerSec, as a count
        self._random_id = new_id

    def new_context(
        self,
        session_id: int,
        epoch: int,
        fetch_data: Mapping[K, R],
        to_forget: Iterable[K],
        *,
        privileged: bool,
        uses_topic_ids: bool,
        now_ms: int,
    ) -> FetchContext[K, R]:
        """``FetchManager.newContext``: how to read and answer this fetch."""
        if is_full(epoch):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)  # a full fetch closes the session it names
            if epoch == FINAL_EPOCH:
                return Sessionless(fetch_data)
            return FullContext(fetch_data, privileged, uses_topic_ids)
        session = self.sessions.get(session_id)
        if session is None:
            return SessionError(Errors.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return SessionError(Errors.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            return SessionError(Errors.FETCH_SESSION_TOPIC_ID_ERROR)
        session.update(fetch_data, to_forget)
        if not session.partitions:
            self.remove(session.id)
            return Sessionless(fetch_data)
        self.touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        return IncrementalContext(session, session.epoch)

    def full_response(
        self, context: FullContext[K, R], outcomes: Mapping[K, PartitionOutcome], now_ms: int
    ) -> int:
        """``FullFetchContext.updateAndGenerateResponseData``: the session id to answer with
        (INVALID_SESSION_ID when no session was created)."""

        def cached() -> dict[K, CachedPartition[R]]:
            return {
                key: CachedPartition(
                    request,
                    outcomes[key].applied_high_watermark,
                    outcomes[key].log_start_offset,
                )
                for key, request in context.partitions.items()
            }

        return self.maybe_create_session(
            now_ms, context.privileged, len(context.partitions), context.uses_topic_ids, cached
        )

    def incremental_response(
        self,
        context: IncrementalContext[K, R],
        outcomes: Mapping[K, PartitionOutcome],
        update: bool = True,
    ) -> tuple[Errors, list[K]]:
        """``IncrementalFetchContext.updateAndGenerateResponseData``: the top-level error and
        the partitions to answer, in read order; answered ones move to the end of the session.
        A session that moved on meanwhile (a duplicate request) is INVALID_FETCH_SESSION_EPOCH.
        With ``update`` False the session is left as it was (``getResponseSize``: what the
        answer would be, to weigh it against a quota before sending it)."""
        session = context.session
        if session.epoch != context.expected_epoch:
            return Errors.INVALID_FETCH_SESSION_EPOCH, []
        answered = []
        for key, outcome in outcomes.items():
            cached = session.partitions.get(key)
            if cached is not None and cached.must_respond(outcome, update):
                answered.append(key)
                if update:
                    session.partitions[key] = session.partitions.pop(key)
        return Errors.NONE, answered

    # ------------------------------------------------------------------ the cache

    def maybe_create_session(
        self,
        now_ms: int,
        privileged: bool,
        size: int,
        uses_topic_ids: bool,
        partitions: Callable[[], dict[K, CachedPartition[R]]],
    ) -> int:
        if len(self.sessions) >= self.max_entries and not self.try_evict(
            privileged, (privileged, size, 0), now_ms
        ):
            return INVALID_SESSION_ID
        session = FetchSession(
            id=self._new_session_id(),
            privileged=privileged,
            uses_topic_ids=uses_topic_ids,
            creation_ms=now_ms,
            last_used_ms=now_ms,
            epoch=next_epoch(INITIAL_EPOCH),
            partitions=partitions(),
        )
        self.sessions[session.id] = session
        self.touch(session, now_ms)
        return session.id

    def try_evict(self, privileged: bool, key: tuple[bool, int, int], now_ms: int) -> bool:
        """Evict the stalest session if stale, else the least valuable evictable one if
        ``key`` (privileged, size, 0) is worth at least as much; whether one was evicted."""
        if not self.sessions:
            return False
        stalest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stalest.last_used_ms > self.eviction_ms:
            self._evict(stalest)
            return True
        candidates = [
            s
            for s in self.sessions.values()
            if (s.evictable_by_privileged if privileged else s.evictable_by_all)
        ]
        if not candidates:
            return False
        cheapest = min(candidates, key=FetchSession.evictable_key)
        if key < cheapest.evictable_key():
            return False
        self._evict(cheapest)
        return True

    def remove(self, session_id: int) -> FetchSession[K, R] | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self.total_partitions -= session.cached_size
        return session

    def touch(self, session: FetchSession[K, R], now_ms: int) -> None:
        """A session was used: its last use, size and evictability as of ``now_ms``."""
        session.last_used_ms = now_ms
        if session.cached_size != -1:
            self.total_partitions -= session.cached_size
        session.cached_size = len(session.partitions)
        self.total_partitions += session.cached_size
        old_enough = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = not session.privileged or old_enough
        session.evictable_by_all = old_enough

    def _evict(self, session: FetchSession[K, R]) -> None:
        self.remove(session.id)
        self.evictions += 1

    def _new_session_id(self) -> int:
        while True:
            session_id = self._random_id()
            if session_id != INVALID_SESSION_ID and session_id not in self.sessions:
                return session_id
