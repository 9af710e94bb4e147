"""``configs_cmd`` and ``get_offsets_cmd`` pieces that need no cluster: ``--add-config-file``
merged under ``--add-config`` (Kafka's ``parseConfigsToBeAdded``), the tool's refusals before any
connection, and get-offsets' tiered-storage specs."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pykraft import configs_cmd, get_offsets_cmd
from pykraft.configs_plan import ConfigsError
from pykraft.storage.topic_partition import TopicPartition


def parse(module: object, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)  # type: ignore[attr-defined]
    return parser.parse_args(list(argv))


def test_add_config_wins_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "add.properties"
    path.write_text("retention.ms=1\nsegment.ms=2\n")
    args = parse(configs_cmd, "--add-config-file", str(path), "--add-config", "retention.ms=9")
    assert configs_cmd._additions(args) == {"retention.ms": "9", "segment.ms": "2"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--describe", "--entity-type", "topics"],
         'Missing required argument "[bootstrap-server]"'),
        (["--bootstrap-server", "h:1", "--alter", "--entity-type", "topics", "--entity-name", "t"],
         "At least one of --add-config, --add-config-file, or --delete-config"),
        (["--bootstrap-server", "h:1", "--describe", "--entity-type", "ips"],
         "Invalid entity type ips"),
    ],
)  # fmt: skip
def test_configs_refuses_before_connecting(argv: list[str], message: str) -> None:
    errors: list[str] = []
    assert configs_cmd.run(parse(configs_cmd, *argv), out=errors.append, err=errors.append) == 1
    assert errors[0].startswith(message)


def test_get_offsets_refuses_mixed_filters() -> None:
    errors: list[str] = []
    args = parse(get_offsets_cmd, "--bootstrap-server", "h:1", "--topic", "t",
                 "--topic-partitions", "t:0")  # fmt: skip
    assert get_offsets_cmd.run(args, out=errors.append, err=errors.append) == 1
    assert errors == [
        "Error occurred: --topic-partitions cannot be used with --topic or --partitions"
    ]


class ListOffsetsAdmin:
    def __init__(self) -> None:
        self.asked: list[int] = []

    def list_offsets_or_errors(
        self, partitions: list[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int | str]:
        self.asked.append(timestamp)
        return dict.fromkeys(partitions, 7)


def test_tiered_specs_answer_as_a_broker_without_tiered_storage() -> None:
    admin = ListOffsetsAdmin()
    partitions = [TopicPartition("t", 0)]
    assert get_offsets_cmd.offsets_at(admin, partitions, -4) == {partitions[0]: 7}  # type: ignore[arg-type]
    assert admin.asked == [-2]  # earliest-local is the log start
    assert get_offsets_cmd.offsets_at(admin, partitions, -5) == {partitions[0]: -1}  # type: ignore[arg-type]
    assert admin.asked == [-2]  # latest-tiered: nothing asked, no offset


def test_entity_types_pair_with_names_in_order() -> None:
    args = parse(configs_cmd, "--entity-type", "users", "--entity-default",
                 "--entity-type", "clients", "--entity-name", "c1")  # fmt: skip
    configs_cmd.entities(args)
    assert (args.entity_type, args.entity_name, args.entity_default) == ("users", None, True)
    assert configs_cmd._quota_entity(args) == (("user", None), ("client-id", "c1"))
    [user, client] = configs_cmd._quota_filter(args)
    assert (user.match_type, client.match_type, client.match) == (1, 0, "c1")
    every_client = parse(configs_cmd, "--entity-type", "clients")
    configs_cmd.entities(every_client)
    assert configs_cmd._quota_filter(every_client)[0].match_type == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--entity-type", "topics", "--entity-type", "users"],
         "Only the entity types users and clients may be specified together"),
        (["--entity-type", "users", "--entity-name", "a", "--entity-name", "b"],
         "More entity names specified than entity types"),
    ],
)  # fmt: skip
def test_bad_entity_combinations(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigsError, match=message):
        configs_cmd.entities(parse(configs_cmd, *argv))
