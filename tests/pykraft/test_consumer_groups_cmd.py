"""``consumer_groups_cmd``: the option checks of Kafka's ``ConsumerGroupCommandOptions`` and an
``--execute`` over many partitions committed in bounded batches (the progress bar's steps)."""

from __future__ import annotations

import argparse

import pytest

from pykraft.consumer_groups_cmd import (
    COMMIT_BATCH_PARTITIONS,
    add_arguments,
    check_args,
    commit_in_batches,
)
from pykraft.consumer_groups_plan import GroupCommandError
from pykraft.storage.topic_partition import TopicPartition


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--bootstrap-server", "h:1", *argv])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "Command must include exactly one action: --list, --describe, --delete"),
        (("--list", "--describe"), "Command must include exactly one action"),
        (("--describe",), "Option [describe] takes one of these options: [all-groups], [group]"),
        (("--reset-offsets", "--group", "g", "--all-topics"),
         "Option [reset-offsets] takes exactly one of these options"),
        (("--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--to-latest"),
         "Option [reset-offsets] takes exactly one of these options"),
        (("--reset-offsets", "--group", "g", "--to-earliest"),
         "One of the reset scopes should be defined: --all-topics, --topic."),
        (("--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--dry-run",
          "--execute"), "Option [reset-offsets] only accepts one of [execute], [dry-run]"),
        (("--delete-offsets", "--group", "g"),
         "Option [delete-offsets] takes the following options: [topic], [group]"),
        (("--list", "--state", "Stable,Sleeping"), "Invalid state list 'Stable,Sleeping'"),
        # ConsumerGroupCommand.consumerGroupTypesFromString; share groups are not consumer groups.
        (("--list", "--type", "classic,share"),
         "Invalid types list 'classic,share'. Valid types are: Consumer, Classic"),
        (("--describe", "--all-groups", "--type"),
         "Option(s) [type] are unavailable given other options on the command line"),
    ],
)  # fmt: skip
def test_refused_options(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(GroupCommandError) as raised:
        check_args(parse(*argv))
    assert str(raised.value).startswith(message)


def test_accepted_options() -> None:
    assert check_args(parse("--list", "--state", "stable,Empty")) == "list"
    assert check_args(parse("--list", "--type", "CONSUMER,classic", "--state")) == "list"
    assert check_args(parse("--list", "--type")) == "list"
    assert check_args(parse("--reset-offsets", "--all-groups", "--topic", "t:0",
                            "--to-offset", "0")) == "reset-offsets"  # fmt: skip
    assert check_args(parse("--reset-offsets", "--group", "g", "--from-file", "p.csv")) == (
        "reset-offsets"
    )


class RecordingAdmin:
    """Stands in for the network: records each AlterConsumerGroupOffsets call."""

    def __init__(self) -> None:
        self.calls: list[dict[TopicPartition, int]] = []

    def alter_offsets(self, group: str, offsets: dict[TopicPartition, int]) -> None:
        assert group == "g"
        self.calls.append(offsets)


def test_a_big_reset_is_committed_in_batches() -> None:
    offsets = {TopicPartition(f"t{i % 7}", i): i for i in range(2 * COMMIT_BATCH_PARTITIONS + 3)}
    admin = RecordingAdmin()
    commit_in_batches(admin, "g", offsets)  # type: ignore[arg-type]
    assert [len(call) for call in admin.calls] == [COMMIT_BATCH_PARTITIONS] * 2 + [3]
    merged = {p: o for call in admin.calls for p, o in call.items()}
    assert merged == offsets
