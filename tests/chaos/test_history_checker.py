"""The history checker on hand-made histories (no cluster: these run with the unit tests).

Each anomaly kind of ``history_checker`` is planted once, alone where it can be, shaped like the
examples of Jepsen's Kafka workload documentation; a clean history, and random clean histories
(Hypothesis), report nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.chaos import history
from tests.chaos.history import MicroOp, Op, OpType, Poll, Recorder, Send
from tests.chaos.history_checker import KINDS, Report, check


def recorder() -> Recorder:
    ticks = itertools.count()
    return Recorder(wall=lambda: 1_700_000_000.0 + next(ticks), monotonic=lambda: next(ticks))


def v(name: str) -> bytes:
    return name.encode()


def send(r: Recorder, process: str, partition: int, value: str, offset: int | None) -> Op:
    invocation = r.invoke(process, "send", [Send(partition, v(value))])
    if offset is None:
        return r.complete(invocation, OpType.INFO)
    return r.complete(invocation, OpType.OK, [Send(partition, v(value), offset)])


def poll(r: Recorder, process: str, partition: int, *records: tuple[int, str]) -> Op:
    return r.ok(process, "poll", [Poll(partition, o, v(value)) for o, value in records])


def found(report: Report) -> dict[str, int]:
    return {kind: len(a) for kind, a in report.anomalies.items() if a}


def clean_history() -> Recorder:
    r = recorder()
    send(r, "producer", 0, "a", 0)
    send(r, "producer", 0, "b", 1)
    send(r, "producer", 1, "c", 0)
    poll(r, "consumer", 0, (0, "a"))
    poll(r, "consumer", 0, (1, "b"))
    poll(r, "consumer", 1, (0, "c"))
    return r


def test_a_clean_history_is_clean_and_the_text_names_every_kind() -> None:
    report = check(clean_history().history())
    assert report.clean and report.bad() == {}
    assert report.operations == {"send ok": 3, "poll ok": 3}
    text = report.render()
    assert all(f"{kind}: 0" in text for kind in KINDS)


def test_an_unacknowledged_send_may_be_lost_or_kept() -> None:
    r = clean_history()
    send(r, "producer", 0, "maybe", None)
    send(r, "producer", 0, "kept", None)
    poll(r, "consumer", 0, (2, "kept"))
    assert check(r.history()).clean


def test_the_same_offset_with_two_values_is_inconsistent() -> None:
    r = recorder()
    writer = send(r, "producer", 0, "a", 0)
    reader = poll(r, "consumer", 0, (0, "b"))
    anomalies = check(r.history()).anomalies["inconsistent-offsets"]
    assert [a.ops for a in anomalies] == [(writer, reader)]
    assert "0@0 holds ['a', 'b']" in str(anomalies[0])


def test_a_value_at_two_offsets_is_a_duplicate() -> None:
    r = recorder()
    send(r, "producer", 0, "a", 0)
    poll(r, "consumer", 0, (0, "a"), (1, "a"))
    report = check(r.history())
    assert found(report) == {"duplicate": 1}
    assert report.anomalies["duplicate"][0].detail == "a at [(0, 0), (0, 1)]"


def test_an_acknowledged_write_read_past_but_never_read_is_lost() -> None:
    r = recorder()
    lost = send(r, "producer", 0, "a", 0)
    send(r, "producer", 0, "b", 1)
    reader = poll(r, "consumer", 0, (1, "b"))
    report = check(r.history())
    assert found(report) == {"lost-write": 1}
    assert report.anomalies["lost-write"][0].ops == (lost, reader)


def test_an_acknowledged_write_beyond_every_read_is_unseen() -> None:
    r = recorder()
    send(r, "producer", 0, "a", 0)
    unseen = send(r, "producer", 0, "b", 1)
    poll(r, "consumer", 0, (0, "a"))
    report = check(r.history())
    assert found(report) == {"unseen": 1}
    assert report.anomalies["unseen"][0].ops == (unseen,)
    assert report.bad() == {"unseen": 1}


def test_reading_a_failed_write_is_an_aborted_read() -> None:
    r = recorder()
    invocation = r.invoke("producer", "txn", [Send(0, v("a")), Send(1, v("b"))])
    aborted = r.complete(invocation, OpType.FAIL)
    reader = poll(r, "consumer", 0, (0, "a"))
    report = check(r.history())
    assert found(report) == {"aborted-read": 1}
    assert report.anomalies["aborted-read"][0].ops == (aborted, reader)


def test_a_transaction_of_unknown_outcome_read_in_part_must_be_read_whole() -> None:
    r = recorder()
    invocation = r.invoke("producer", "txn", [Send(0, v("a")), Send(1, v("b"))])
    r.complete(invocation, OpType.INFO)
    poll(r, "consumer", 0, (0, "a"))
    assert found(check(r.history())) == {"unseen": 1}  # b: committed, since a was read


def test_skipping_over_a_value_between_polls_and_within_one() -> None:
    r = recorder()
    for offset, value in enumerate("abcde"):
        send(r, "producer", 0, value, offset)
    first = poll(r, "consumer", 0, (0, "a"))
    second = poll(r, "consumer", 0, (2, "c"), (4, "e"))
    poll(r, "other", 0, (1, "b"))  # someone read them: not lost
    poll(r, "another", 0, (3, "d"))
    report = check(r.history())
    assert found(report) == {"poll-skip": 1, "int-poll-skip": 1}
    assert report.anomalies["poll-skip"][0].ops == (first, second)
    assert "skipping ['b']" in report.anomalies["poll-skip"][0].detail
    assert report.anomalies["int-poll-skip"][0].ops == (second,)


def test_a_gap_of_aborted_records_or_markers_is_no_skip() -> None:
    r = recorder()
    send(r, "producer", 0, "a", 0)
    aborted = r.invoke("producer", "txn", [Send(0, v("x"), 1)])
    r.complete(aborted, OpType.FAIL)
    send(r, "producer", 0, "b", 3)  # offset 2: the abort marker
    poll(r, "consumer", 0, (0, "a"), (3, "b"))
    assert check(r.history()).clean


def test_going_back_between_polls_and_within_one_is_nonmonotonic() -> None:
    r = recorder()
    for offset, value in enumerate("abc"):
        send(r, "producer", 0, value, offset)
    first = poll(r, "consumer", 0, (0, "a"), (1, "b"), (2, "c"))
    second = poll(r, "consumer", 0, (1, "b"), (2, "c"))
    third = poll(r, "consumer", 0, (2, "c"), (0, "a"))
    report = check(r.history())
    assert found(report) == {"nonmonotonic-poll": 2, "int-nonmonotonic-poll": 1}
    assert [a.ops for a in report.anomalies["nonmonotonic-poll"]] == [
        (first, second),
        (second, third),
    ]
    assert report.anomalies["int-nonmonotonic-poll"][0].ops == (third,)


def test_a_later_send_landing_before_an_earlier_one_is_nonmonotonic() -> None:
    r = recorder()
    earlier = send(r, "producer", 0, "b", 1)
    later = send(r, "producer", 0, "a", 0)
    within = r.invoke("producer", "txn", [Send(1, v("d")), Send(1, v("c"))])
    txn = r.complete(within, OpType.OK, [Send(1, v("d"), 1), Send(1, v("c"), 0)])
    poll(r, "consumer", 0, (0, "a"), (1, "b"))
    poll(r, "consumer", 1, (0, "c"), (1, "d"))
    report = check(r.history())
    assert found(report) == {"nonmonotonic-send": 1, "int-nonmonotonic-send": 1}
    assert report.anomalies["nonmonotonic-send"][0].ops == (earlier, later)
    assert report.anomalies["int-nonmonotonic-send"][0].ops == (txn,)


def test_sends_are_ordered_as_invoked_not_as_acknowledged() -> None:
    r = recorder()
    first = r.invoke("producer", "send", [Send(0, v("a"))])
    second = r.invoke("producer", "send", [Send(0, v("b"))])
    r.complete(second, OpType.OK, [Send(0, v("b"), 1)])
    r.complete(first, OpType.OK, [Send(0, v("a"), 0)])
    poll(r, "consumer", 0, (0, "a"), (1, "b"))
    assert check(r.history()).clean


def txn(
    r: Recorder, process: str, *sends: tuple[int, str, int], polls: tuple[Poll, ...] = ()
) -> Op:
    invocation = r.invoke(process, "txn", [Send(p, v(value)) for p, value, _ in sends])
    return r.complete(
        invocation, OpType.OK, [*(Send(p, v(value), o) for p, value, o in sends), *polls]
    )


def test_interleaved_transactional_writes_are_g0_and_tolerated() -> None:
    r = recorder()
    t1 = txn(r, "p1", (0, "a", 0), (1, "a2", 1))
    t2 = txn(r, "p2", (0, "b", 1), (1, "b2", 0))
    poll(r, "consumer", 0, (0, "a"), (1, "b"))
    poll(r, "consumer", 1, (0, "b2"), (1, "a2"))
    report = check(r.history())
    assert found(report) == {"G0": 1}
    assert set(report.anomalies["G0"][0].ops) == {t1, t2}
    assert "-ww->" in report.anomalies["G0"][0].detail
    assert report.bad() == {} and report.bad(tolerate=()) == {"G0": 1}


def test_each_reading_the_others_write_is_g1c() -> None:
    r = recorder()
    t1 = txn(r, "p1", (0, "a", 0), polls=(Poll(1, 0, v("b")),))
    t2 = txn(r, "p2", (1, "b", 0), polls=(Poll(0, 0, v("a")),))
    report = check(r.history())
    assert found(report) == {"G1c": 1}
    anomaly = report.anomalies["G1c"][0]
    assert set(anomaly.ops) == {t1, t2} and anomaly.detail.count("-wr->") == 2
    assert report.bad() == {"G1c": 1}


def test_a_write_read_cycle_closed_by_a_write_write_edge_is_tolerated_as_g1c_ww() -> None:
    """t1 <ww t2 <wr t1: Jepsen expects it of Kafka, whose transactions do not isolate writes
    (kafka.clj, allowed-error-types)."""
    r = recorder()
    t1 = txn(r, "p1", (0, "a", 0), polls=(Poll(1, 0, v("b")),))
    t2 = txn(r, "p2", (1, "b", 0), (0, "c", 1))
    poll(r, "consumer", 0, (0, "a"), (1, "c"))
    report = check(r.history())
    assert found(report) == {"G1c-ww": 1}
    anomaly = report.anomalies["G1c-ww"][0]
    assert set(anomaly.ops) == {t1, t2}
    assert "-ww->" in anomaly.detail and "-wr->" in anomaly.detail
    assert report.bad() == {} and report.bad(tolerate=()) == {"G1c-ww": 1}


def test_a_write_read_cycle_beside_write_write_edges_is_still_g1c() -> None:
    """The two read each other's write (a wr-only cycle) and also interleave writes."""
    r = recorder()
    t1 = txn(r, "p1", (0, "a", 0), (2, "a2", 1), polls=(Poll(1, 0, v("b")),))
    t2 = txn(r, "p2", (1, "b", 0), (2, "b2", 0), polls=(Poll(0, 0, v("a")),))
    poll(r, "consumer", 2, (0, "b2"), (1, "a2"))
    report = check(r.history())
    assert found(report) == {"G1c": 1}
    assert set(report.anomalies["G1c"][0].ops) == {t1, t2}
    assert report.bad() == {"G1c": 1}


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.integers(0, 2), min_size=1, max_size=30),
    st.lists(st.integers(1, 4), min_size=1, max_size=10),
)
def test_random_clean_histories_are_clean(partitions: list[int], batches: list[int]) -> None:
    """One producer's acknowledged sends, read back in order in polls of random sizes."""
    r = recorder()
    ends = [0, 0, 0]
    written: list[tuple[int, int, str]] = []
    for n, partition in enumerate(partitions):
        send(r, "producer", partition, f"v{n}", ends[partition])
        written.append((partition, ends[partition], f"v{n}"))
        ends[partition] += 1
    for partition in range(3):
        records = [(o, value) for p, o, value in written if p == partition]
        sizes = itertools.cycle(batches)
        while records:
            size = next(sizes)
            poll(r, "consumer", partition, *records[:size])
            records = records[size:]
    assert check(r.history()).clean


