"""``pykraft acls``: kafka-acls.sh against the controllers' admin API (``/v1/acls``).

    pykraft acls --bootstrap-controller 127.0.0.1:19093 --command-config client.properties \\
        --add --allow-principal User:alice --operation Read --operation Describe --topic pet
    pykraft acls ... --add --deny-principal User:mallory --deny-host 10.0.0.7 --operation All \\
        --topic pay --resource-pattern-type prefixed
    pykraft acls ... --list [--topic pet] [--principal User:alice] [--resource-pattern-type match]
    pykraft acls ... --remove --force --allow-principal User:alice --operation Read --topic pet

Flags, output and messages follow Kafka's ``AclCommand`` (tools/.../AclCommand.java): one
action; resources ``--topic``, ``--group``, ``--cluster``, ``--transactional-id`` (several may
be given: every ACL is set on each); ``--resource-pattern-type`` LITERAL (the default) or
PREFIXED to add, and also ANY or MATCH to list or remove; ``--operation`` (repeatable, Kafka's
names such as ``Read`` or ``DescribeConfigs``; default ``All``) must be one the resource type
supports; a principal without ``--allow-host``/``--deny-host`` gets host ``*``. ``--add`` and
``--remove`` print the current ACLs of each resource afterwards, as kafka-acls.sh does;
``--remove`` asks for confirmation unless ``--force``. A bad argument prints the message on
stderr; a refused request prints ``Error while executing ACL command: <message>``; both exit 1.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.controller_client import ControllerClient
from pykraft.command_config import CommandConfigError, ControllerConnection, load_command_config
from pykraft.metadata.auth.acl import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pykraft.metadata.auth.authorizer import SUPPORTED_OPERATIONS

ACTIONS = ("add", "remove", "list")
DEADLINE_S = 15.0
Resource = tuple[ResourceType, str]


class AclCommandError(Exception):
    """Bad arguments: printed on stderr, exit status 1."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-controller", metavar="HOST:PORT", help="REQUIRED")
    parser.add_argument(
        "--command-config", type=Path, metavar="FILE", help="client properties (TLS, SASL)"
    )
    for action in ACTIONS:
        parser.add_argument(f"--{action}", action="store_true")
    parser.add_argument("--topic", action="append", default=[])
    parser.add_argument("--group", action="append", default=[])
    parser.add_argument("--transactional-id", action="append", default=[])
    parser.add_argument("--cluster", action="store_true")
    parser.add_argument("--resource-pattern-type", default="LITERAL", metavar="TYPE")
    parser.add_argument("--allow-principal", action="append", default=[])
    parser.add_argument("--deny-principal", action="append", default=[])
    parser.add_argument("--allow-host", action="append", default=[])
    parser.add_argument("--deny-host", action="append", default=[])
    parser.add_argument("--operation", action="append", default=[])
    parser.add_argument("--principal", action="append", default=[], help="--list filter")
    parser.add_argument("--force", action="store_true", help="--remove without asking")


def run(
    args: argparse.Namespace,
    out: Callable[[str], None] = print,
    ask: Callable[[str], str] = input,
) -> int:
    try:
        action = _check_args(args)
        connection = load_command_config(args.command_config)
        urls = [url for url in args.bootstrap_controller.split(",") if url.strip()]
        return asyncio.run(_execute(action, args, urls, connection, out, ask))
    except (AclCommandError, CommandConfigError) as error:
        print(error, file=sys.stderr)
        return 1
    except ControllerError as error:
        out(f"Error while executing ACL command: {error.message}")
        return 1


# ---------------------------------------------------------------------------- arguments


def _enum_name(text: str) -> str:
    """``DescribeConfigs``, ``describe-configs`` or ``DESCRIBE_CONFIGS`` -> DESCRIBE_CONFIGS."""
    if "_" in text or "-" in text or text.isupper():
        return text.upper().replace("-", "_")
    return "".join(f"_{c}" if c.isupper() else c.upper() for c in text).lstrip("_")


def pattern_type_of(text: str) -> PatternType:
    member = PatternType.__members__.get(text.upper())
    if member is None or member is PatternType.UNKNOWN:
        raise AclCommandError(
            f"Invalid --resource-pattern-type {text!r}: one of literal, prefixed, match, any"
        )
    return member


def operation_of(text: str) -> AclOperation:
    member = AclOperation.__members__.get(_enum_name(text))
    if member is None or member in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise AclCommandError(f"Invalid operation {text!r}")
    return member


