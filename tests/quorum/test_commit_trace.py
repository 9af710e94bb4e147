"""The commit trace (quorum/commit_trace.py) and its timeline (quorum/commit_timeline.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pysyncobj import SyncObj

from pykraft.quorum.commit_timeline import Events, commits, parse_trace, timeline
from pykraft.quorum.commit_trace import ENV, CommitTrace, CommitTraceMixin, traced_class
from pykraft.quorum.raft import MetadataRaft
from pykraft.quorum.raft_dynamic import DynamicMetadataRaft


def test_off_unless_the_environment_names_a_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert CommitTrace.from_environment(1) is None
    monkeypatch.setenv(ENV, str(tmp_path / "traces"))
    trace = CommitTrace.from_environment(2)
    assert trace is not None and trace.path == tmp_path / "traces" / "trace-2.tsv"


def test_an_event_keeps_its_first_time_and_a_range_covers_each_index_once(tmp_path: Path) -> None:
    trace = CommitTrace(tmp_path / "trace-1.tsv")
    trace.mark("propose", 7, 100)
    trace.mark("propose", 7, 200)  # a second time is not the hand-off's
    trace.mark_up_to("ae_sent", 7, 300)  # the first send covers 7 only
    trace.mark_up_to("ae_sent", 9, 400)  # the next covers 8 and 9
    trace.mark_up_to("ae_sent", 9, 500)  # a resend covers nothing new
    trace.close()
    assert parse_trace(trace.path.read_text("ascii")) == {
        7: {"propose": 100, "ae_sent": 300},
        8: {"ae_sent": 400},
        9: {"ae_sent": 400},
    }


def test_events_reach_the_file_in_batches_and_on_close(tmp_path: Path) -> None:
    trace = CommitTrace(tmp_path / "trace-1.tsv")
    for index in range(600):
        trace.mark("applied", index, index)
    assert len(trace.path.read_text("ascii").splitlines()) == 512  # FLUSH_EVERY
    trace.close()
    assert len(parse_trace(trace.path.read_text("ascii"))) == 600


US = 1_000  # ns


def leader_events(base_us: int) -> Events:
    hand_offs_us = {
        "propose": 100,
        "appended": 200,
        "ae_start": 210,
        "ae_sent": 400,
        "answer_received": 1_000,
        "applied": 1_200,
        "resumed": 1_300,
    }
    return {event: (base_us + at) * US for event, at in hand_offs_us.items()}


def test_a_commit_joins_its_request_the_leader_and_the_first_answering_follower() -> None:
    leader = {5: leader_events(10_000), 6: leader_events(20_000), 4: {"appended": 1}}
    slow = {5: {"ae_received": 10_500 * US, "answer_sent": 10_900 * US}}
    fast = {
        5: {"ae_received": 10_450 * US, "answer_sent": 10_700 * US},
        6: {"answer_sent": 20_800 * US},
    }
    requests = [(10_000 * US, 11_500 * US), (15_000 * US, 16_000 * US), (20_000 * US, 21_400 * US)]
    merged = commits(leader, [slow, fast], requests)
    # The request at 15,000 us proposed nothing traced: it has no commit.
    assert [events["propose"] for events in merged] == [10_100 * US, 20_100 * US]
    assert merged[0]["F.ae_received"] == 10_450 * US
    figures = timeline(merged)
    assert figures["commits"] == 2
    assert figures["http request -> propose"] == 100
    assert figures["total (client)"] == 1_450  # the median of 1,500 and 1,400
    assert figures["follower append (+ sync) -> answer sent"] == 250  # commit 5 only
    assert figures["sent -> follower decoded it"] == 50


def test_the_hooks_override_names_pysyncobj_and_our_mixins_call() -> None:
    traced = traced_class(MetadataRaft, CommitTrace(Path("unused.tsv")))
    assert traced.__mro__[1:3] == (CommitTraceMixin, MetadataRaft)
    assert traced_class(DynamicMetadataRaft, traced.commit_trace).__mro__[2] is DynamicMetadataRaft
    for name in vars(CommitTraceMixin):
        if name.startswith("_SyncObj__") or name in ("_checkCommandsToApply", "_doDestroy"):
            assert hasattr(SyncObj, name), name
        elif name in ("propose", "_sync_journal", "_send_next_node_idx"):
            assert hasattr(MetadataRaft, name), name
