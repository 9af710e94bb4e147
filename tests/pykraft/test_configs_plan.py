"""``configs_plan``: Kafka's ``ConfigCommandTest`` cases for the parts pykraft's tool serves
(``shouldParseArgumentsForTopicsEntityType``, ``testParseConfigsToBeAddedForAddConfigFile``,
``shouldParseConfigsWithSquareBrackets`` / ``testOptionEntityTypeNames``-style refusals,
``shouldNotAlterNonExistingConfig``, ``shouldDescribeConfigSynonyms``)."""

from __future__ import annotations

import pytest

from pykraft.configs_plan import (
    ConfigEntry,
    ConfigsError,
    check_args,
    completed_line,
    describe_lines,
    java_double,
    missing_deletions,
    parse_add_config,
    parse_delete_config,
    quota_lines,
    quota_values,
    scram_description_line,
    scram_upsertions,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=1", {"a": "1"}),
        ("a=1,b=2", {"a": "1", "b": "2"}),
        ("a = 1 , b=[x,y,z]", {"a": "1", "b": "x,y,z"}),
        ("leader.replication.throttled.replicas=[0:1,1:2]", {
            "leader.replication.throttled.replicas": "0:1,1:2"}),
        ("ssl.endpoint.identification.algorithm=", {"ssl.endpoint.identification.algorithm": ""}),
        ("a=1,", {"a": "1"}),
        ("SCRAM-SHA-256=[iterations=8192,password=p=q]", {
            "SCRAM-SHA-256": "iterations=8192,password=p=q"}),
    ],
)  # fmt: skip
def test_add_config_parses_as_kafka(text: str, expected: dict[str, str]) -> None:
    assert parse_add_config(text) == expected


@pytest.mark.parametrize("text", ["a", "a=1,b", "a=b=c"])
def test_bad_add_config(text: str) -> None:
    with pytest.raises(ConfigsError, match="Invalid entity config: all configs to be added"):
        parse_add_config(text)


