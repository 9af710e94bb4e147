"""``pykraft user-scram``: kafka-configs.sh's SCRAM user commands against the controllers.

    pykraft user-scram --bootstrap-controller 127.0.0.1:19093 --command-config client.properties \\
        --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]' \\
        --entity-type users --entity-name alice
    pykraft user-scram ... --alter --delete-config SCRAM-SHA-512 --entity-type users \\
        --entity-name alice
    pykraft user-scram ... --describe --entity-type users [--entity-name alice]

The shapes and messages are Kafka's ``ConfigCommand`` for ``--entity-type users`` (KIP-554):
``--add-config`` takes ``<mechanism>=[iterations=N,password=P]`` items separated by commas
(iterations default 4096, Kafka's ``DefaultScramIterations``); ``--describe`` prints
``SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192``;
``--alter`` prints ``Completed updating config for user alice.``. Like a Kafka client, the tool
draws a salt and sends the *salted* password (``upsertion_from_password``), so the password never
leaves this process and is never printed, not even in an error. One request per mechanism: the
controller refuses a user altered twice in one request (DUPLICATE_RESOURCE, as Kafka's).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import secrets
import sys
from collections.abc import Callable
from pathlib import Path

import attrs

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.controller_client import ControllerClient
from pykraft.command_config import CommandConfigError, ControllerConnection, load_command_config
from pykraft.metadata.api.security import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    upsertion_from_password,
)
from pykraft.metadata.auth.scram import ScramMechanism

DEADLINE_S = 15.0
# Kafka's ConfigCommand.DefaultScramIterations.
DEFAULT_ITERATIONS = 4096
SALT_BYTES = 16
# One item of --add-config: SCRAM-SHA-256=[iterations=8192,password=secret] or =secret.
_ITEM = re.compile(r"\s*([A-Za-z0-9-]+)\s*=\s*(\[[^\]]*\]|[^,\[\]]*)\s*(?:,|$)")


class UserScramError(Exception):
    """Bad arguments: printed on stderr, exit status 1 (never holds a password)."""


@attrs.frozen
class ScramAddition:
    mechanism: ScramMechanism
    iterations: int
    password: str = attrs.field(repr=False)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-controller", metavar="HOST:PORT", help="REQUIRED")
    parser.add_argument(
        "--command-config", type=Path, metavar="FILE", help="client properties (TLS, SASL)"
    )
    parser.add_argument("--alter", action="store_true")
    parser.add_argument("--describe", action="store_true")
    parser.add_argument("--entity-type", metavar="users")
    parser.add_argument("--entity-name", action="append", default=[], metavar="USER")
    parser.add_argument("--add-config", metavar="MECHANISM=[iterations=N,password=P],...")
    parser.add_argument("--delete-config", metavar="MECHANISM,...")


def run(args: argparse.Namespace, out: Callable[[str], None] = print) -> int:
    try:
        _check_args(args)
        additions = parse_add_config(args.add_config) if args.add_config else []
        deletions = parse_delete_config(args.delete_config) if args.delete_config else []
        connection = load_command_config(args.command_config)
        urls = [url for url in args.bootstrap_controller.split(",") if url.strip()]
        return asyncio.run(_execute(args, urls, connection, additions, deletions, out))
    except (UserScramError, CommandConfigError) as error:
        print(error, file=sys.stderr)
        return 1
    except ControllerError as error:
        out(f"Error while executing config command with args '{_safe_args(args)}'")
        out(f"{error.error}: {error.message}")
        return 1


def _safe_args(args: argparse.Namespace) -> str:
    """The command without any password (for an error line)."""
    action = "--alter" if args.alter else "--describe"
    users = " ".join(f"--entity-name {name}" for name in args.entity_name)
    return f"{action} --entity-type users {users}".strip()


def _check_args(args: argparse.Namespace) -> None:
    if args.alter == args.describe:
        raise UserScramError("Command must include exactly one action: --describe, --alter")
    if not args.bootstrap_controller:
        raise UserScramError("--bootstrap-controller must be specified")
    if args.entity_type != "users":
        raise UserScramError(
            "--entity-type users must be specified (pykraft user-scram manages SCRAM users only)"
        )
    if args.alter:
        if len(args.entity_name) != 1:
            raise UserScramError("--entity-name must be specified exactly once with --alter")
        if not args.add_config and not args.delete_config:
            raise UserScramError(
                "At least one of --add-config or --delete-config must be specified with --alter"
            )
    elif args.add_config or args.delete_config:
        raise UserScramError("--add-config and --delete-config are only valid with --alter")


def _mechanism(name: str) -> ScramMechanism:
    mechanism = ScramMechanism.from_mechanism_name(name.strip().upper())
    if mechanism is ScramMechanism.UNKNOWN:
        raise UserScramError(
            f"Invalid config(s): {name.strip()} (users take SCRAM-SHA-256 and SCRAM-SHA-512)"
        )
    return mechanism


def parse_add_config(text: str) -> list[ScramAddition]:
    """``SCRAM-SHA-256=[iterations=8192,password=p],SCRAM-SHA-512=[password=p]``."""
    additions: list[ScramAddition] = []
    position = 0
    while position < len(text):
        item = _ITEM.match(text, position)
        if item is None or item.end() == position:
            raise UserScramError(
                "Invalid --add-config: expected MECHANISM=[iterations=N,password=P],... "
                f"from character {position}"
            )
        additions.append(_addition(_mechanism(item[1]), item[2]))
        position = item.end()
    seen = [a.mechanism for a in additions]
    if len(set(seen)) != len(seen):
        raise UserScramError("Invalid --add-config: a mechanism is given twice")
    return additions


def _addition(mechanism: ScramMechanism, value: str) -> ScramAddition:
    if not value.startswith("["):
        if not value:
            raise UserScramError(
                f"Invalid --add-config: {mechanism.mechanism_name} has no password"
            )
        return ScramAddition(mechanism, DEFAULT_ITERATIONS, value)
    fields: dict[str, str] = {}
    for part in value[1:-1].split(","):
        key, separator, field = part.partition("=")
        if not separator or key.strip() not in ("iterations", "password"):
            raise UserScramError(
                f"Invalid --add-config: {mechanism.mechanism_name} takes [iterations=N,password=P]"
            )
        fields[key.strip()] = field.strip()
    if not fields.get("password"):
        raise UserScramError(f"Invalid --add-config: {mechanism.mechanism_name} has no password")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise UserScramError(
            f"Invalid --add-config: {mechanism.mechanism_name} iterations must be an integer"
        ) from None
    return ScramAddition(mechanism, iterations, fields["password"])


def parse_delete_config(text: str) -> list[ScramMechanism]:
    return [_mechanism(name) for name in text.split(",") if name.strip()]


def describe_line(user: str, infos: list[tuple[str, int]]) -> str:
    """Kafka's ``ConfigCommand.describeScramCredentials`` line."""
    configs = ", ".join(f"{mechanism}=iterations={iterations}" for mechanism, iterations in infos)
    return f"SCRAM credential configs for user-principal '{user}' are {configs}"


