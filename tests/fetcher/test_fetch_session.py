"""The follower's fetch session (Kafka's FetchSessionHandler, FetchSessionHandlerTest's cases):
what each Fetch sends and forgets, and how answers move the session, pure."""

from __future__ import annotations

import uuid

from pykraft.fetcher.fetch_session import INITIAL_EPOCH, INVALID_SESSION_ID, FetchSessionHandler
from pykraft.fetcher.leader_codecs import FetchTarget
from pykraft.protocol.errors import Errors
from pykraft.protocol.fetch import FetchPartition
from pykraft.storage.topic_partition import TopicPartition

TOPIC_ID = uuid.UUID(int=7)


def target(partition: int, offset: int) -> FetchTarget:
    return FetchTarget(
        TopicPartition("pets", partition), TOPIC_ID, FetchPartition(partition, offset, 1 << 20)
    )


def sent(handler: FetchSessionHandler, *targets: FetchTarget) -> tuple[list[int], list[int]]:
    fetch = handler.build(targets)
    return (
        [t.partition.partition for t in fetch.to_send],
        [t.partition.partition for t in fetch.to_forget],
    )


def test_full_then_incremental_fetches_send_only_what_changed() -> None:
    handler = FetchSessionHandler()
    assert sent(handler, target(0, 0), target(1, 0), target(2, 0)) == ([0, 1, 2], [])
    assert (handler.session_id, handler.epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH)
    assert handler.handle_response(Errors.NONE, 77)
    assert (handler.session_id, handler.epoch) == (77, 1)
    # Partition 1 moved on, 2 is dropped, 3 is added; 0 is unchanged and not sent.
    assert sent(handler, target(0, 0), target(1, 5), target(3, 0)) == ([1, 3], [2])
    assert handler.handle_response(Errors.NONE, 77) and handler.epoch == 2
    assert sent(handler, target(0, 0), target(1, 5), target(3, 0)) == ([], [])


def test_a_topic_created_again_under_its_name_is_sent_and_the_old_one_forgotten() -> None:
    # Deleted and created again between two fetches, at the same position (empty, epoch 1):
    # only the topic id differs. Kafka's Builder.build puts the old id in ``replaced``.
    handler = FetchSessionHandler()
    handler.build([target(0, 0), target(1, 0)])
    assert handler.handle_response(Errors.NONE, 77)
    recreated = FetchTarget(
        TopicPartition("pets", 0), uuid.UUID(int=8), FetchPartition(0, 0, 1 << 20)
    )
    fetch = handler.build([recreated, target(1, 0)])
    assert [(t.topic_id, t.partition.partition) for t in fetch.to_send] == [(uuid.UUID(int=8), 0)]
    assert [(t.topic_id, t.partition.partition) for t in fetch.to_forget] == [(TOPIC_ID, 0)]
    assert handler.handle_response(Errors.NONE, 77)
    assert sent(handler, recreated, target(1, 0)) == ([], [])


def test_a_full_answer_without_a_session_keeps_fetching_full() -> None:
    handler = FetchSessionHandler()
    handler.build([target(0, 0)])
    assert handler.handle_response(Errors.NONE, INVALID_SESSION_ID)
    assert sent(handler, target(0, 3)) == ([0], [])
    assert (handler.session_id, handler.epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH)


def test_errors_reset_the_session() -> None:
    handler = FetchSessionHandler(session_id=77, epoch=4)
    # Unknown session: start over without naming it.
    assert not handler.handle_response(Errors.FETCH_SESSION_ID_NOT_FOUND, 0)
    assert (handler.session_id, handler.epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH)
    # A wrong epoch or a failed request: the next full fetch names the session to close it.
    handler = FetchSessionHandler(session_id=77, epoch=4)
    assert not handler.handle_response(Errors.INVALID_FETCH_SESSION_EPOCH, 77)
    assert (handler.session_id, handler.epoch) == (77, INITIAL_EPOCH)
    assert sent(handler, target(0, 1)) == ([0], [])
    # The leader closed the session (an incremental fetch answered with id 0).
    handler = FetchSessionHandler(session_id=77, epoch=4)
    handler.build([target(0, 1)])
    assert handler.handle_response(Errors.NONE, INVALID_SESSION_ID)
    assert (handler.session_id, handler.epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH)