def resources_of(args: argparse.Namespace) -> list[Resource]:
    resources: list[Resource] = [(ResourceType.TOPIC, name) for name in args.topic]
    resources += [(ResourceType.GROUP, name) for name in args.group]
    resources += [(ResourceType.TRANSACTIONAL_ID, name) for name in args.transactional_id]
    if args.cluster:
        resources.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return resources


def _check_args(args: argparse.Namespace) -> str:
    actions = [action for action in ACTIONS if getattr(args, action)]
    if len(actions) != 1:
        raise AclCommandError("Command must include exactly one action: --list, --add, --remove.")
    if not args.bootstrap_controller:
        raise AclCommandError("--bootstrap-controller must be specified")
    action = actions[0]
    pattern_type = pattern_type_of(args.resource_pattern_type)
    if action == "add" and pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclCommandError(
            f"A '--resource-pattern-type' value of '{pattern_type.name}' is not valid when "
            "adding acls."
        )
    if action != "list" and not resources_of(args):
        raise AclCommandError(
            "You must provide at least one resource: --topic <topic> or --cluster or "
            "--group <group> or --transactional-id <transactional-id>"
        )
    if action == "add" and not (args.allow_principal or args.deny_principal):
        raise AclCommandError(
            "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."
        )
    if action == "list" and (args.allow_principal or args.deny_principal or args.operation):
        raise AclCommandError(
            'Option "[list]" can\'t be used with options "[allow-principal]", '
            '"[deny-principal]" or "[operation]" (use --principal to filter)'
        )
    if args.allow_host and not args.allow_principal:
        raise AclCommandError("--allow-host needs --allow-principal")
    if args.deny_host and not args.deny_principal:
        raise AclCommandError("--deny-host needs --deny-principal")
    for principal in [*args.allow_principal, *args.deny_principal, *args.principal]:
        if ":" not in principal:
            raise AclCommandError(
                f"Could not parse principal from `{principal}` (no colon is present "
                "separating the principal type from the principal name)"
            )
    return action


def _operations(args: argparse.Namespace, resource_type: ResourceType) -> list[AclOperation]:
    operations = [operation_of(text) for text in args.operation] or [AclOperation.ALL]
    # Kafka's AclEntry.supportedOperations (AclCommand.validateOperation), ALL everywhere.
    supported = (*sorted(SUPPORTED_OPERATIONS[resource_type]), AclOperation.ALL)
    for operation in operations:
        if operation not in supported:
            names = ", ".join(operation_name(o) for o in supported)
            raise AclCommandError(
                f"ResourceType {resource_type.name} only supports operations {names}"
            )
    return operations


def entries_of(
    args: argparse.Namespace, resource_type: ResourceType
) -> list[tuple[str, str, AclOperation, AclPermissionType]]:
    """(principal, host, operation, permission) of every ACL the flags describe."""
    entries = []
    for permission, principals, hosts in (
        (AclPermissionType.ALLOW, args.allow_principal, args.allow_host),
        (AclPermissionType.DENY, args.deny_principal, args.deny_host),
    ):
        for principal in principals:
            for host in hosts or [WILDCARD_HOST]:
                for operation in _operations(args, resource_type):
                    entries.append((principal, host, operation, permission))
    return entries


def acls_to_add(args: argparse.Namespace) -> dict[Resource, list[AclBinding]]:
    pattern_type = pattern_type_of(args.resource_pattern_type)
    return {
        (resource_type, name): [
            AclBinding(
                resource_type=resource_type,
                resource_name=name,
                pattern_type=pattern_type,
                principal=principal,
                host=host,
                operation=operation,
                permission_type=permission,
            )
            for principal, host, operation, permission in entries_of(args, resource_type)
        ]
        for resource_type, name in resources_of(args)
    }


def resource_filters(args: argparse.Namespace) -> list[AclBindingFilter]:
    """One filter per resource (``--list`` without one: every resource)."""
    pattern_type = pattern_type_of(args.resource_pattern_type)
    resources = resources_of(args)
    if not resources:
        return [AclBindingFilter()]
    return [
        AclBindingFilter(resource_type=resource_type, resource_name=name, pattern_type=pattern_type)
        for resource_type, name in resources
    ]


# ---------------------------------------------------------------------------- output


def operation_name(operation: AclOperation) -> str:
    """Kafka's ``SecurityUtils.operationName``: DESCRIBE_CONFIGS -> DescribeConfigs."""
    return "".join(part.capitalize() for part in operation.name.split("_"))


def pattern_text(resource_type: ResourceType, name: str, pattern_type: PatternType) -> str:
    """Kafka's ``ResourcePattern.toString``."""
    return (
        f"ResourcePattern(resourceType={resource_type.name}, name={name}, "
        f"patternType={pattern_type.name})"
    )


