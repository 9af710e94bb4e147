"""MetadataView: the asyncio side of MetadataRaft — ordered hand-off, window, long polls."""

import asyncio

from pykraft.metadata.compact_codec import encode_records
from pykraft.metadata.records import NoOpRecord
from pykraft.quorum.log_window import ReadStatus
from pykraft.quorum.metadata_view import MetadataView, RaftBridge
from pykraft.quorum.raft_batch import CompactBatch, encode_batch
from pykraft.quorum.raft_state import Applied, ApplyResult, ApplyStatus, MetadataState, apply_entry


def noops_blob(expected_last_offset: int, count: int) -> bytes:
    return encode_batch(
        CompactBatch(
            expected_last_offset=expected_last_offset,
            epoch=1,
            append_time_ms=0,
            record_count=count,
            payload=encode_records([NoOpRecord()] * count),
        )
    )


def applied_noops(state: MetadataState, raft_index: int, count: int) -> Applied:
    return apply_entry(state, raft_index, noops_blob(state.last_offset, count))


def test_applied_batches_feed_the_window_and_the_image() -> None:
    view = MetadataView(window_records=100)
    first = applied_noops(MetadataState(), 2, 3)
    view.on_applied(first)
    view.on_applied(applied_noops(first.state, 3, 2))
    assert (view.last_offset, view.next_offset, view.image.offset) == (4, 5, 4)
    read = view.read(0, 100)
    assert read.status is ReadStatus.OK and read.next_offset == 5


def test_rejected_entries_change_nothing_but_the_state() -> None:
    view = MetadataView(window_records=100)
    first = applied_noops(MetadataState(), 2, 1)
    view.on_applied(first)
    stale = apply_entry(first.state, 3, noops_blob(-1, 1))
    assert stale.result.status is ApplyStatus.STALE
    view.on_applied(stale)
    assert view.window.next_offset == 1


def test_a_loaded_snapshot_restarts_the_window_at_its_end() -> None:
    view = MetadataView(window_records=100)
    view.on_applied(applied_noops(MetadataState(), 2, 3))
    view.on_state_loaded(MetadataState(next_offset=500, last_raft_index=90))
    assert view.read(499, 10).status is ReadStatus.SNAPSHOT_REQUIRED
    assert view.read(500, 10).batches == ()


def test_long_poll_wakes_on_apply_and_times_out_otherwise() -> None:
    async def scenario() -> tuple[bool, bool]:
        view = MetadataView(window_records=100)
        loop = asyncio.get_running_loop()
        bridge = RaftBridge(loop, view)
        waiter = asyncio.create_task(view.wait_beyond(0, 5.0))
        await asyncio.sleep(0)
        # As the Raft thread would: hand the batch over with call_soon_threadsafe.
        bridge.handle_applied(applied_noops(MetadataState(), 2, 1))
        woke = await waiter
        timed_out = await view.wait_beyond(5, 0.0)
        return woke, timed_out

    assert asyncio.run(scenario()) == (True, False)


def test_proposal_results_resolve_on_the_loop_after_their_batch() -> None:
    async def scenario() -> tuple[int, ApplyResult | None, int]:
        view = MetadataView(window_records=100)
        loop = asyncio.get_running_loop()
        bridge = RaftBridge(loop, view)
        future: asyncio.Future[tuple[ApplyResult | None, int]] = loop.create_future()
        callback = bridge.result_callback(future)
        applied = applied_noops(MetadataState(), 2, 1)
        # pysyncobj calls apply (the listener) first, then the proposal's callback.
        bridge.handle_applied(applied)
        callback(applied.result, 0)
        callback(None, 5)  # a late duplicate is ignored
        result, reason = await future
        return view.last_offset, result, reason

    last_offset, result, reason = asyncio.run(scenario())
    assert last_offset == 0 and reason == 0
    assert result is not None and result.applied


def test_closing_releases_long_polls() -> None:
    async def scenario() -> bool:
        view = MetadataView(window_records=100)
        waiter = asyncio.create_task(view.wait_beyond(0, 30.0))
        await asyncio.sleep(0)
        view.close()
        return await asyncio.wait_for(waiter, 5.0)

    assert asyncio.run(scenario()) is False
