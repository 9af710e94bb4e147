"""``consumer_groups_views``: Kafka 3.9 ``ConsumerGroupCommand``'s tables and messages, as
``DescribeConsumerGroupTest`` checks them (``testDescribeOffsetsOfExistingGroup``,
``testDescribeMembersOfExistingGroup``, ``testDescribeStateOfExistingGroup``,
``testDescribeNonExistingGroup``, ``testDescribeExistingGroupWithNoMembers``) and
``DeleteConsumerGroupsTest`` / ``DeleteOffsetsConsumerGroupCommandIntegrationTest``."""

from __future__ import annotations

from pykraft.consumer_groups_views import (
    GroupDescription,
    Member,
    OffsetRow,
    assignment_text,
    delete_groups_lines,
    delete_offsets_lines,
    group_info_lines,
    list_with_state,
    members_table,
    offset_rows,
    offsets_table,
    reset_table,
    state_message,
    state_table,
)
from pykraft.storage.topic_partition import TopicPartition

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))
ALICE = Member("consumer-1-aaaa", "/127.0.0.1", "consumer-1", assignment=(T1, T0))
BOB = Member("consumer-2-bbbb", "/10.0.0.2", "consumer-2", assignment=())
STABLE = GroupDescription("g", "Stable", (BOB, ALICE), "localhost:9092  (1)", "range")


def test_offset_rows_follow_collect_groups_offsets() -> None:
    rows = offset_rows(STABLE, {T0: 5, T2: 9}, {T0: 8, T1: 3, T2: 9})
    assert rows == [
        OffsetRow("g", "t", 0, 5, 8, "consumer-1-aaaa", "/127.0.0.1", "consumer-1"),
        OffsetRow("g", "t", 1, None, 3, "consumer-1-aaaa", "/127.0.0.1", "consumer-1"),
        OffsetRow("g", "t", 2, 9, 9),  # committed, held by no member: "-" columns
    ]
    assert [r.lag for r in rows] == [3, None, 0]


def test_offsets_table_has_kafkas_columns_and_widths() -> None:
    rows = offset_rows(STABLE, {T0: 5}, {T0: 8, T1: 3})
    assert offsets_table(rows) == [
        "",
        "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG     "
        "        CONSUMER-ID     HOST            CLIENT-ID",
        "g               t               0          5               8               3       "
        "        consumer-1-aaaa /127.0.0.1      consumer-1",
        "g               t               1          -               3               -       "
        "        consumer-1-aaaa /127.0.0.1      consumer-1",
        "",
    ]


def test_long_values_widen_their_columns() -> None:
    long_topic = "a-topic-name-longer-than-fifteen"
    rows = [OffsetRow("g", long_topic, 0, 1, 2)]
    header = offsets_table(rows)[1]
    assert header.startswith("GROUP           TOPIC" + " " * (len(long_topic) - 5) + " PARTITION")


def test_state_messages() -> None:
    dead, shown = state_message("g", "Dead", 0)
    assert (dead.out, shown) == (("", "Error: Consumer group 'g' does not exist."), False)
    empty, shown = state_message("g", "Empty", 2)
    assert (empty.err, shown) == (("", "Consumer group 'g' has no active members."), True)
    moving, shown = state_message("g", "PreparingRebalance", 0)
    assert (moving.err, shown) == (("", "Warning: Consumer group 'g' is rebalancing."), False)
    stable, shown = state_message("g", "Stable", 1)
    assert (stable.out, stable.err, shown) == ((), (), True)


def test_members_table() -> None:
    assert members_table(STABLE, verbose=False) == [
        "",
        "GROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS     ",
        "g               consumer-2-bbbb /10.0.0.2       consumer-2      0               ",
        "g               consumer-1-aaaa /127.0.0.1      consumer-1      2               ",
        "",
    ]
    verbose = members_table(STABLE, verbose=True)
    assert verbose[1].endswith("#PARTITIONS     ASSIGNMENT")
    assert verbose[2].endswith("0               -")
    assert verbose[3].endswith("2               t(0,1)")