def entry_text(acl: AclBinding) -> str:
    """Kafka's ``AccessControlEntry.toString``."""
    return (
        f"(principal={acl.principal}, host={acl.host}, operation={acl.operation.name}, "
        f"permissionType={acl.permission_type.name})"
    )


def _block(title: str, acls: Iterable[AclBinding]) -> str:
    """AclCommand's ``s"$title: $Nl ${acls.map("\\t" + _).mkString(Nl)} $Nl"``."""
    return f"{title}: \n " + "\n".join("\t" + entry_text(acl) for acl in acls) + " \n"


def listing(acls: Iterable[AclBinding], principals: list[str]) -> list[str]:
    """``Current ACLs for resource ...`` blocks, one per resource pattern, sorted."""
    by_pattern: dict[tuple[ResourceType, str, PatternType], list[AclBinding]] = {}
    for acl in acls:
        if principals and acl.principal not in principals:
            continue
        key = (acl.resource_type, acl.resource_name, acl.pattern_type)
        by_pattern.setdefault(key, []).append(acl)
    return [
        _block(f"Current ACLs for resource `{pattern_text(*key)}`", sorted(group, key=entry_text))
        for key, group in sorted(by_pattern.items())
    ]


# ---------------------------------------------------------------------------- execution


async def _execute(
    action: str,
    args: argparse.Namespace,
    urls: list[str],
    connection: ControllerConnection,
    out: Callable[[str], None],
    ask: Callable[[str], str],
) -> int:
    async with connection.client(urls, DEADLINE_S) as client:
        if action == "add":
            await _add(client, args, out)
        elif action == "remove" and not await _remove(client, args, out, ask):
            return 0
        await _list(client, args, out)
    return 0


async def _add(
    client: ControllerClient, args: argparse.Namespace, out: Callable[[str], None]
) -> None:
    for (resource_type, name), acls in acls_to_add(args).items():
        pattern = pattern_text(resource_type, name, pattern_type_of(args.resource_pattern_type))
        out(_block(f"Adding ACLs for resource `{pattern}`", acls))
        response = await client.create_acls(acls)
        for error in response.results:
            if not error.is_success():
                raise ControllerError(error.name, error.message or error.name)


async def _remove(
    client: ControllerClient,
    args: argparse.Namespace,
    out: Callable[[str], None],
    ask: Callable[[str], str],
) -> bool:
    """Kafka's ``removeAcls``: the named entries, or (no principal given) every ACL of each
    resource filter; False when the operator answers no."""
    filters = []
    for resource_filter in resource_filters(args):
        entries = entries_of(args, resource_filter.resource_type)
        pattern = pattern_text(
            resource_filter.resource_type,
            resource_filter.resource_name or "",
            resource_filter.pattern_type,
        )
        if entries:
            question = (
                "Are you sure you want to remove ACLs: \n "
                + "\n".join(
                    f"\t(principal={p}, host={h}, operation={o.name}, permissionType={t.name})"
                    for p, h, o, t in entries
                )
                + f" \n from resource filter `{pattern}`? (y/n)"
            )
        else:
            question = (
                f"Are you sure you want to delete all ACLs for resource filter `{pattern}`? (y/n)"
            )
        if not args.force and ask(question).strip().lower() != "y":
            return False
        filters += [
            entry_filter(resource_filter, principal, host, operation, permission)
            for principal, host, operation, permission in entries
        ] or [resource_filter]
    response = await client.delete_acls(filters)
    for result in response.results:
        if not result.error.is_success():
            raise ControllerError(result.error.name, result.error.message or result.error.name)
    return True


def entry_filter(
    base: AclBindingFilter,
    principal: str,
    host: str,
    operation: AclOperation,
    permission: AclPermissionType,
) -> AclBindingFilter:
    return AclBindingFilter(
        resource_type=base.resource_type,
        resource_name=base.resource_name,
        pattern_type=base.pattern_type,
        principal=principal,
        host=host,
        operation=operation,
        permission_type=permission,
    )


async def _list(
    client: ControllerClient, args: argparse.Namespace, out: Callable[[str], None]
) -> None:
    found: dict[tuple[object, ...], AclBinding] = {}
    for resource_filter in resource_filters(args):
        for acl in await client.describe_acls(resource_filter):
            found[(acl.resource_type, acl.resource_name, acl.pattern_type, entry_text(acl))] = acl
    for block in listing(found.values(), args.principal):
        out(block)
