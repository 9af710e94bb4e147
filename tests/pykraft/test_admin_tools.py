"""``pykraft acls``, ``pykraft user-scram`` and ``--command-config`` without a controller: the
arguments become the ACLs, credentials and TLS/Basic settings Kafka's tools would send, output is
kafka-acls.sh's and kafka-configs.sh's, and every bad argument is a clear error (exit 1, stderr)
that never repeats a password."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pykraft import acls_cmd, user_scram_cmd
from pykraft.acls_cmd import AclCommandError, acls_to_add, listing, operation_of, resource_filters
from pykraft.command_config import CommandConfigError, connection_of, load_command_config
from pykraft.metadata.auth.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pykraft.metadata.auth.scram import ScramMechanism
from pykraft.user_scram_cmd import ScramAddition, UserScramError, parse_add_config
from tests.tls_material import make_tls_material

SECRET = "alice-secret"


def acl_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    acls_cmd.add_arguments(parser)
    return parser.parse_args(["--bootstrap-controller", "127.0.0.1:1", *argv])


def scram_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    user_scram_cmd.add_arguments(parser)
    return parser.parse_args(["--bootstrap-controller", "127.0.0.1:1", *argv])


# ---------------------------------------------------------------------------- acls


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Read", AclOperation.READ),
        ("DescribeConfigs", AclOperation.DESCRIBE_CONFIGS),
        ("describe_configs", AclOperation.DESCRIBE_CONFIGS),
        ("IDEMPOTENT_WRITE", AclOperation.IDEMPOTENT_WRITE),
        ("All", AclOperation.ALL),
    ],
)
def test_operation_names_as_kafka_acls_takes_them(text: str, expected: AclOperation) -> None:
    assert operation_of(text) == expected


def test_add_makes_one_acl_per_principal_host_operation_and_resource() -> None:
    args = acl_args(
        "--add", "--allow-principal", "User:alice", "--allow-host", "10.0.0.1",
        "--deny-principal", "User:mallory", "--operation", "Read", "--operation", "Write",
        "--topic", "pay", "--resource-pattern-type", "prefixed",
    )  # fmt: skip
    [(resource, acls)] = acls_to_add(args).items()
    assert resource == (ResourceType.TOPIC, "pay")
    assert {(a.principal, a.host, a.operation, a.permission_type) for a in acls} == {
        ("User:alice", "10.0.0.1", AclOperation.READ, AclPermissionType.ALLOW),
        ("User:alice", "10.0.0.1", AclOperation.WRITE, AclPermissionType.ALLOW),
        ("User:mallory", "*", AclOperation.READ, AclPermissionType.DENY),
        ("User:mallory", "*", AclOperation.WRITE, AclPermissionType.DENY),
    }
    assert {a.pattern_type for a in acls} == {PatternType.PREFIXED}


def test_cluster_group_and_transactional_id_resources_default_to_all() -> None:
    args = acl_args(
        "--add", "--allow-principal", "User:ops", "--cluster", "--group", "g",
        "--transactional-id", "tx",
    )  # fmt: skip
    added = acls_to_add(args)
    assert list(added) == [
        (ResourceType.GROUP, "g"),
        (ResourceType.TRANSACTIONAL_ID, "tx"),
        (ResourceType.CLUSTER, "kafka-cluster"),
    ]
    assert {a.operation for acls in added.values() for a in acls} == {AclOperation.ALL}


def test_list_filters_by_pattern_type_match() -> None:
    [only] = resource_filters(
        acl_args("--list", "--topic", "pay-1", "--resource-pattern-type", "match")
    )
    assert (only.resource_type, only.resource_name, only.pattern_type) == (
        ResourceType.TOPIC,
        "pay-1",
        PatternType.MATCH,
    )
    [everything] = resource_filters(acl_args("--list"))
    assert everything.resource_type is ResourceType.ANY and everything.resource_name is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--list", "--add"), "Command must include exactly one action: --list, --add, --remove."),
        (("--add", "--topic", "t"), "You must specify one of: --allow-principal, --deny-principal"),
        (("--add", "--allow-principal", "User:a"), "You must provide at least one resource"),
        (("--remove", "--force"), "You must provide at least one resource"),
        (
            (
                "--add",
                "--allow-principal",
                "User:a",
                "--topic",
                "t",
                "--resource-pattern-type",
                "match",
            ),
            "A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls.",
        ),
        (("--list", "--resource-pattern-type", "fuzzy"), "Invalid --resource-pattern-type 'fuzzy'"),
        (
            ("--add", "--allow-principal", "alice", "--topic", "t"),
            "Could not parse principal from `alice`",
        ),
        (
            ("--add", "--allow-principal", "User:a", "--topic", "t", "--operation", "Fly"),
            "Invalid operation 'Fly'",
        ),
        (
            ("--add", "--allow-principal", "User:a", "--group", "g", "--operation", "Write"),
            "ResourceType GROUP only supports operations Read, Delete, Describe, All",
        ),
        (
            ("--add", "--allow-host", "1.2.3.4", "--deny-principal", "User:a", "--topic", "t"),
            "--allow-host needs --allow-principal",
        ),
        (("--list", "--operation", "Read"), 'Option "[list]" can\'t be used'),
    ],
)
def test_bad_acl_arguments_are_clear_errors(
    argv: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert acls_cmd.run(acl_args(*argv)) == 1
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


def test_operations_unsupported_by_the_resource_type_are_refused_before_any_request() -> None:
    with pytest.raises(AclCommandError, match="ResourceType TRANSACTIONAL_ID only supports"):
        acls_to_add(
            acl_args(
                "--add",
                "--allow-principal",
                "User:a",
                "--transactional-id",
                "x",
                "--operation",
                "Read",
            )
        )


def test_listing_is_kafka_acls_output() -> None:
    def acl(name: str, operation: AclOperation) -> AclBinding:
        return AclBinding(
            resource_type=ResourceType.TOPIC, resource_name=name, pattern_type=PatternType.LITERAL,
            principal="User:alice", host="*", operation=operation,
            permission_type=AclPermissionType.ALLOW,
        )  # fmt: skip

    blocks = listing(
        [
            acl("b", AclOperation.READ),
            acl("a", AclOperation.WRITE),
            acl("b", AclOperation.DESCRIBE),
        ],
        [],
    )
    assert blocks == [
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=a, "
        "patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW) \n",
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=b, "
        "patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n",
    ]
    assert listing([acl("a", AclOperation.READ)], ["User:bob"]) == []


# ---------------------------------------------------------------------------- user-scram


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            f"SCRAM-SHA-256=[iterations=8192,password={SECRET}]",
            [ScramAddition(ScramMechanism.SCRAM_SHA_256, 8192, SECRET)],
        ),
        (
            f"SCRAM-SHA-512=[password={SECRET}],SCRAM-SHA-256=[iterations=4096,password=x]",
            [
                ScramAddition(ScramMechanism.SCRAM_SHA_512, 4096, SECRET),
                ScramAddition(ScramMechanism.SCRAM_SHA_256, 4096, "x"),
            ],
        ),
        (f"SCRAM-SHA-512={SECRET}", [ScramAddition(ScramMechanism.SCRAM_SHA_512, 4096, SECRET)]),
    ],
)
def test_add_config_as_kafka_configs_takes_it(text: str, expected: list[ScramAddition]) -> None:
    assert parse_add_config(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"SCRAM-SHA-1=[password={SECRET}]", "Invalid config(s): SCRAM-SHA-1"),
        (f"SCRAM-SHA-256=[iterations=many,password={SECRET}]", "iterations must be an integer"),
        ("SCRAM-SHA-256=[iterations=8192]", "has no password"),
        (f"SCRAM-SHA-256=[salt=abc,password={SECRET}]", "takes [iterations=N,password=P]"),
        (f"SCRAM-SHA-256={SECRET},SCRAM-SHA-256={SECRET}", "a mechanism is given twice"),
        (f"[password={SECRET}]", "Invalid --add-config"),
    ],
)
def test_bad_add_config_never_repeats_the_password(text: str, message: str) -> None:
    with pytest.raises(UserScramError) as error:
        parse_add_config(text)
    assert message in str(error.value) and SECRET not in str(error.value)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--entity-type", "users"), "exactly one action: --describe, --alter"),
        (
            ("--alter", "--entity-type", "topics", "--entity-name", "t", "--delete-config", "x"),
            "--entity-type users",
        ),
        (
            ("--alter", "--entity-type", "users", "--add-config", f"SCRAM-SHA-256={SECRET}"),
            "--entity-name must be",
        ),
        (
            ("--alter", "--entity-type", "users", "--entity-name", "a"),
            "At least one of --add-config",
        ),
        (
            ("--describe", "--entity-type", "users", "--delete-config", "SCRAM-SHA-256"),
            "only valid with --alter",
        ),
        (
            ("--alter", "--entity-type", "users", "--entity-name", "a", "--delete-config", "MD5"),
            "Invalid config(s): MD5",
        ),
    ],
)
def test_bad_user_scram_arguments_are_clear_errors(
    argv: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert user_scram_cmd.run(scram_args(*argv)) == 1
    captured = capsys.readouterr()
    assert message in captured.err and SECRET not in captured.err + captured.out


def test_describe_line_is_kafka_configs_output() -> None:
    assert user_scram_cmd.describe_line(
        "alice", [("SCRAM-SHA-256", 8192), ("SCRAM-SHA-512", 4096)]
    ) == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096"
    )


# ---------------------------------------------------------------------------- --command-config


def test_no_command_config_is_plain_http() -> None:
    connection = load_command_config(None)
    assert connection.ssl_context is None and connection.basic_auth is None


def test_ssl_with_a_key_store_is_mutual_tls_without_basic(tmp_path: Path) -> None:
    tls = make_tls_material(tmp_path, clients=("admin",))
    connection = connection_of(
        {
            "security.protocol": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(tls.clients["admin"].path),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(tls.ca_path),
        },
        "admin.properties",
    )
    assert connection.ssl_context is not None and connection.basic_auth is None


@pytest.mark.parametrize(
    "credentials",
    [
        {"sasl.username": "alice", "sasl.password": SECRET},
        {
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            f'required username="alice" password="{SECRET}";'
        },
    ],
)
def test_sasl_ssl_credentials_become_basic_over_tls(
    tmp_path: Path, credentials: dict[str, str]
) -> None:
    tls = make_tls_material(tmp_path)
    connection = connection_of(
        {"security.protocol": "SASL_SSL", "ssl.ca.location": str(tls.ca_path), **credentials}, "f"
    )
    assert connection.ssl_context is not None
    assert connection.basic_auth == ("alice", SECRET)
    assert SECRET not in repr(connection)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"security.protocol": "SASL_PLAINTEXT"}, "would send the password in clear"),
        ({"security.protocol": "KERBEROS"}, "security.protocol=KERBEROS is not one of"),
        ({"security.protocol": "SASL_SSL"}, "needs sasl.jaas.config"),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.jaas.config": f'x required password="{SECRET}";',
            },
            "sasl.jaas.config needs username and password",
        ),
        (
            {"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent/ca.pem"},
            "ssl.truststore.location",
        ),
    ],
)
def test_unusable_command_configs_are_clear_errors(values: dict[str, str], message: str) -> None:
    with pytest.raises(CommandConfigError) as error:
        connection_of(values, "client.properties")
    assert message in str(error.value) and SECRET not in str(error.value)
    assert str(error.value).startswith("client.properties: ")


def test_a_missing_command_config_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CommandConfigError, match="cannot read config file"):
        load_command_config(tmp_path / "missing.properties")