async def _execute(
    args: argparse.Namespace,
    urls: list[str],
    connection: ControllerConnection,
    additions: list[ScramAddition],
    deletions: list[ScramMechanism],
    out: Callable[[str], None],
) -> int:
    async with connection.client(urls, DEADLINE_S) as client:
        if args.describe:
            await _describe(client, args.entity_name, out)
            return 0
        user = args.entity_name[0]
        requests = [
            AlterUserScramCredentialsRequest(deletions=(ScramCredentialDeletion(user, m),))
            for m in deletions
        ] + [
            AlterUserScramCredentialsRequest(
                upsertions=(
                    upsertion_from_password(
                        user,
                        addition.mechanism,
                        addition.password,
                        secrets.token_bytes(SALT_BYTES),
                        addition.iterations,
                    ),
                )
            )
            for addition in additions
        ]
        for request in requests:
            response = await client.alter_user_scram_credentials(request)
            for result in response.results:
                if not result.error.is_success():
                    raise ControllerError(result.error.name, result.error.message or "")
    out(f"Completed updating config for user {user}.")
    return 0


async def _describe(client: ControllerClient, users: list[str], out: Callable[[str], None]) -> None:
    response = await client.describe_user_scram_credentials(users or None)
    for result in response.results:
        if result.error.is_success():
            infos = [(i.mechanism.mechanism_name, i.iterations) for i in result.credential_infos]
            out(describe_line(result.user, infos))
        else:
            # Kafka prints RESOURCE_NOT_FOUND for a user without credentials the same way.
            out(
                f"Error retrieving SCRAM credential configs for user-principal '{result.user}': "
                f"{result.error.message or result.error.name}"
            )
