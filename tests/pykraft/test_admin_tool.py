"""``run_admin_tool``: the exit status of an admin tool's ``run`` (1 on a bad argument, command
config or bootstrap list, before anything connects; else the body's), as Kafka's
``TransactionsCommand.execute`` / ``MetadataQuorumCommand.mainNoExit`` exit."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pytest

from pykraft.admin_client import KafkaAdminClient
from pykraft.admin_tool import run_admin_tool
from tests.fake_clock import FakeClock


class _Usage(ValueError):
    pass


def _args(
    bootstrap: str = "127.0.0.1:9092", command_config: Path | None = None
) -> argparse.Namespace:
    return argparse.Namespace(bootstrap_server=bootstrap, command_config=command_config)


def _checked(args: argparse.Namespace) -> str:
    return "describe"


def _refused(args: argparse.Namespace) -> str:
    raise _Usage("One of --status or --replication must be specified")


async def _never(admin: KafkaAdminClient, checked: str) -> int:
    raise AssertionError("the body ran")


async def _exits_with(admin: KafkaAdminClient, checked: str) -> int:
    assert isinstance(admin, KafkaAdminClient) and checked == "describe"
    return 7


def test_the_body_gets_the_client_and_what_the_check_returned() -> None:
    assert run_admin_tool(_args(), _checked, (_Usage,), FakeClock(), _exits_with) == 7


@pytest.mark.parametrize(
    ("args", "check", "message"),
    [
        (_args(), _refused, "One of --status or --replication must be specified"),
        (_args("localhost"), _checked, "Invalid url in bootstrap.servers: localhost"),
        (_args(""), _checked, "No resolvable bootstrap urls"),
        (_args(command_config=Path("/nonexistent/admin.properties")), _checked, "admin.properties"),
    ],
    ids=["usage", "bad bootstrap", "no bootstrap", "missing command config"],
)
def test_a_bad_argument_exits_1_with_one_line_before_connecting(
    args: argparse.Namespace,
    check: Callable[[argparse.Namespace], str],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_admin_tool(args, check, (_Usage,), FakeClock(), _never) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_an_error_the_tool_did_not_name_is_not_swallowed() -> None:
    def broken(args: argparse.Namespace) -> str:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        run_admin_tool(_args(), broken, (_Usage,), FakeClock(), _never)
