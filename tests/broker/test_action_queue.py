"""``broker.action_queue.ActionQueue``: Kafka's action queue — what a request's appends defer
runs once, in order, when the outermost holder releases; outside a hold it runs at once."""

from __future__ import annotations

import pytest

from pykraft.broker.action_queue import ActionQueue


def test_outside_a_hold_an_action_runs_at_once() -> None:
    queue, log = ActionQueue(), list[str]()
    queue.defer(log.append, "now")
    assert log == ["now"]


def test_held_actions_run_in_order_at_the_outermost_release() -> None:
    # A WriteTxnMarkers request holds over its markers, each append over its partitions.
    queue, log = ActionQueue(), list[str]()
    assert queue.hold()
    assert not queue.hold()  # nested: the outer holder releases
    queue.defer(log.append, "first")
    queue.defer(log.append, "second")
    assert log == []
    queue.release()
    assert log == ["first", "second"]


def test_an_action_deferred_by_a_released_one_runs_at_once() -> None:
    # A fetch resumed at the release may move a high watermark (a follower's): not held again.
    queue, log = ActionQueue(), list[str]()
    queue.hold()
    queue.defer(lambda: queue.defer(log.append, "inner"))
    queue.defer(log.append, "outer")
    queue.release()
    assert log == ["inner", "outer"]


def test_a_release_without_a_hold_is_a_bug() -> None:
    with pytest.raises(AssertionError):
        ActionQueue().release()
