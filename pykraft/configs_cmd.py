"""``pykraft configs``: kafka-configs.sh over the Kafka protocol (Kafka 3.9's ``ConfigCommand``).

    pykraft configs --bootstrap-server HOST:PORT [--command-config FILE] \\
        --describe --entity-type topics|brokers|broker-loggers|client-metrics|users|clients \\
            [--entity-name NAME | --entity-default] [--all]
        --alter --entity-type ... (--entity-name NAME | --entity-default) \\
            [--add-config 'k1=v1,k2=[a,b]'] [--add-config-file FILE] [--delete-config k1,k2]

Topics, brokers (one, or ``--entity-default``), broker loggers and client-metrics subscriptions
are described with DescribeConfigs and altered with IncrementalAlterConfigs (SET and DELETE), a
user's SCRAM credentials with Describe/AlterUserScramCredentials (KIP-554), and the client quotas
of users, clients or a user's client (``--entity-type users --entity-name u --entity-type
clients --entity-name c``; ``--entity-default`` for a default) with Describe/AlterClientQuotas
(KIP-546), as Kafka's tool does. The client is kafka-python's ``KafkaAdminClient`` (librdkafka
names no BROKER_LOGGER or CLIENT_METRICS resource), and pykraft's own ``KafkaAdminClient`` for
the quotas, which neither library calls. Parsing and printing are ``configs_plan``'s.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kafka.admin import (
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka.errors import KafkaError

from pykraft.admin_client import KafkaAdminClient as PykraftAdminClient
from pykraft.admin_client_quotas import (
    MATCH_ANY,
    MATCH_DEFAULT,
    MATCH_EXACT,
    Entity,
    QuotaFilterComponent,
)
from pykraft.admin_config import load_admin_config
from pykraft.admin_errors import AdminError, BootstrapError, parse_bootstrap_servers
from pykraft.client_properties import kafka_python_config, load_client_properties
from pykraft.command_config import CommandConfigError
from pykraft.configs_plan import (
    BROKER_LOGGERS,
    BROKERS,
    CLIENT_METRICS,
    CLIENTS,
    QUOTA_ENTITY_TYPES,
    SCRAM_MECHANISMS,
    TOPICS,
    USERS,
    ConfigEntry,
    ConfigsError,
    check_args,
    completed_line,
    describe_lines,
    missing_deletions,
    parse_add_config,
    parse_delete_config,
    quota_lines,
    quota_values,
    scram_description_line,
    scram_upsertions,
)
from pykraft.properties import ConfigError, Properties
from pykraft.storage.system_clock import SystemClock

Out = Callable[[str], None]
RESOURCE_TYPES = {
    TOPICS: ConfigResourceType.TOPIC,
    BROKERS: ConfigResourceType.BROKER,
    BROKER_LOGGERS: ConfigResourceType.BROKER_LOGGER,
    CLIENT_METRICS: ConfigResourceType.CLIENT_METRICS,
}


class ConfigsAdminClient(KafkaAdminClient):  # type: ignore[misc]
    """kafka-python's client, but the brokers' default entity (BROKER resource named "") goes to
    any broker, as Kafka's ``KafkaAdminClient`` sends it; kafka-python wants a broker id."""

    @staticmethod
    def _group_config_resources(config_resources: Any) -> Any:
        default = [r for r in config_resources if r.name == ""]
        named = [r for r in config_resources if r.name != ""]
        by_broker, others = KafkaAdminClient._group_config_resources(named)
        return by_broker, [*others, *default]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "This tool helps to manipulate and describe entity config for a topic, client, user, "
        "broker, broker-logger or client-metrics"
    )
    parser.add_argument("--bootstrap-server", metavar="server to connect to")
    parser.add_argument("--command-config", type=Path, metavar="command config property file")
    parser.add_argument("--describe", action="store_true")
    parser.add_argument("--alter", action="store_true")
    parser.add_argument("--all", action="store_true")
    # Kafka pairs each --entity-type with the --entity-name / --entity-default in the same
    # position, so both append to one list (None: the default entity).
    parser.add_argument("--entity-type", dest="entity_types", action="append", default=[])
    parser.add_argument("--entity-name", dest="entities", action="append", default=[])
    parser.add_argument(
        "--entity-default", dest="entities", action="append_const", const=None, default=[]
    )
    parser.add_argument("--add-config")
    parser.add_argument("--add-config-file", type=Path)
    parser.add_argument("--delete-config", action="append", default=[])


