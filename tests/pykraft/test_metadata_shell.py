"""``pykraft metadata-shell``: the image tree (Kafka's ``org.apache.kafka.image.node``) and the
shell's commands (Kafka's ``org.apache.kafka.shell.command`` handlers), over a snapshot file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pykraft import cli
from pykraft.metadata.delta import apply_records
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.image_node import image_node, quota_entity_name
from pykraft.metadata.records import (
    BrokerEndpoint,
    ConfigRecord,
    FeatureLevelRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from pykraft.metadata.snapshot import write_snapshot
from pykraft.metadata_shell_cmd import iso_zoned_utc
from pykraft.metadata_shell_commands import ShellState, column_lines, root_node, run_command

FOO = "ThIaNwRnSM2Nt9Mx1v0RvA"
BAR = "AAAAAAAAAAAAAAAAAAAAAQ"
IMAGE = apply_records(
    MetadataImage.EMPTY,
    [
        FeatureLevelRecord(name="metadata.version", feature_level=7),
        FeatureLevelRecord(name="transaction.version", feature_level=2),
        RegisterBrokerRecord(
            broker_id=1,
            incarnation_id="inc",
            broker_epoch=10,
            fenced=False,
            end_points=(BrokerEndpoint(name="PLAINTEXT", host="h", port=9092),),
        ),
        TopicRecord(name="foo", topic_id=FOO),
        PartitionRecord(topic_id=FOO, partition_id=1, replicas=(1,), isr=(1,), leader=1),
        PartitionRecord(topic_id=FOO, partition_id=0, replicas=(1,), isr=(1,), leader=1),
        TopicRecord(name="bar", topic_id=BAR),
        PartitionRecord(topic_id=BAR, partition_id=0, replicas=(1,), isr=(), leader=-1),
        ConfigRecord(resource_type=2, resource_name="foo", name="retention.ms", value="1000"),
        ConfigRecord(resource_type=4, resource_name="", name="log.retention.ms", value="5"),
        ProducerIdsRecord(broker_id=1, broker_epoch=10, next_producer_id=2000),
    ],
    offset=1042,
    epoch=3,
)


def shell() -> ShellState:
    return ShellState(root_node(image_node(IMAGE, "1970-01-01T00:00Z[UTC]")))


@pytest.fixture
def main(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[str]], int]:
    """``pykraft ARGS`` through the real CLI, building only this subcommand's parser (the
    others' imports cost seconds and are not what these tests are about)."""
    monkeypatch.setattr(cli, "SUBCOMMANDS", {"metadata-shell": cli.SUBCOMMANDS["metadata-shell"]})
    return cli.main


def check(line: str, expected: list[str], state: ShellState | None = None) -> None:
    assert run_command(state or shell(), line) == expected, line


def test_ls_lists_children_sorted_one_per_line_without_a_terminal() -> None:
    check("ls", ["image", "local"])
    check("ls /", ["image", "local"])
    check(
        "ls /image",
        [
            "acls",
            "clientQuotas",
            "cluster",
            "configs",
            "delegationToken",
            "features",
            "producerIds",
            "provenance",
            "scram",
            "topics",
        ],
    )
    check("ls /image/topics/byName", ["bar", "foo"])
    check("ls /image/topics/byName/foo", ["0", "1", "id", "name"])
    check("ls /image/topics/byId", [BAR, FOO])
    check("ls /image/configs", ["BROKER", "TOPIC:foo"])
    check("ls /image/features", ["finalized_transaction.version", "metadataVersion"])


def test_ls_of_files_and_several_directories_introduces_each_directory() -> None:
    # LsCommandHandler.printTargets: files first, then "name:" before each directory.
    check(
        "ls /image/topics/byName/foo/name /image/cluster",
        ["name", "", "cluster:", "brokers", "controllers"],
    )
    check(
        "ls /image/cluster /image/topics",
        ["cluster:", "brokers", "controllers", "", "topics:", "byId", "byName"],
    )
    check("ls /nope", ["ls: /nope: no such file or directory."])


def test_ls_fills_columns_to_the_screen_width() -> None:
    entries = ["a", "bb", "ccc", "dddd", "eeeee"]
    # Column-major, each column 2 wider than its longest entry, the last one unpadded.
    assert column_lines(entries, 80) == ["a  bb  ccc  dddd  eeeee"]
    # 16 columns fit two columns of three rows; a short row keeps its padding, as Kafka's.
    assert column_lines(entries, 16) == ["a    dddd", "bb   eeeee", "ccc  "]
    assert column_lines(entries, None) == entries
    assert column_lines(entries, 7) == entries


def test_cat_prints_leaves_in_kafkas_value_shapes() -> None:
    check("cat /image/topics/byName/foo/id", [FOO])
    check(
        "cat /image/topics/byName/foo/0",
        [
            "PartitionRegistration(replicas=[1], isr=[1], removingReplicas=[], addingReplicas=[], "
            "elr=[], lastKnownElr=[], leader=1, leaderRecoveryState=RECOVERED, leaderEpoch=0, "
            "partitionEpoch=0)"
        ],
    )
    check(
        "cat /image/cluster/brokers/1",
        [
            "BrokerRegistration(id=1, epoch=10, incarnationId=inc, listeners=[Endpoint("
            "listenerName='PLAINTEXT', securityProtocol=PLAINTEXT, host='h', port=9092)], "
            "supportedFeatures={}, rack=Optional.empty, fenced=false, inControlledShutdown=false)"
        ],
    )
    check("cat /image/configs/TOPIC:foo/retention.ms", ["1000"])
    check("cat /image/configs/BROKER/log.retention.ms", ["5"])
    check("cat /image/producerIds/nextProducerId", ["2000"])
    check("cat /image/features/metadataVersion", ["7"])
    check("cat /image/provenance", ["offset 1042, epoch 3, time 1970-01-01T00:00Z[UTC]"])
    check("cat /image/topics", ["cat: /image/topics: Is a directory"])
    check("cat /image/nope", ["cat: /image/nope: No such file or directory."])
    check("cat", ["cat: the following arguments are required: targets"])


