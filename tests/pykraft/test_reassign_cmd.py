"""``pykraft reassign-partitions`` without a cluster: Kafka's ``ReassignPartitionsCommandTest`` /
``ReassignPartitionsUnitTest`` cases (testParseGenerateAssignmentArgs,
testGenerateAssignmentWithInvalidPartitionsFails, testReplicaAssignmentToBrokers,
testCurrentPartitionReplicaAssignmentToString, testMoveMap/testLeaderThrottle...,
testPartitionReassignmentStatesToString) over an admin double that stands in for the network
only (``KafkaAdminClient`` runs against real brokers in ``tests/integration``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from pykraft import cli, reassign_cmd
from pykraft.admin_codec import PartitionMetadata, TopicMetadata
from pykraft.admin_reassignments import ConfigChange, ConfigOp, PartitionReassignment
from pykraft.protocol.errors import Errors
from pykraft.reassign_plan import (
    ReassignPlanError,
    assign_replicas_to_brokers,
    format_assignment,
    list_lines,
    parse_reassignment,
    parse_topics_to_move,
    throttles_for,
    verify_lines,
)
from pykraft.storage.topic_partition import TopicPartition

FOO0, FOO1, BAR0 = TopicPartition("foo", 0), TopicPartition("foo", 1), TopicPartition("bar", 0)


class FakeAdmin:
    def __init__(self, assignment: dict[TopicPartition, tuple[int, ...]]) -> None:
        self.assignment = assignment
        self.brokers = [10, 11, 12]
        self.in_progress: dict[TopicPartition, PartitionReassignment] = {}
        self.configs: list[ConfigChange] = []
        self.altered: list[Mapping[TopicPartition, Sequence[int] | None]] = []

    async def describe_topics(self, topics: Sequence[str]) -> dict[str, TopicMetadata]:
        return {
            name: TopicMetadata(
                name,
                Errors.NONE,
                False,
                tuple(
                    PartitionMetadata(tp.partition, Errors.NONE, replicas[0], replicas)
                    for tp, replicas in sorted(self.assignment.items())
                    if tp.topic == name
                ),
            )
            for name in topics
        }

    async def broker_ids(self) -> list[int]:
        return self.brokers

    async def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, tuple[Errors, str | None]]:
        self.altered.append(dict(targets))
        answers: dict[TopicPartition, tuple[Errors, str | None]] = {}
        for tp, target in targets.items():
            if target is None:
                self.in_progress.pop(tp)
            else:
                self.in_progress[tp] = PartitionReassignment(tuple(target), (), ())
            answers[tp] = (Errors.NONE, None)
        return answers

    async def list_partition_reassignments(
        self, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        return {
            tp: r for tp, r in self.in_progress.items() if partitions is None or tp in partitions
        }

    async def incremental_alter_configs(self, changes: Sequence[ConfigChange]) -> None:
        self.configs.extend(changes)


def command(admin: FakeAdmin, tmp_path: Path, *argv: str) -> tuple[int, list[str]]:
    parser = argparse.ArgumentParser()
    reassign_cmd.add_arguments(parser)
    args = parser.parse_args(["--bootstrap-server", "h:9092", *argv])
    action = reassign_cmd.check_args(args)
    lines: list[str] = []
    code = asyncio.run(reassign_cmd.execute(action, args, admin, lines.append, random.Random(1)))
    return code, lines


def plan_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "plan.json"
    path.write_text(text)
    return str(path)


MOVE = '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[11,12]}]}'


# ---------------------------------------------------------------- files and placement


def test_the_command_is_registered() -> None:
    args = cli.build_parser().parse_args(["reassign-partitions", "--list"])
    assert args._module is reassign_cmd


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"version":1,"partitions":[]}', "Partition reassignment list cannot be empty"),
        (
            '{"partitions":[{"topic":"foo","partition":0,"replicas":[1,1]}]}',
            "duplicate replicas for partition: foo-0",
        ),
        (
            '{"partitions":[{"topic":"foo","partition":0,"replicas":[1]},'
            '{"topic":"foo","partition":0,"replicas":[2]}]}',
            "duplicate partitions: foo-0",
        ),
        ('{"partitions":[{"topic":"foo","partition":0,"replicas":[]}]}', "cannot be empty"),
        (
            '{"partitions":[{"topic":"foo","partition":0,"replicas":[1],"log_dirs":["/d"]}]}',
            "not supported",
        ),
        ("not json", "Unable to parse"),
    ],
)
def test_bad_reassignment_files(text: str, message: str) -> None:
    with pytest.raises(ReassignPlanError, match=message):
        parse_reassignment(text)


def test_files_round_trip_in_kafkas_format() -> None:
    plan = parse_reassignment(
        '{"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[3,1],'
        '"log_dirs":["any","any"]},{"topic":"bar","partition":0,"replicas":[2]}]}'
    )
    assert plan == {FOO1: (3, 1), BAR0: (2,)}
    assert json.loads(format_assignment(plan)) == {
        "version": 1,
        "partitions": [
            {"topic": "bar", "partition": 0, "replicas": [2], "log_dirs": ["any"]},
            {"topic": "foo", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
        ],
    }
    assert parse_topics_to_move('{"topics":[{"topic":"foo"}],"version":1}') == ["foo"]
    with pytest.raises(ReassignPlanError, match="duplicate"):
        parse_topics_to_move('{"topics":[{"topic":"foo"},{"topic":"foo"}]}')


class FixedStart:
    """Kafka's ``fixedStartIndex``: both random draws return ``start``."""

    def __init__(self, start: int) -> None:
        self.start = start

    def randrange(self, stop: int, /) -> int:
        return self.start % stop


