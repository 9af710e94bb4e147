"""Delayed fetches: completion by bytes, by partition change and by deadline (Kafka's
DelayedFetchTest / DelayedOperationTest behaviour), with a fake clock — nothing sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from pykraft.broker.purgatory import DelayedFetches
from pykraft.replica.fetch_waiters import FetchCompletion, FetchPurgatory
from pykraft.replica.partition_state import FetchIsolation
from pykraft.storage.topic_partition import TopicPartition
from tests.fake_clock import FakeClock

A = TopicPartition("a", 0)
B = TopicPartition("b", 0)


def watch(
    purgatory: FetchPurgatory,
    *partitions: TopicPartition,
    min_bytes: int = 100,
    accumulated: int = 0,
    deadline_ms: int = 1000,
) -> int:
    waiter_id = purgatory.try_watch(
        partitions, min_bytes=min_bytes, accumulated_bytes=accumulated, deadline_ms=deadline_ms
    )
    assert waiter_id is not None
    return waiter_id


# ------------------------------------------------------------------ the pure core


def test_completes_when_appended_bytes_reach_min_bytes() -> None:
    purgatory = FetchPurgatory()
    waiter = watch(purgatory, A, B, min_bytes=100, accumulated=10)
    assert purgatory.on_bytes_appended(A, 50) == []
    assert purgatory.on_bytes_appended(TopicPartition("other", 0), 500) == []
    assert purgatory.on_bytes_appended(B, 40) == [waiter]  # 10 + 50 + 40
    assert len(purgatory) == 0
    assert purgatory.watching(A) == purgatory.watching(B) == 0
    assert purgatory.on_bytes_appended(A, 1000) == []  # completed once only


def test_each_waiter_counts_its_own_bytes() -> None:
    purgatory = FetchPurgatory()
    small = watch(purgatory, A, min_bytes=1)
    large = watch(purgatory, A, min_bytes=100)
    assert purgatory.on_bytes_appended(A, 60) == [small]
    assert purgatory.on_bytes_appended(A, 60) == [large]


def test_deadlines_expire_oldest_first_and_only_when_due() -> None:
    purgatory = FetchPurgatory()
    late = watch(purgatory, A, deadline_ms=2000)
    early = watch(purgatory, B, deadline_ms=1000)
    assert purgatory.next_deadline_ms() == 1000
    assert purgatory.expire(999) == []
    assert purgatory.expire(1000) == [early]
    assert purgatory.next_deadline_ms() == 2000
    assert purgatory.expire(5000) == [late]
    assert purgatory.next_deadline_ms() is None


def test_a_completed_waiter_never_expires() -> None:
    purgatory = FetchPurgatory()
    waiter = watch(purgatory, A, min_bytes=1, deadline_ms=1000)
    other = watch(purgatory, B, deadline_ms=3000)
    assert purgatory.on_bytes_appended(A, 1) == [waiter]
    assert purgatory.next_deadline_ms() == 3000  # the completed waiter's deadline is skipped
    assert purgatory.expire(2000) == []
    assert purgatory.expire(3000) == [other]


def test_partition_change_completes_its_waiters() -> None:
    # Kafka DelayedFetch.tryComplete cases B/C: the partition moved or is gone -> answer now.
    purgatory = FetchPurgatory()
    on_a = watch(purgatory, A)
    on_both = watch(purgatory, A, B)
    on_b = watch(purgatory, B)
    assert purgatory.on_partition_changed(A) == [on_a, on_both]
    assert purgatory.watching(B) == 1
    assert purgatory.on_partition_changed(B) == [on_b]


def test_followers_count_appends_consumers_count_high_watermark_moves() -> None:
    # Kafka DelayedFetch.tryComplete measures up to the log end for followers and up to the
    # high watermark for consumers: with replicas an append is not yet readable by consumers.
    purgatory = FetchPurgatory()
    follower = watch(purgatory, A, min_bytes=10)
    consumer = purgatory.try_watch(
        [A],
        min_bytes=10,
        accumulated_bytes=0,
        deadline_ms=1000,
        isolation=FetchIsolation.HIGH_WATERMARK,
    )
    assert purgatory.watching(A, FetchIsolation.HIGH_WATERMARK) == 1
    assert purgatory.watching(A, FetchIsolation.LOG_END) == 1
    assert purgatory.on_high_watermark_moved(A, 5) == []
    assert purgatory.on_bytes_appended(A, 10) == [follower]
    assert purgatory.on_high_watermark_moved(A, 5) == [consumer]


def test_read_committed_consumers_count_last_stable_offset_moves() -> None:
    # Kafka DelayedFetch.tryComplete: FetchIsolation.TXN_COMMITTED measures up to the last
    # stable offset, which an open transaction holds while the high watermark moves on
    purgatory = FetchPurgatory()

    def consumer(isolation: FetchIsolation) -> int | None:
        return purgatory.try_watch(
            [A], min_bytes=10, accumulated_bytes=0, deadline_ms=1000, isolation=isolation
        )

    committed = consumer(FetchIsolation.TXN_COMMITTED)
    uncommitted = consumer(FetchIsolation.HIGH_WATERMARK)
    assert purgatory.on_bytes_appended(A, 50) == []
    assert purgatory.on_high_watermark_moved(A, 50) == [uncommitted]
    assert purgatory.watching(A, FetchIsolation.TXN_COMMITTED) == 1
    assert purgatory.on_last_stable_offset_moved(A, 9) == []
    assert purgatory.on_last_stable_offset_moved(A, 1) == [committed]


def test_the_purgatory_is_bounded() -> None:
    purgatory = FetchPurgatory(max_waiters=2)
    first = watch(purgatory, A)
    watch(purgatory, A)
    assert purgatory.try_watch([A], min_bytes=1, accumulated_bytes=0, deadline_ms=1) is None
    purgatory.remove(first)
    assert purgatory.try_watch([A], min_bytes=1, accumulated_bytes=0, deadline_ms=1) is not None


# ------------------------------------------------------------------ the asyncio shell


async def started(
    coroutine: Coroutine[Any, Any, FetchCompletion],
) -> asyncio.Task[FetchCompletion]:
    task = asyncio.ensure_future(coroutine)
    await asyncio.sleep(0)  # let it register (a yield to the loop, not a wait)
    return task


def test_shell_wakes_a_waiter_on_enough_bytes() -> None:
    asyncio.run(_test_shell_wakes_a_waiter_on_enough_bytes())


async def _test_shell_wakes_a_waiter_on_enough_bytes() -> None:
    clock = FakeClock(10_000)
    fetches = DelayedFetches(monotonic_ms=clock.monotonic_ms)
    task = await started(fetches.wait([A], min_bytes=10, accumulated_bytes=0, max_wait_ms=500))
    fetches.on_bytes_appended(A, 4)
    await asyncio.sleep(0)
    assert not task.done()
    fetches.on_bytes_appended(A, 6)
    assert await task is FetchCompletion.ENOUGH_BYTES
    fetches.close()


def test_shell_expires_waiters_by_the_fake_clock() -> None:
    asyncio.run(_test_shell_expires_waiters_by_the_fake_clock())


async def _test_shell_expires_waiters_by_the_fake_clock() -> None:
    clock = FakeClock(10_000)
    fetches = DelayedFetches(monotonic_ms=clock.monotonic_ms)
    first = await started(fetches.wait([A], min_bytes=10, accumulated_bytes=0, max_wait_ms=500))
    second = await started(fetches.wait([B], min_bytes=10, accumulated_bytes=0, max_wait_ms=900))
    clock.now_ms += 499
    assert fetches.expire_due() == 0
    clock.now_ms += 1
    assert fetches.expire_due() == 1
    assert await first is FetchCompletion.DEADLINE
    assert not second.done()
    clock.now_ms += 400
    assert fetches.expire_due() == 1
    assert await second is FetchCompletion.DEADLINE
    fetches.close()


def test_shell_answers_partition_changes_and_full_purgatory() -> None:
    asyncio.run(_test_shell_answers_partition_changes_and_full_purgatory())


async def _test_shell_answers_partition_changes_and_full_purgatory() -> None:
    fetches = DelayedFetches(max_waiters=1, monotonic_ms=FakeClock(10_000).monotonic_ms)
    task = await started(fetches.wait([A], min_bytes=10, accumulated_bytes=0, max_wait_ms=500))
    full = await fetches.wait([B], min_bytes=10, accumulated_bytes=0, max_wait_ms=500)
    assert full is FetchCompletion.PURGATORY_FULL
    fetches.on_partition_changed(A)
    assert await task is FetchCompletion.PARTITION_CHANGED
    fetches.close()


def test_a_cancelled_wait_leaves_no_waiter() -> None:
    asyncio.run(_test_a_cancelled_wait_leaves_no_waiter())


async def _test_a_cancelled_wait_leaves_no_waiter() -> None:
    fetches = DelayedFetches(monotonic_ms=FakeClock(10_000).monotonic_ms)
    task = await started(fetches.wait([A], min_bytes=10, accumulated_bytes=0, max_wait_ms=500))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(fetches.purgatory) == 0
    fetches.close()


def test_the_timer_fires_on_the_loop_for_a_zero_wait() -> None:
    asyncio.run(_test_the_timer_fires_on_the_loop_for_a_zero_wait())


async def _test_the_timer_fires_on_the_loop_for_a_zero_wait() -> None:
    # max_wait_ms=0 arms a timer due now; the loop runs it without any sleep in the test.
    fetches = DelayedFetches(monotonic_ms=FakeClock(10_000).monotonic_ms)
    completion = await fetches.wait([A], min_bytes=10, accumulated_bytes=0, max_wait_ms=0)
    assert completion is FetchCompletion.DEADLINE
    fetches.close()
