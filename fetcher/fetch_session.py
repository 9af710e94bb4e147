"""A follower's side of incremental fetch sessions (KIP-227): Kafka's ``FetchSessionHandler``
and the session epochs of ``FetchMetadata``, pure.

A follower keeps one handler per leader connection (``fetcher.leader_endpoint``). Its first
fetch is full: every partition, epoch 0, asking the leader for a session. Once the leader
answers with a session id, each next fetch is incremental: the session id, the next epoch,
only the partitions added or whose fetch parameters changed (their fetch offset moves with
every append), and the ones it stopped fetching as ``forgotten_topics_data``. The leader reads
every partition of the session and answers only those with news, so a fetch over many quiet
partitions costs what changed (``replica.fetch_sessions`` is the leader's side).

``handle_response`` follows ``FetchSessionHandler.handleResponse``: a top-level error forgets
the session (FETCH_SESSION_ID_NOT_FOUND: start over; any other: the next full fetch closes
it); a full fetch answered with id 0 means no session (full fetches go on); an incremental
one answered with id 0 means the leader closed it. A failed request (``handle_error``) makes
the next fetch a full one that closes the session.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Protocol

import attrs

from pykraft.protocol.errors import Errors
from pykraft.protocol.fetch import FetchPartition
from pykraft.storage.topic_partition import TopicPartition

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """``FetchMetadata.nextEpoch``: -1 stays -1; after the largest int comes 1, never 0."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == MAX_EPOCH else epoch + 1


def is_full(epoch: int) -> bool:
    """A full fetch (``FetchMetadata.isFull``): it opens (0) or needs no (-1) session."""
    return epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class SessionTarget(Protocol):
    """What the handler needs of a partition a follower fetches (``leader_codecs.FetchTarget``)."""

    @property
    def topic_partition(self) -> TopicPartition: ...

    @property
    def topic_id(self) -> uuid.UUID | None: ...

    @property
    def partition(self) -> FetchPartition: ...


@attrs.frozen
class SessionFetch:
    """The session fields and partitions of the next Fetch."""

    session_id: int
    epoch: int
    to_send: tuple[SessionTarget, ...]
    to_forget: tuple[SessionTarget, ...] = ()


@attrs.define
class FetchSessionHandler:
    """One leader's session, as its follower sees it."""

    session_id: int = INVALID_SESSION_ID
    epoch: int = INITIAL_EPOCH
    # The partitions the leader's session holds, with what was last sent for each.
    partitions: dict[TopicPartition, SessionTarget] = attrs.field(factory=dict)

    def build(self, targets: Iterable[SessionTarget]) -> SessionFetch:
        """``FetchSessionHandler.Builder.build``: all of ``targets`` for a full fetch, else the
        added and changed ones, and the dropped ones to forget."""
        wanted = {target.topic_partition: target for target in targets}
        if is_full(self.epoch):
            self.partitions = wanted
            return SessionFetch(self.session_id, self.epoch, tuple(wanted.values()))
        sent = self.partitions
        to_send = []
        for key, target in wanted.items():
            last = sent.get(key)
            if (
                last is None
                or last.partition != target.partition
                or last.topic_id != target.topic_id
            ):
                to_send.append(target)
        # A partition the follower stopped fetching, or one whose topic was deleted and created
        # again under its name (Kafka's ``replaced``: the old topic id is forgotten and the new
        # one sent, else the leader's session keeps answering the old id and never the new).
        to_forget = []
        for key, held in sent.items():
            now = wanted.get(key)
            if now is None or now.topic_id != held.topic_id:
                to_forget.append(held)
        self.partitions = wanted
        return SessionFetch(self.session_id, self.epoch, tuple(to_send), tuple(to_forget))

    def handle_response(self, error: Errors, session_id: int) -> bool:
        """Move to the next session state; False when the answer's partitions must be ignored."""
        if error is not Errors.NONE:
            if error is Errors.FETCH_SESSION_ID_NOT_FOUND:
                self._start_over()
            else:
                self.handle_error()
            return False
        if session_id == INVALID_SESSION_ID:  # no session, or the leader closed it
            self._start_over()
        elif is_full(self.epoch):
            self.session_id, self.epoch = session_id, next_epoch(INITIAL_EPOCH)
        else:
            self.epoch = next_epoch(self.epoch)
        return True

    def handle_error(self) -> None:
        """``nextCloseExisting``: the next fetch is full and closes the session."""
        self.epoch = INITIAL_EPOCH

    def _start_over(self) -> None:
        self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