def test_rack_unaware_assignment_matches_kafkas_vector() -> None:
    # AdminRackAwareTest/AdminUtilsTest.testReplicaAssignment: 5 brokers, 10 partitions, RF 3,
    # fixed start index 0.
    expected = [
        (0, 1, 2), (1, 2, 3), (2, 3, 4), (3, 4, 0), (4, 0, 1),
        (0, 2, 3), (1, 3, 4), (2, 4, 0), (3, 0, 1), (4, 1, 2),
    ]  # fmt: skip
    assert assign_replicas_to_brokers(10, 3, [0, 1, 2, 3, 4], FixedStart(0)) == expected
    with pytest.raises(ReassignPlanError, match="larger than available brokers: 2"):
        assign_replicas_to_brokers(1, 3, [0, 1], FixedStart(0))


# ---------------------------------------------------------------- throttles and messages


def test_throttles_cover_the_current_replicas_and_the_added_ones() -> None:
    current = {FOO0: (10, 11), FOO1: (11, 12), BAR0: (10,)}
    proposed = {FOO0: (11, 12), FOO1: (11, 12), BAR0: (12, 10)}
    throttles = throttles_for(current, proposed)
    # foo-1 does not move: it is throttled nowhere.
    assert throttles.topics == {"bar": ("0:10", "0:12"), "foo": ("0:10,0:11", "0:12")}
    assert throttles.brokers == (10, 11, 12)


def test_throttles_keep_the_moves_already_running() -> None:
    # ReassignPartitionsUnitTest.testMoveMap: foo-0 runs [1,2,3] -> adding 4 (sources 1,2,3);
    # the new plan re-targets foo-0 and moves bar-0; foo-1 runs on and keeps its throttles.
    current = {FOO0: (1, 2, 3, 4), FOO1: (4, 5, 6, 7, 3), BAR0: (2, 3, 4)}
    running = {FOO0: ((1, 2, 3, 4), (4,)), FOO1: ((4, 5, 6, 7, 3), (7, 3))}
    proposed = {FOO0: (1, 2, 5), BAR0: (1, 2, 3)}
    throttles = throttles_for(current, proposed, running)
    assert throttles.topics == {
        "bar": ("0:2,0:3,0:4", "0:1"),
        # foo-0's sources stay 1,2,3 (4 is only being added), its destination is now 5.
        "foo": ("0:1,0:2,0:3,1:4,1:5,1:6", "0:5,1:3,1:7"),
    }
    assert throttles.brokers == (1, 2, 3, 4, 5, 6, 7)