def test_globs_name_several_nodes() -> None:
    check("cat /image/topics/byName/*/name", ["bar", "foo"])
    # GlobVisitor walks the children in sorted order.
    check("cat /image/topics/byName/{foo,bar}/name", ["bar", "foo"])
    check("cat /image/topics/byName/f?o/id", [FOO])
    check(
        "cat /image/topics/byName/z*/id",
        ["cat: /image/topics/byName/z*/id: No such file or directory."],
    )


def test_cd_pwd_and_relative_paths() -> None:
    state = shell()
    check("pwd", ["/"], state)
    check("cd /image/topics/byName", [], state)
    check("pwd", ["/image/topics/byName"], state)
    check("ls", ["bar", "foo"], state)
    check("cat foo/name", ["foo"], state)
    check("cd ../byId/./", [], state)
    check("pwd", ["/image/topics/byId"], state)
    check("cd nope", ["cd: nope: no such directory."], state)
    check(f"cd {FOO}/name", [f"cd: {FOO}/name: not a directory."], state)
    check("pwd", ["/image/topics/byId"], state)
    check("cd ../../../../..", [], state)
    check("pwd", ["/"], state)
    check("cd /image", [], state)
    check("cd", [], state)
    check("pwd", ["/"], state)


def test_find_prints_every_path_below() -> None:
    check(
        "find /image/topics/byName/foo",
        [
            "/image/topics/byName/foo",
            "/image/topics/byName/foo/0",
            "/image/topics/byName/foo/1",
            "/image/topics/byName/foo/id",
            "/image/topics/byName/foo/name",
        ],
    )
    state = shell()
    run_command(state, "cd /image/producerIds")
    check("find", [".", "./nextProducerId"], state)
    check("find /nope", ["find: /nope: no such file or directory."])


def test_tree_prints_names_and_values_indented() -> None:
    check(
        "tree /image/configs",
        ["BROKER:", "  log.retention.ms:", "    5", "TOPIC:foo:", "  retention.ms:", "    1000"],
    )
    check("tree /image/producerIds/nextProducerId", ["2000"])
    check("tree /x", ["tree: /x: No such file or directory."])


def test_history_help_exit_and_unknown_commands() -> None:
    state = shell()
    run_command(state, "pwd")
    run_command(state, "ls /image")
    check("history", ["    1  pwd", "    2  ls /image", "    3  history"], state)
    check("history 1", ["    4  history 1"], state)
    help_lines = run_command(state, "help")
    assert help_lines[0].startswith("Welcome to the Apache Kafka metadata shell")
    assert any(line.split()[:1] == ["find"] for line in help_lines)
    check("frobnicate", ["Unknown command 'frobnicate'. Type help for the list of commands."])
    check("", [])
    assert not state.exited
    check("exit", [], state)
    assert state.exited


def test_quota_entity_names_follow_kafkas_order_and_escaping() -> None:
    assert quota_entity_name((("user", "alice"), ("client-id", "app"))) == (
        "clientId(app)_user(alice)"
    )
    assert quota_entity_name((("ip", "1.2.3.4"),)) == "ip(1.2.3.4)"
    assert quota_entity_name((("user", "a(b)\\"),)) == "user(a\\(b\\)\\\\)"


def test_iso_zoned_utc_drops_zero_seconds_and_fraction_as_java_does() -> None:
    assert iso_zoned_utc(0) == "1970-01-01T00:00Z[UTC]"
    assert iso_zoned_utc(1_000) == "1970-01-01T00:00:01Z[UTC]"
    assert iso_zoned_utc(1_120) == "1970-01-01T00:00:01.12Z[UTC]"
    assert iso_zoned_utc(1_714_564_800_005) == "2024-05-01T12:00:00.005Z[UTC]"


def test_the_command_runs_one_command_over_a_snapshot_file(
    main, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_snapshot(tmp_path, IMAGE, created_ms=1_000)
    assert main(["metadata-shell", "--snapshot", str(path), "ls", "/image/topics/byName"]) == 0
    assert capsys.readouterr().out == "bar\nfoo\n"
    assert main(["metadata-shell", "-s", str(path), "cat", "/image/provenance"]) == 0
    assert capsys.readouterr().out == "offset 1042, epoch 3, time 1970-01-01T00:00:01Z[UTC]\n"


def test_bad_arguments_and_bad_files_are_clear_errors(
    main, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["metadata-shell", "ls"]) == 1
    assert "Exactly one of --snapshot and --bootstrap-controller" in capsys.readouterr().err
    broken = tmp_path / "broken.checkpoint"
    broken.write_text("not a snapshot\n")
    assert main(["metadata-shell", "--snapshot", str(broken), "ls"]) == 1
    assert f"Unable to load snapshot {broken}" in capsys.readouterr().err
    assert broken.read_text() == "not a snapshot\n"


def test_the_interactive_shell_reads_commands_until_exit(
    main, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_snapshot(tmp_path, IMAGE, created_ms=0)
    lines = iter(["cd /image/topics/byName/foo", "cat name", "exit", "pwd"])
    monkeypatch.setattr("builtins.input", lambda prompt: next(lines))
    assert main(["metadata-shell", "--snapshot", str(path)]) == 0
    assert capsys.readouterr().out == "[ Kafka Metadata Shell ]\nfoo\n"
