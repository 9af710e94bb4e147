"""``consumer_groups_plan``: the reset scenarios of Kafka's ``GroupOffsetsResetter`` and the
parsing of ``ConsumerGroupCommand``'s arguments, mirroring Kafka's ``ResetConsumerGroupOffsetTest``
(``testResetOffsetsToSpecificOffset``, ``testResetOffsetsShiftPlus/Minus``,
``testResetOffsetsShiftByLowerThanEarliest``, ``testResetOffsetsShiftByHigherThanLatest``,
``testResetOffsetsToEarliest``, ``testResetOffsetsToLatest``, ``testResetOffsetsToCurrentOffset``,
``testResetOffsetsExportImportPlan*``) and ``UtilsTest.testGetDateTime``."""

from __future__ import annotations

import pytest

from pykraft.consumer_groups_plan import (
    GroupCommandError,
    LogOffsets,
    Scenario,
    export_csv,
    parse_datetime_ms,
    parse_duration_ms,
    parse_reset_plan,
    parse_topic_arg,
    partitions_of,
    plan_reset,
)
from pykraft.storage.topic_partition import TopicPartition

T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)
# t-0 holds [10, 100), t-1 holds [0, 50).
LOGS = LogOffsets(log_start={T0: 10, T1: 0}, log_end={T0: 100, T1: 50})


def check(scenario: Scenario, expected: dict[TopicPartition, int], **kwargs: object) -> None:
    committed = kwargs.pop("committed", {T0: 40, T1: 20})
    offsets = kwargs.pop("offsets", LOGS)
    plan = plan_reset(scenario, [T0, T1], committed, offsets, **kwargs)  # type: ignore[arg-type]
    assert plan.offsets == expected


def test_to_offset_is_clamped_into_the_log() -> None:
    check(Scenario.TO_OFFSET, {T0: 30, T1: 30}, value=30)
    check(Scenario.TO_OFFSET, {T0: 100, T1: 50}, value=500)  # testResetOffsetsToSpecificOffset
    check(Scenario.TO_OFFSET, {T0: 10, T1: 0}, value=0)


def test_to_offset_warns_as_check_offsets_range_does() -> None:
    plan = plan_reset(Scenario.TO_OFFSET, [T0], {}, LOGS, value=500)
    assert plan.warnings == (
        "New offset (500) is higher than latest offset for topic partition t-0. "
        "Value will be set to 100.",
    )
    plan = plan_reset(Scenario.TO_OFFSET, [T0], {}, LOGS, value=3)
    assert plan.warnings == (
        "New offset (3) is lower than earliest offset for topic partition t-0. "
        "Value will be set to 10.",
    )


def test_earliest_latest_and_current() -> None:
    check(Scenario.TO_EARLIEST, {T0: 10, T1: 0})
    check(Scenario.TO_LATEST, {T0: 100, T1: 50})
    check(Scenario.TO_CURRENT, {T0: 40, T1: 20})
    # A partition with no committed offset goes to the log end (resetToCurrent).
    check(Scenario.TO_CURRENT, {T0: 40, T1: 50}, committed={T0: 40})


def test_earliest_without_an_answer_is_an_error() -> None:
    with pytest.raises(
        GroupCommandError, match="Error getting starting offset of topic partition: t-1"
    ):
        check(Scenario.TO_EARLIEST, {}, offsets=LogOffsets(log_start={T0: 1}, log_end={}))


def test_shift_by_moves_from_the_committed_offset_within_the_log() -> None:
    check(Scenario.SHIFT_BY, {T0: 45, T1: 25}, value=5)  # testResetOffsetsShiftPlus
    check(Scenario.SHIFT_BY, {T0: 35, T1: 15}, value=-5)  # testResetOffsetsShiftMinus
    check(Scenario.SHIFT_BY, {T0: 10, T1: 0}, value=-1000)  # ...ShiftByLowerThanEarliest
    check(Scenario.SHIFT_BY, {T0: 100, T1: 50}, value=1000)  # ...ShiftByHigherThanLatest


def test_shift_by_needs_a_committed_offset() -> None:
    with pytest.raises(
        GroupCommandError,
        match="Cannot shift offset for partition t-1 since there is no current committed offset",
    ):
        check(Scenario.SHIFT_BY, {}, committed={T0: 40}, value=1)