def run(args: argparse.Namespace, out: Out = print, err: Out | None = None) -> int:
    err = err or (lambda line: print(line, file=sys.stderr))
    try:
        entities(args)
        if not args.bootstrap_server:
            raise ConfigsError('Missing required argument "[bootstrap-server]"')
        additions = _additions(args)
        deletions = parse_delete_config(args.delete_config)
        check_args(
            args.describe, args.alter, args.entity_type, args.entity_name,
            args.entity_default, bool(additions or deletions),
        )  # fmt: skip
        properties = load_client_properties(args.command_config)
    except (ConfigsError, CommandConfigError) as error:
        err(str(error))
        return 1
    admin = ConfigsAdminClient(**kafka_python_config(args.bootstrap_server, properties))
    try:
        if args.describe:
            describe(args, admin, out)
        else:
            alter(args, admin, additions, deletions)
            out(completed_line(args.entity_type, args.entity_name))
        return 0
    except ConfigsError as error:
        err(str(error))
        return 1
    except KafkaError as error:
        err(f"Error while executing config command with args '{_args_text(args)}'")
        err(f"{type(error).__name__}: {error}")
        return 1
    finally:
        admin.close()


def entities(args: argparse.Namespace) -> None:
    """The first entity as ``entity_type`` / ``entity_name`` / ``entity_default``, after Kafka's
    checks of several: only a user with a client id (``<user, client-id>`` quotas), never more
    names than types."""
    types, names = args.entity_types, args.entities
    if len(types) > 1 and sorted(types) != sorted([USERS, CLIENTS]):
        raise ConfigsError("Only the entity types users and clients may be specified together")
    if len(names) > max(len(types), 1):
        raise ConfigsError("More entity names specified than entity types")
    args.entity_type = types[0] if types else None
    args.entity_default = bool(names) and names[0] is None
    args.entity_name = names[0] if names else None


def _args_text(args: argparse.Namespace) -> str:
    shown = {
        k: v for k, v in vars(args).items() if not k.startswith("_") and v not in (None, False, [])
    }
    return " ".join(
        f"--{k.replace('_', '-')} {v}" if v is not True else f"--{k}" for k, v in shown.items()
    )


def _additions(args: argparse.Namespace) -> dict[str, str]:
    additions: dict[str, str] = {}
    if args.add_config_file is not None:
        try:
            additions.update(Properties.load(args.add_config_file).values)
        except ConfigError as error:
            raise ConfigsError(str(error)) from None
    if args.add_config:
        additions.update(parse_add_config(args.add_config))
    return additions


def _entries(admin: KafkaAdminClient, entity_type: str, name: str) -> list[ConfigEntry]:
    resource = ConfigResource(RESOURCE_TYPES[entity_type], name)
    answer: Any = admin.describe_configs([resource], include_synonyms=True, config_filter="all")
    by_name: dict[str, Any] = next(iter(answer.values()), {})
    configs: dict[str, Any] = by_name.get(name, {})
    if entity_type == TOPICS and not configs:
        raise ConfigsError(f"The topic '{name}' does not exist.")
    return [
        ConfigEntry(
            key,
            data["value"],
            data["config_source"],
            bool(data["is_sensitive"]),
            tuple((s["source"], s["name"], s["value"]) for s in data.get("synonyms") or []),
        )
        for key, data in configs.items()
    ]