def test_members_table_shows_instance_ids_when_any() -> None:
    static = GroupDescription("g", "Stable", (Member("m", "h", "c", "instance-1", (T0,)),))
    assert members_table(static, verbose=False)[1].split() == [
        "GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
    ]  # fmt: skip


def test_assignment_text_groups_by_topic() -> None:
    assert assignment_text([TopicPartition("b", 1), T1, T0]) == "b(1), t(0,1)"
    assert assignment_text([]) == "-"


def test_state_table() -> None:
    assert state_table(STABLE) == [
        "",
        "GROUP           COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE                "
        "#MEMBERS",
        "g               localhost:9092  (1)       range                Stable               2",
        "",
    ]


def test_list_with_state() -> None:
    assert list_with_state([("g", "Stable")]) == [
        "GROUP" + " " * 20 + " STATE" + " " * 15,
        "g" + " " * 24 + " Stable" + " " * 14,
    ]


def test_list_with_type_and_state() -> None:
    # ConsumerGroupCommand.printGroupInfo (Kafka 3.8+): TYPE before STATE, 20 wide each.
    listings = [("a-long-consumer-group", "Consumer", "Stable"), ("g", "Classic", "Empty")]
    assert group_info_lines(listings, True, True) == [
        "GROUP".ljust(31) + " " + "TYPE".ljust(20) + " " + "STATE".ljust(20),
        "a-long-consumer-group".ljust(31) + " " + "Consumer".ljust(20) + " " + "Stable".ljust(20),
        "g".ljust(31) + " " + "Classic".ljust(20) + " " + "Empty".ljust(20),
    ]
    assert group_info_lines(listings[1:], True, False) == [
        "GROUP".ljust(25) + " " + "TYPE".ljust(20),
        "g".ljust(25) + " " + "Classic".ljust(20),
    ]
    assert group_info_lines([], True, False) == ["GROUP".ljust(25) + " " + "TYPE".ljust(20)]


def test_reset_table() -> None:
    assert reset_table({"g": {T1: 7, T0: 3}}) == [
        "",
        "GROUP           TOPIC           PARTITION  NEW-OFFSET",
        "g               t               0          3",
        "g               t               1          7",
        "",
    ]
    assert reset_table({}) == [""]


def test_delete_groups_lines() -> None:
    assert delete_groups_lines({"a": None, "b": None}) == [
        "Deletion of requested consumer groups ('a', 'b') was successful."
    ]
    assert delete_groups_lines({"a": None, "b": "The group is not empty."}) == [
        "",
        "Error: Deletion of some consumer groups failed:",
        "* Group 'b' could not be deleted due to: The group is not empty.",
        "",
        "These consumer groups were deleted successfully: 'a'",
    ]


def test_delete_offsets_lines() -> None:
    assert delete_offsets_lines("g", None, {T1: None, T0: None}) == [
        "Request succeeded for deleting offsets from group g.",
        "",
        "TOPIC           PARTITION  STATUS         ",
        "t               0          Successful     ",
        "t               1          Successful     ",
    ]


def test_verbose_offsets_add_the_committed_leader_epoch() -> None:
    rows = offset_rows(STABLE, {T0: 5, T2: 9}, {T0: 8, T2: 9}, leader_epochs={T0: 4})
    table = offsets_table(rows, verbose=True)
    assert table[1].split() == [
        "GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "CURRENT-OFFSET", "LOG-END-OFFSET",
        "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID",
    ]  # fmt: skip
    assert table[2].split()[:5] == ["g", "t", "0", "4", "5"]
    assert table[4].split()[:5] == ["g", "t", "2", "-", "9"]  # no epoch recorded: "-"
    assert table[1].index("CURRENT-OFFSET") == table[1].index("LEADER-EPOCH") + 16
