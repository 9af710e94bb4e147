"""``get_offsets_filter``: Kafka's ``GetOffsetShellParsingTest`` cases
(``testTopicPartitionFilter*``, ``testPartitionFilterForSingleIndex``,
``testPartitionFilterForRange``,
``testPartitionFilterForLowerBound``, ``testPartitionFilterForUpperBound``,
``testInvalidTimeValue``, ``testInvalidOffset``) and ``GetOffsetShellTest``'s ordering."""

from __future__ import annotations

import pytest

from pykraft.get_offsets_filter import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    GetOffsetsError,
    matching_partitions,
    output_lines,
    parse_time,
    rules_of_topic_and_partitions,
    rules_of_topic_partitions,
)
from pykraft.storage.topic_partition import TopicPartition

TOPICS = {"topic1": 3, "topic2": 3, "other": 1, "__consumer_offsets": 2}


def chosen(rules_spec: str) -> set[str]:
    rules = rules_of_topic_partitions(rules_spec)
    return {str(p) for p in matching_partitions(TOPICS, rules, exclude_internal=False)}


def test_topic_regex_must_match_the_whole_name() -> None:
    rules = rules_of_topic_and_partitions("topic", None)
    with pytest.raises(GetOffsetsError, match="Could not match any topic-partitions"):
        matching_partitions(TOPICS, rules, exclude_internal=False)
    rules = rules_of_topic_and_partitions("topic.*", "0,2")
    found = matching_partitions(TOPICS, rules, exclude_internal=False)
    assert {str(p) for p in found} == {"topic1-0", "topic1-2", "topic2-0", "topic2-2"}


def test_no_topic_is_every_topic_and_internal_ones_can_be_excluded() -> None:
    every = rules_of_topic_and_partitions(None, None)
    assert len(matching_partitions(TOPICS, every, exclude_internal=False)) == 9
    assert len(matching_partitions(TOPICS, every, exclude_internal=True)) == 7


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("topic1:1", {"topic1-1"}),
        ("topic1:1-3", {"topic1-1", "topic1-2"}),  # upper bound exclusive
        ("topic1:2-", {"topic1-2"}),
        ("topic1:-1", {"topic1-0"}),
        ("topic1,other", {"topic1-0", "topic1-1", "topic1-2", "other-0"}),
        (":0", {"topic1-0", "topic2-0", "other-0", "__consumer_offsets-0"}),
        ("topic.*:0,other:0", {"topic1-0", "topic2-0", "other-0"}),
    ],
)
def test_topic_partition_rules(spec: str, expected: set[str]) -> None:
    assert chosen(spec) == expected


def test_bad_rules_and_partitions() -> None:
    with pytest.raises(GetOffsetsError, match="Invalid rule specification: t:x"):
        rules_of_topic_partitions("t:x")
    with pytest.raises(
        GetOffsetsError,
        match="--partitions expects a comma separated list of numeric partition ids, "
        "but received: 0,a",
    ):
        rules_of_topic_and_partitions("t", "0,a")


@pytest.mark.parametrize(
    ("text", "timestamp"),
    [("latest", LATEST), ("-1", LATEST), ("earliest", EARLIEST), ("-2", EARLIEST),
     ("max-timestamp", MAX_TIMESTAMP), ("earliest-local", -4), ("latest-tiered", -5),
     ("1700000000000", 1700000000000)],
)  # fmt: skip
def test_times(text: str, timestamp: int) -> None:
    assert parse_time(text) == timestamp


def test_a_bad_time_is_kafkas_message() -> None:
    with pytest.raises(
        GetOffsetsError, match=r"^Malformed time argument yesterday\. Please use -1"
    ):
        parse_time("yesterday")


def test_output_is_sorted_as_text_and_skips_unknown_offsets() -> None:
    offsets = {TopicPartition("t", 2): 5, TopicPartition("t", 10): 7, TopicPartition("s", 0): -1}
    assert output_lines(offsets) == ["t:10:7", "t:2:5"]