def test_verify_and_list_lines() -> None:
    targets = {FOO0: (11, 12), FOO1: (10, 11), BAR0: (12,)}
    current = {FOO0: (11, 12), FOO1: (11, 12, 10), BAR0: (10,)}
    lines, done = verify_lines(targets, current, [FOO1])
    assert not done
    assert lines == [
        "Status of partition reassignment:",
        "There is no active reassignment of partition bar-0, but replica set is 10 rather than 12.",
        "Reassignment of partition foo-0 is completed.",
        "Reassignment of partition foo-1 is still in progress.",
    ]
    assert list_lines({}) == ["No partition reassignments found."]
    assert list_lines({FOO1: ((10, 11, 12), (10,), (12,))}) == [
        "Current partition reassignments:",
        "foo-1: replicas: 10,11,12. adding: 10. removing: 12.",
    ]


# ---------------------------------------------------------------- the actions


def test_execute_prints_the_rollback_sets_throttles_and_starts(tmp_path: Path) -> None:
    admin = FakeAdmin({FOO0: (10, 11), FOO1: (10, 11)})
    code, lines = command(
        admin, tmp_path, "--execute", "--reassignment-json-file", plan_file(tmp_path, MOVE),
        "--throttle", "1000000",
    )  # fmt: skip
    assert code == 0
    assert lines == [
        "Current partition replica assignment",
        "",
        '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[10,11],'
        '"log_dirs":["any","any"]}]}',
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
        "Warning: You must run --verify periodically, until the reassignment completes, to "
        "ensure the throttle is removed.",
        "The inter-broker throttle limit was set to 1000000 B/s",
        "Successfully started partition reassignment for foo-0",
    ]
    assert admin.altered == [{FOO0: (11, 12)}]
    sets = {(c.resource_type, c.resource_name, c.name, c.value) for c in admin.configs}
    assert sets == {
        (2, "foo", "leader.replication.throttled.replicas", "0:10,0:11"),
        (2, "foo", "follower.replication.throttled.replicas", "0:12"),
        *{
            (4, str(b), name, "1000000")
            for b in (10, 11, 12)
            for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
        },
    }
    assert all(c.op is ConfigOp.SET for c in admin.configs)


def test_execute_refuses_while_another_move_runs_or_unknown_brokers(tmp_path: Path) -> None:
    admin = FakeAdmin({FOO0: (10, 11), FOO1: (10, 11)})
    admin.in_progress[FOO1] = PartitionReassignment((10, 11, 12), (12,), ())
    path = plan_file(tmp_path, MOVE)
    assert command(admin, tmp_path, "--execute", "--reassignment-json-file", path)[0] == 1
    assert admin.altered == []
    admin.in_progress.clear()
    admin.brokers = [10, 11]
    assert command(admin, tmp_path, "--execute", "--reassignment-json-file", path)[0] == 1
    assert admin.altered == []


def test_verify_clears_the_throttles_only_once_complete(tmp_path: Path) -> None:
    admin = FakeAdmin({FOO0: (11, 12, 10)})
    admin.in_progress[FOO0] = PartitionReassignment((11, 12, 10), (12,), (10,))
    path = plan_file(tmp_path, MOVE)
    code, lines = command(admin, tmp_path, "--verify", "--reassignment-json-file", path)
    assert (code, lines[-1], admin.configs) == (
        0,
        "Reassignment of partition foo-0 is still in progress.",
        [],
    )
    admin.in_progress.clear()
    admin.assignment[FOO0] = (11, 12)
    code, lines = command(admin, tmp_path, "--verify", "--reassignment-json-file", path)
    assert lines == [
        "Status of partition reassignment:",
        "Reassignment of partition foo-0 is completed.",
        "",
        "Clearing broker-level throttles on brokers 10,11,12",
        "Clearing topic-level throttles on topic foo",
    ]
    assert {c.op for c in admin.configs} == {ConfigOp.DELETE}
    assert len(admin.configs) == 3 * 2 + 2