def test_delete_config_takes_lists_and_repeats() -> None:
    assert parse_delete_config(["a, b", "c"]) == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"describe": True, "alter": True}, "Command must include exactly one action"),
        ({"entity_type": None}, "At least one entity type must be specified"),
        ({"entity_type": "ips"}, "Invalid entity type ips"),
        ({"alter": True, "describe": False, "entity_name": None},
         "an entity name must be specified with --alter of topics"),
        ({"alter": True, "describe": False, "entity_type": "users", "entity_name": None},
         "an entity-name or default entity must be specified with --alter of users"),
        ({"alter": True, "describe": False, "has_changes": False},
         "At least one of --add-config, --add-config-file, or --delete-config"),
        ({"entity_default": True}, "--entity-name and --entity-default cannot be used together"),
        ({"entity_default": True, "entity_name": None},
         "--entity-default is only valid with --entity-type brokers, users or clients"),
    ],
)  # fmt: skip
def test_check_args(kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {
        "describe": True, "alter": False, "entity_type": "topics", "entity_name": "t",
        "entity_default": False, "has_changes": True,
    }  # fmt: skip
    arguments.update(kwargs)
    with pytest.raises(ConfigsError) as raised:
        check_args(**arguments)  # type: ignore[arg-type]
    assert str(raised.value).startswith(message)


RETENTION = ConfigEntry(
    "retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG", False,
    (("DYNAMIC_TOPIC_CONFIG", "retention.ms", "1000"),
     ("DEFAULT_CONFIG", "log.retention.hours", "168")),
)  # fmt: skip
DEFAULTED = ConfigEntry("cleanup.policy", "delete", "DEFAULT_CONFIG")
SECRET = ConfigEntry("ssl.key.password", None, "DYNAMIC_BROKER_CONFIG", True)


def test_describe_shows_only_dynamic_entries_unless_all() -> None:
    assert describe_lines("topics", "t", [RETENTION, DEFAULTED], describe_all=False) == [
        "Dynamic configs for topic t are:",
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, "
        "DEFAULT_CONFIG:log.retention.hours=168}",
    ]
    everything = describe_lines("topics", "t", [RETENTION, DEFAULTED], describe_all=True)
    assert everything[0] == "All configs for topic t are:"
    assert [line.split("=")[0] for line in everything[1:]] == ["  cleanup.policy", "  retention.ms"]


def test_describe_brokers_default_and_sensitive_values() -> None:
    assert describe_lines("brokers", "1", [SECRET], describe_all=False) == [
        "Dynamic configs for broker 1 are:",
        "  ssl.key.password=null sensitive=true synonyms={}",
    ]
    default = ConfigEntry("log.retention.ms", "5", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    assert describe_lines("brokers", "", [default, SECRET], describe_all=False) == [
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=5 sensitive=false synonyms={}",
    ]
    logger = ConfigEntry("root", "INFO", "DYNAMIC_BROKER_LOGGER_CONFIG")
    assert describe_lines("broker-loggers", "1", [logger], describe_all=False)[0] == (
        "Dynamic configs for broker-logger 1 are:"
    )


def test_deleting_an_unset_config_is_refused() -> None:
    missing_deletions(["a"], {"a": 1})
    with pytest.raises(ConfigsError, match=r"^Invalid config\(s\): b,c$"):
        missing_deletions(["a", "b", "c"], {"a": 1})


def test_completed_lines() -> None:
    assert completed_line("topics", "t") == "Completed updating config for topic t."
    assert completed_line("brokers", None) == (
        "Completed updating default config for brokers in the cluster."
    )


def test_scram_credentials() -> None:
    [explicit, defaulted] = scram_upsertions(
        {"SCRAM-SHA-256": "iterations=8192,password=s3,cret", "SCRAM-SHA-512": "password=x",
         "consumer_byte_rate": "10"}
    )  # fmt: skip
    assert (explicit.mechanism, explicit.iterations, explicit.password) == (
        "SCRAM-SHA-256", 8192, "s3,cret"
    )  # fmt: skip
    assert (defaulted.iterations, defaulted.password) == (4096, "x")
    with pytest.raises(ConfigsError) as raised:
        scram_upsertions({"SCRAM-SHA-256": "iterations=1,pw=hunter2"})
    assert "hunter2" not in str(raised.value)
    assert scram_description_line("alice", [("SCRAM-SHA-256", 8192)]) == (
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192"
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [(1000.0, "1000.0"), (0.5, "0.5"), (1e7, "1.0E7"), (12345678.0, "1.2345678E7"),
     (1024, "1024.0"), (0.0001, "1.0E-4"), (1.5e9, "1.5E9"), (0, "0.0")],
)  # fmt: skip
def test_quota_values_print_as_java_doubles(value: float, text: str) -> None:
    assert java_double(value) == text


def test_quota_values_must_be_numbers() -> None:
    assert quota_values({"producer_byte_rate": "1024"}) == {"producer_byte_rate": 1024.0}
    with pytest.raises(
        ConfigsError, match=r"^Cannot parse quota configuration value for producer_byte_rate: x$"
    ):
        quota_values({"producer_byte_rate": "x"})


def test_quota_lines_name_the_entity_as_kafka() -> None:
    entries = {
        (("user", "alice"),): {"consumer_byte_rate": 100.0},
        (("user", None),): {"consumer_byte_rate": 5000.0},
        (("user", "bob"), ("client-id", "c1")): {"request_percentage": 50.0},
        (("client-id", None),): {"producer_byte_rate": 2e7},
    }
    assert quota_lines(entries) == [
        "Quota configs for user-principal 'alice' are consumer_byte_rate=100.0",
        "Quota configs for the default user-principal are consumer_byte_rate=5000.0",
        "Quota configs for user-principal 'bob', client-id 'c1' are request_percentage=50.0",
        "Quota configs for the default client-id are producer_byte_rate=2.0E7",
    ]