def test_a_value_read_during_the_run_and_not_at_the_end_vanished() -> None:
    r = recorder()
    send(r, "producer", 0, "a", 0)
    reader = poll(r, "consumer", 0, (0, "a"), (1, "b"))  # b: never acknowledged, but read
    r.final_read({0: [Poll(0, 0, v("a"))]})
    report = check(r.history())
    assert found(report) == {"vanished": 1}
    assert report.anomalies["vanished"][0].ops == (reader,)


def test_a_send_whose_partition_the_client_chose_is_placed_by_the_reads() -> None:
    r = recorder()
    first = r.complete(r.invoke("producer", "send", [Send(None, v("a"))]), OpType.INFO)
    second = send(r, "producer", 0, "b", 0)
    r.final_read({0: [Poll(0, 0, v("b")), Poll(0, 1, v("a"))]})
    report = check(r.history())
    # a was sent first, so it must not land after b (idempotent producer's order, KIP-98)
    assert found(report) == {"nonmonotonic-send": 1}
    assert report.anomalies["nonmonotonic-send"][0].ops == (first, second)


def test_an_op_names_its_first_micro_ops_only() -> None:
    r = recorder()
    op = poll(r, "reader", 0, *((o, f"v{o}") for o in range(10)))
    assert str(op).startswith("#1 reader ok poll [poll 0@0=v0 poll 0@1=v1")
    assert str(op).endswith("poll 0@5=v5 … 4 more]")