def test_verify_keeps_the_throttles_while_another_reassignment_runs(tmp_path: Path) -> None:
    # ReassignPartitionsCommand.verifyAssignment clears throttles only when
    # findPartitionReassignmentStates lists no reassignment at all.
    admin = FakeAdmin({FOO0: (11, 12), BAR0: (10, 11, 12)})
    admin.in_progress[BAR0] = PartitionReassignment((10, 11, 12), (12,), ())
    path = plan_file(tmp_path, MOVE)
    code, lines = command(admin, tmp_path, "--verify", "--reassignment-json-file", path)
    assert (code, lines) == (
        0,
        ["Status of partition reassignment:", "Reassignment of partition foo-0 is completed."],
    )
    assert admin.configs == []


def test_execute_additional_throttles_the_running_moves_too(tmp_path: Path) -> None:
    admin = FakeAdmin({FOO0: (10, 11), FOO1: (10, 11, 12)})
    admin.in_progress[FOO1] = PartitionReassignment((10, 11, 12), (12,), (10,))
    code, _ = command(
        admin, tmp_path, "--execute", "--additional", "--reassignment-json-file",
        plan_file(tmp_path, MOVE), "--throttle", "1000",
    )  # fmt: skip
    assert code == 0
    topic_sets = {(c.name, c.value) for c in admin.configs if c.resource_type == 2}
    assert topic_sets == {
        ("leader.replication.throttled.replicas", "0:10,0:11,1:10,1:11"),
        ("follower.replication.throttled.replicas", "0:12,1:12"),
    }


def test_cancel_and_list(tmp_path: Path) -> None:
    admin = FakeAdmin({FOO0: (11, 12, 10)})
    admin.in_progress[FOO0] = PartitionReassignment((11, 12, 10), (12,), (10,))
    assert command(admin, tmp_path, "--list")[1] == [
        "Current partition reassignments:",
        "foo-0: replicas: 11,12,10. adding: 12. removing: 10.",
    ]
    path = plan_file(tmp_path, MOVE)
    code, lines = command(
        admin, tmp_path, "--cancel", "--reassignment-json-file", path, "--preserve-throttles"
    )
    assert (code, lines) == (0, ["Successfully cancelled partition reassignment(s) for: foo-0"])
    assert admin.altered == [{FOO0: None}]
    code, lines = command(
        admin, tmp_path, "--cancel", "--reassignment-json-file", path, "--preserve-throttles"
    )
    assert lines == ["None of the specified partition reassignments are active."]


def test_generate_prints_current_and_proposed(tmp_path: Path) -> None:
    admin = FakeAdmin({FOO0: (10, 11), FOO1: (11, 10)})
    topics = tmp_path / "topics.json"
    topics.write_text('{"topics":[{"topic":"foo"}],"version":1}')
    code, lines = command(
        admin, tmp_path, "--generate", "--topics-to-move-json-file", str(topics),
        "--broker-list", "11,12",
    )  # fmt: skip
    assert code == 0
    assert lines[0] == "Current partition replica assignment"
    assert lines[2:4] == ["", "Proposed partition reassignment configuration"]
    proposed = parse_reassignment(lines[4])
    assert set(proposed) == {FOO0, FOO1}
    assert all(sorted(r) == [11, 12] for r in proposed.values())
    assert proposed[FOO0][0] != proposed[FOO1][0]  # leaders spread round-robin


@pytest.mark.parametrize(
    "argv",
    [
        ["--execute", "--list"],
        [],
        ["--generate", "--broker-list", "1,2"],
        ["--verify"],
    ],
)
def test_bad_arguments(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    reassign_cmd.add_arguments(parser)
    with pytest.raises(ReassignPlanError):
        reassign_cmd.check_args(parser.parse_args(["--bootstrap-server", "h:1", *argv]))