def test_by_time_falls_back_to_the_log_end_with_kafkas_warning() -> None:
    offsets = LogOffsets(log_start={}, log_end={T0: 100, T1: 50}, for_timestamp={T0: 42, T1: -1})
    plan = plan_reset(Scenario.TO_DATETIME, [T0, T1], {}, offsets)
    assert plan.offsets == {T0: 42, T1: 50}
    assert plan.warnings == (
        "Warn: Partition 1 from topic t is empty. Falling back to latest known offset.",
    )
    assert plan_reset(Scenario.BY_DURATION, [T0], {}, offsets).offsets == {T0: 42}


def test_from_file_is_clamped_too() -> None:
    plan = plan_reset(Scenario.FROM_FILE, [T0], {}, LOGS, from_file={T0: 7, T1: 30})
    assert plan.offsets == {T0: 10, T1: 30}


@pytest.mark.parametrize(
    ("arg", "expected"),
    [("t", ("t", None)), ("t:0", ("t", (0,))), ("t:0,2,5", ("t", (0, 2, 5)))],
)
def test_topic_args(arg: str, expected: tuple[str, tuple[int, ...] | None]) -> None:
    assert parse_topic_arg(arg) == expected


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("t:x", "Invalid partition 'x' specified in topic arg 't:x''"),
        ("t:0:1", "Invalid topic arg 't:0:1', expected topic name and partitions"),
        ("t:", "Invalid topic arg 't:', expected topic name and partitions"),
    ],
)
def test_bad_topic_args(arg: str, message: str) -> None:
    with pytest.raises(GroupCommandError) as raised:
        parse_topic_arg(arg)
    assert str(raised.value) == message


def test_partitions_of_puts_named_partitions_first() -> None:
    assert partitions_of(["u", "t:1"], {"u": 2}) == [T1, U0, TopicPartition("u", 1)]


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1970-01-01T00:00:00.000", 0),
        ("1970-01-01T00:00:01.5", 1500),
        ("2017-11-22T13:37:00.000Z", 1511357820000),
        ("2017-11-22T15:37:00.000+02:00", 1511357820000),
        ("2017-11-22T11:37:00.000-0200", 1511357820000),
        ("2017-11-22T13:37:00", 1511357820000),
    ],
)
def test_datetimes_parse_as_kafkas_get_date_time(text: str, ms: int) -> None:
    assert parse_datetime_ms(text) == ms


@pytest.mark.parametrize("text", ["2017-11-22", "2017-11-22T25:00:00.000", "yesterdayTnoon"])
def test_bad_datetimes(text: str) -> None:
    with pytest.raises(GroupCommandError):
        parse_datetime_ms(text)


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("PT1H", 3_600_000),
        ("PT0.5S", 500),
        ("P1DT2H3M4S", ((24 + 2) * 60 + 3) * 60_000 + 4000),
        ("-PT10M", -600_000),
        ("pt15m", 900_000),
    ],
)
def test_durations_parse_as_java_durations(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["1h", "PT", "P", "PTXS", ""])
def test_bad_durations(text: str) -> None:
    with pytest.raises(GroupCommandError, match="Text cannot be parsed to a Duration"):
        parse_duration_ms(text)


def test_export_and_import_round_trip_one_group() -> None:
    plans = {"g": {T0: 5, T1: 6}}
    text = export_csv(plans, single_group=True)
    assert text == "t,0,5\nt,1,6\n"
    assert parse_reset_plan(text, ["g"]) == plans


def test_export_and_import_round_trip_several_groups() -> None:
    plans = {"g,1": {T0: 5}, "h": {U0: 0}}
    text = export_csv(plans, single_group=False)
    assert text == '"g,1",t,0,5\nh,u,0,0\n'
    assert parse_reset_plan(text, ["g,1", "h"]) == plans


@pytest.mark.parametrize("text", ["t,0\n", "t,x,1\n", "a,b,c,d,e\n"])
def test_bad_reset_plans(text: str) -> None:
    with pytest.raises(GroupCommandError, match="Invalid reset plan row"):
        parse_reset_plan(text, ["g"])
