from pathlib import Path

import pytest

from pykraft.properties import ConfigError, Properties


def test_parses_java_properties_syntax() -> None:
    text = """
# a comment
! another comment
node.id=1
process.roles = broker
controller.quorum.voters: 1@127.0.0.1:9093,\\
    2@127.0.0.1:9094
log.dirs=/tmp/a, /tmp/b
"""
    props = Properties.parse(text)
    assert props.get_int("node.id") == 1
    assert props.get_str("process.roles") == "broker"
    assert props.get_list("controller.quorum.voters") == ["1@127.0.0.1:9093", "2@127.0.0.1:9094"]
    assert props.get_list("log.dirs") == ["/tmp/a", "/tmp/b"]


def test_defaults_apply_only_when_absent() -> None:
    props = Properties.parse("num.partitions=3\n")
    assert props.get_int("num.partitions", 1) == 3
    assert props.get_int("default.replication.factor", 1) == 1
    assert props.get_bool("auto.create.topics.enable", False) is False


@pytest.mark.parametrize(
    ("text", "call", "message"),
    [
        ("node.id=x\n", lambda p: p.get_int("node.id"), "node.id='x' is not an integer"),
        ("", lambda p: p.get_int("node.id"), "missing required property node.id"),
        ("a=yes\n", lambda p: p.get_bool("a", False), "must be true or false"),
    ],
)
def test_bad_values_name_the_property(text, call, message) -> None:
    with pytest.raises(ConfigError, match=message):
        call(Properties.parse(text, source="server.properties"))


def test_line_without_separator_names_file_and_line() -> None:
    with pytest.raises(ConfigError, match=r"server.properties:2: expected key=value"):
        Properties.parse("a=1\nnonsense\n", source="server.properties")


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        Properties.load(tmp_path / "absent.properties")