def _entities(args: argparse.Namespace, admin: KafkaAdminClient) -> list[str]:
    """The entities to describe: the one named, the default, or every one (Kafka lists topics
    with the internal ones, and brokers by id followed by the default)."""
    if args.entity_default:
        return [""]
    if args.entity_name is not None:
        return [args.entity_name]
    if args.entity_type == TOPICS:
        return sorted(admin.list_topics())
    if args.entity_type in (BROKERS, BROKER_LOGGERS):
        ids = sorted(int(b["broker_id"]) for b in admin.describe_cluster()["brokers"])
        return [str(i) for i in ids] + ([""] if args.entity_type == BROKERS else [])
    if args.entity_type == CLIENT_METRICS:
        listed: Any = admin.list_config_resources([ConfigResourceType.CLIENT_METRICS])
        return sorted(_names_of(listed))
    raise ConfigsError(f"Invalid entity type: {args.entity_type}")


def _names_of(listed: Any) -> list[str]:
    if isinstance(listed, dict):
        return [str(name) for names in listed.values() for name in names]
    return [getattr(item, "name", str(item)) for item in listed]


def describe(args: argparse.Namespace, admin: KafkaAdminClient, out: Out) -> None:
    if args.entity_type in (USERS, CLIENTS):
        for line in asyncio.run(_quota_call(args, lambda a: _describe_quotas(args, a))):
            out(line)
        if args.entity_types == [USERS]:  # Kafka: no SCRAM lines once clients are named
            describe_users(args, admin, out)
        return
    for entity in _entities(args, admin):
        entries = _entries(admin, args.entity_type, entity)
        for line in describe_lines(args.entity_type, entity, entries, args.all):
            out(line)


def describe_users(args: argparse.Namespace, admin: KafkaAdminClient, out: Out) -> None:
    if args.entity_default:
        return  # Kafka describes no SCRAM credentials of the default user
    users = [args.entity_name] if args.entity_name is not None else None
    answer: Any = admin.describe_user_scram_credentials(users)
    for user, description in sorted(answer.items()):
        if description.get("error"):
            if users is None:
                continue
            out(
                f"Error retrieving SCRAM credential configs for user-principal '{user}': "
                f"{description['error']}"
            )
            continue
        credentials = [
            (_mechanism_name(info["mechanism"]), int(info["iterations"]))
            for info in description.get("credential_infos") or []
        ]
        out(scram_description_line(user, credentials))


def _mechanism_name(mechanism: Any) -> str:
    name = getattr(mechanism, "name", str(mechanism))
    return str(name).replace("_", "-")


def alter(
    args: argparse.Namespace,
    admin: KafkaAdminClient,
    additions: dict[str, str],
    deletions: list[str],
) -> None:
    if args.entity_type in (USERS, CLIENTS):
        alter_scram(args, admin, additions, deletions)
        return
    name = "" if args.entity_default else args.entity_name
    current = {e.name: e for e in _entries(admin, args.entity_type, name)}
    dynamic = {
        key: entry
        for key, entry in current.items()
        if describe_lines(args.entity_type, name, [entry], describe_all=False)[1:]
    }
    missing_deletions(deletions, dynamic)
    changes: dict[str, Any] = {key: ("SET", value) for key, value in additions.items()}
    changes.update({key: ("DELETE", None) for key in deletions})
    resource = ConfigResource(RESOURCE_TYPES[args.entity_type], name, changes)
    answer: Any = admin.alter_configs([resource], raise_on_unknown=False, incremental=True)
    for results in answer.values():
        for result in results.values():
            if result != "OK":
                raise ConfigsError(_error_message(str(result)))


def _error_message(result: str) -> str:
    """kafka-python's "[Error 40] InvalidConfigurationError: message" as Kafka's message."""
    return result.split(": ", 1)[1] if result.startswith("[Error ") and ": " in result else result