def test_checking_reads_each_operations_micro_ops_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Work stays linear in the history: an op's sends and polls are split out once, however
    many values it read (a final reader holds a third of them; rescanning it per value was
    quadratic: 100k sends took minutes)."""
    r = recorder()
    n, partitions = 10_000, 3
    logs: dict[int, list[Poll]] = {p: [] for p in range(partitions)}
    for i in range(n):
        p = i % partitions
        offset = len(logs[p])
        send(r, "producer", p, f"v{i}", offset)
        logs[p].append(Poll(p, offset, v(f"v{i}")))
    for log in logs.values():
        for k in range(0, len(log), 5):
            r.ok("consumer", "poll", log[k : k + 5])
    r.final_read(logs)
    ops = r.history()
    scanned = 0
    split = history.micro_ops

    def counting(value: Iterable[MicroOp], kind: type[history.M]) -> tuple[history.M, ...]:
        nonlocal scanned
        value = tuple(value)
        scanned += len(value)
        return split(value, kind)

    monkeypatch.setattr(history, "micro_ops", counting)
    assert check(ops).clean
    assert 0 < scanned <= 2 * sum(len(op.value) for op in ops)


def test_a_history_has_one_final_read() -> None:
    r = recorder()
    send(r, "producer", 0, "a", 0)
    r.final_read({0: [Poll(0, 0, v("a"))]})
    closed = r.history()
    r.final_read({0: [Poll(0, 0, v("a"))]})  # a workload's history() asked twice
    assert r.history() == closed and check(closed).clean
    with pytest.raises(ValueError, match="different final read"):
        r.final_read({0: [Poll(0, 0, v("a")), Poll(0, 1, v("b"))]})
    assert r.history() == closed