def alter_scram(
    args: argparse.Namespace,
    admin: KafkaAdminClient,
    additions: dict[str, str],
    deletions: list[str],
) -> None:
    quota_additions = {k: v for k, v in additions.items() if k not in SCRAM_MECHANISMS}
    quota_deletions = [k for k in deletions if k not in SCRAM_MECHANISMS]
    if quota_additions or quota_deletions:
        values = quota_values(quota_additions)

        async def change(admin: PykraftAdminClient) -> list[str]:
            await _alter_quotas(args, admin, values, quota_deletions)
            return []

        asyncio.run(_quota_call(args, change))
    scram_deletions = [k for k in deletions if k in SCRAM_MECHANISMS]
    if not (scram_deletions or len(quota_additions) < len(additions)):
        return
    user = args.entity_name
    alterations: list[Any] = [
        UserScramCredentialDeletion(user, ScramMechanism[m.replace("-", "_")])
        for m in scram_deletions
    ]
    alterations += [
        UserScramCredentialUpsertion(
            user, ScramMechanism[u.mechanism.replace("-", "_")], u.password, u.iterations
        )
        for u in scram_upsertions(additions)
    ]
    answer: Any = admin.alter_user_scram_credentials(alterations)
    for error in answer.values():
        if error:
            raise ConfigsError(str(error))


# ---------------------------------------------------------------------- client quotas (KIP-546)


def _quota_entity(args: argparse.Namespace) -> Entity:
    if len(args.entities) != len(args.entity_types):
        raise ConfigsError("Exactly one entity name must be specified for every entity type")
    return tuple(
        (QUOTA_ENTITY_TYPES[kind], name)
        for kind, name in zip(args.entity_types, args.entities, strict=True)
    )


def _quota_filter(args: argparse.Namespace) -> list[QuotaFilterComponent]:
    """Kafka's ``getAllClientQuotasConfigs``: per entity type, its name, the default, or any
    name when none was given."""
    components = []
    for index, kind in enumerate(args.entity_types):
        quota_type = QUOTA_ENTITY_TYPES[kind]
        if index >= len(args.entities):
            components.append(QuotaFilterComponent(quota_type, MATCH_ANY))
        elif args.entities[index] is None:
            components.append(QuotaFilterComponent(quota_type, MATCH_DEFAULT))
        else:
            components.append(QuotaFilterComponent(quota_type, MATCH_EXACT, args.entities[index]))
    return components


async def _quota_call(
    args: argparse.Namespace, call: Callable[[PykraftAdminClient], Awaitable[list[str]]]
) -> list[str]:
    """``call`` on pykraft's admin client (librdkafka and kafka-python have no client quota
    calls), its failures as ``ConfigsError``."""
    try:
        servers = parse_bootstrap_servers(args.bootstrap_server)
        config = load_admin_config(args.command_config)
    except (BootstrapError, CommandConfigError) as error:
        raise ConfigsError(str(error)) from None
    try:
        async with PykraftAdminClient(servers, config, SystemClock()) as admin:
            return await call(admin)
    except AdminError as error:
        raise ConfigsError(str(error)) from None


async def _describe_quotas(args: argparse.Namespace, admin: PykraftAdminClient) -> list[str]:
    entries = await admin.describe_client_quotas(_quota_filter(args), strict=True)
    return quota_lines(entries)


async def _alter_quotas(
    args: argparse.Namespace,
    admin: PykraftAdminClient,
    values: dict[str, float],
    deletions: list[str],
) -> None:
    """Kafka's ``alterQuotaConfigs``: a deleted key must be set on the entity."""
    current = await admin.describe_client_quotas(_quota_filter(args), strict=True)
    missing_deletions(deletions, next(iter(current.values()), {}))
    ops: dict[str, float | None] = {**values, **dict.fromkeys(deletions)}
    await admin.alter_client_quotas(_quota_entity(args), ops)
