"""``pykraft topics``: kafka-topics.sh against the controllers' admin API.

    pykraft topics --bootstrap-controller 127.0.0.1:19093 --create --topic pet \\
        --partitions 3 --replication-factor 3
    pykraft topics --bootstrap-controller 127.0.0.1:19093 --list
    pykraft topics --bootstrap-controller 127.0.0.1:19093 --describe --topic pet
    pykraft topics --bootstrap-controller 127.0.0.1:19093 --alter --topic pet --partitions 6
    pykraft topics --bootstrap-controller 127.0.0.1:19093 --delete --topic pet

Flags, output and messages follow Kafka's ``TopicCommand`` (tools/.../TopicCommand.java):
``--topic`` is a regular expression except with ``--create``; ``--describe`` prints
``Topic: pet<TAB>TopicId: …<TAB>PartitionCount: 3<TAB>ReplicationFactor: 3<TAB>Configs: …`` (only
configs that differ from the default) and one ``<TAB>Topic: pet<TAB>Partition: 0<TAB>Leader: …``
line per partition; a failed request prints ``Error while executing topic command : <message>``
on stdout, a bad argument prints the message on stderr; both exit with status 1.
``--bootstrap-controller`` takes the controllers' HTTP listeners (host:port or URLs, comma
separated); any controller will do, writes are redirected to the active one.
``--command-config`` reaches a secure controller with Kafka's client properties (TLS client
certificate, or SASL_SSL credentials sent as HTTP Basic; ``pykraft/command_config.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.controller_client import ControllerClient
from pykraft.command_config import CommandConfigError, load_command_config
from pykraft.metadata.api.topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    PartitionDescription,
    TopicDescription,
)
from pykraft.quorum.managers.configs import TOPIC_CONFIGS

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
ACTIONS = ("list", "describe", "create", "alter", "delete")
MAX_REPLICATION_FACTOR = 32767  # Short.MAX_VALUE
# An admin tool should give up quicker than a broker does.
DEADLINE_S = 15.0


class TopicCommandError(Exception):
    """Bad arguments (Kafka's IllegalArgumentException): printed on stderr, exit status 1."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-controller",
        metavar="HOST:PORT",
        help="REQUIRED: the controllers' HTTP listeners, comma separated",
    )
    parser.add_argument(
        "--command-config", type=Path, metavar="FILE", help="client properties (TLS, SASL)"
    )
    for action in ACTIONS:
        parser.add_argument(f"--{action}", action="store_true")
    parser.add_argument("--topic", help="the topic (a regular expression except with --create)")
    parser.add_argument("--partitions", type=int)
    parser.add_argument("--replication-factor", type=int)
    parser.add_argument(
        "--replica-assignment",
        metavar="B1:B2,B3:B4",
        help="broker ids per partition, e.g. 1:2,2:3,3:1",
    )
    parser.add_argument("--config", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--if-exists", action="store_true")
    parser.add_argument("--if-not-exists", action="store_true")
    parser.add_argument("--exclude-internal", action="store_true")
    parser.add_argument("--under-replicated-partitions", action="store_true")
    parser.add_argument("--unavailable-partitions", action="store_true")
    parser.add_argument("--topics-with-overrides", action="store_true")


def run(args: argparse.Namespace, out: Callable[[str], None] = print) -> int:
    try:
        action = _check_args(args)
        return asyncio.run(_execute(action, args, out))
    except (TopicCommandError, CommandConfigError) as error:
        print(error, file=sys.stderr)
        return 1
    except ControllerError as error:
        out(f"Error while executing topic command : {error.message}")
        return 1


def _check_args(args: argparse.Namespace) -> str:
    actions = [action for action in ACTIONS if getattr(args, action)]
    if len(actions) != 1:
        raise TopicCommandError(
            "Command must include exactly one action: --list, --describe, "
            "--create, --alter or --delete"
        )
    if not args.bootstrap_controller:
        raise TopicCommandError("--bootstrap-controller must be specified")
    action = actions[0]
    if action not in ("list", "describe") and not args.topic:
        raise TopicCommandError(f'Missing required argument "[topic]" for --{action}')
    if action == "alter" and args.partitions is None:
        raise TopicCommandError('Missing required argument "[partitions]" for --alter')
    if args.config and action != "create":
        raise TopicCommandError(
            'Option "[config]" can\'t be used with option "['
            + action
            + ']" (to alter topic configurations, use the configs API)'
        )
    if args.replication_factor is not None and action != "create":
        raise TopicCommandError(
            f'Option "[replication-factor]" can\'t be used with option "[{action}]"'
        )
    if args.if_not_exists and action != "create":
        raise TopicCommandError(f'Option "[if-not-exists]" can\'t be used with option "[{action}]"')
    if args.if_exists and action not in ("alter", "delete", "describe"):
        raise TopicCommandError(f'Option "[if-exists]" can\'t be used with option "[{action}]"')
    return action


async def _execute(action: str, args: argparse.Namespace, out: Callable[[str], None]) -> int:
    urls = [url for url in args.bootstrap_controller.split(",") if url.strip()]
    connection = load_command_config(getattr(args, "command_config", None))
    async with connection.client(urls, DEADLINE_S) as client:
        if action == "create":
            await _create(client, args, out)
        elif action == "list":
            out("\n".join(await _matching_topics(client, args)))
        elif action == "describe":
            await _describe(client, args, out)
        elif action == "alter":
            await _alter(client, args)
        else:
            await _delete(client, args)
    return 0


# ---------------------------------------------------------------------------- create


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """Kafka's ``parseReplicaAssignment``: ``1:2,2:3`` -> {0: [1, 2], 1: [2, 3]}."""
    assignment: dict[int, list[int]] = {}
    for index, item in enumerate(text.split(",")):
        try:
            brokers = [int(part.strip()) for part in item.split(":")]
        except ValueError:
            raise TopicCommandError(
                f"Invalid replica assignment {text!r}: broker ids are integers"
            ) from None
        duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
        if duplicates:
            raise TopicCommandError(
                "Partition replica lists may not contain duplicate "
                f"entries: {','.join(map(str, duplicates))}"
            )
        assignment[index] = brokers
        if len(brokers) != len(assignment[0]):
            raise TopicCommandError(
                f"Partition {index} has different replication factor: {brokers}"
            )
    return assignment


def _parse_configs(items: Sequence[str]) -> dict[str, str | None]:
    configs: dict[str, str | None] = {}
    for item in items:
        parts = re.split(r"\s*=\s*", item)
        if len(parts) != 2:
            raise TopicCommandError(
                "requirement failed: Invalid topic config: all configs to "
                'be added must be in the format "key=val".'
            )
        configs[parts[0].strip()] = parts[1].strip()
    return configs


async def _create(
    client: ControllerClient, args: argparse.Namespace, out: Callable[[str], None]
) -> None:
    name: str = args.topic
    rf, partitions = args.replication_factor, args.partitions
    if rf is not None and not 1 <= rf <= MAX_REPLICATION_FACTOR:
        raise TopicCommandError(
            f"The replication factor must be between 1 and {MAX_REPLICATION_FACTOR} inclusive"
        )
    if partitions is not None and partitions < 1:
        raise TopicCommandError("The partitions must be greater than 0")
    assignment = (
        parse_replica_assignment(args.replica_assignment) if args.replica_assignment else {}
    )
    if assignment and (rf is not None or partitions is not None):
        raise TopicCommandError(
            'Option "[replica-assignment]" can\'t be used with option '
            '"[partitions]" or "[replication-factor]"'
        )
    if "." in name or "_" in name:
        out(
            "WARNING: Due to limitations in metric names, topics with a period ('.') or "
            "underscore ('_') could collide. To avoid issues it is best to use either, but "
            "not both."
        )
    topic = CreatableTopic(
        name=name,
        num_partitions=-1 if partitions is None else partitions,
        replication_factor=-1 if rf is None else rf,
        assignments=tuple(
            CreatableReplicaAssignment(index, tuple(brokers))
            for index, brokers in sorted(assignment.items())
        ),
        configs=tuple(
            CreatableTopicConfig(key, value) for key, value in _parse_configs(args.config).items()
        ),
    )
    try:
        await client.create_topic(topic, validate_only=False)
    except ControllerError as error:
        if error.error == "TOPIC_ALREADY_EXISTS" and args.if_not_exists:
            return
        raise
    out(f"Created topic {name}.")


# ---------------------------------------------------------------------------- the others


def _include_pattern(text: str) -> re.Pattern[str]:
    """Kafka's ``IncludeList``: commas mean alternatives, quotes and spaces are dropped."""
    cleaned = re.sub(
        r"[\"']+$", "", re.sub(r"^[\"']+", "", text.strip().replace(",", "|").replace(" ", ""))
    )
    try:
        return re.compile(cleaned)
    except re.error:
        raise TopicCommandError(f"{text} is an invalid regex.") from None


async def _matching_topics(client: ControllerClient, args: argparse.Namespace) -> list[str]:
    names = sorted(listing.name for listing in await client.list_topics())
    pattern = _include_pattern(args.topic) if args.topic else None
    return [
        name
        for name in names
        if (pattern is None or pattern.fullmatch(name))
        and not (args.exclude_internal and name in INTERNAL_TOPICS)
    ]


async def _existing_topics(client: ControllerClient, args: argparse.Namespace) -> list[str]:
    """``getTopics`` + ``ensureTopicExists``."""
    topics = await _matching_topics(client, args)
    if args.topic and not topics and not args.if_exists:
        raise TopicCommandError(f"Topic '{args.topic}' does not exist as expected")
    return topics


async def _alter(client: ControllerClient, args: argparse.Namespace) -> None:
    topics = await _existing_topics(client, args)
    assignment = (
        parse_replica_assignment(args.replica_assignment) if args.replica_assignment else {}
    )
    for name in topics:
        new_assignments = None
        if assignment:
            current = len((await client.describe_topic(name)).partitions)
            new_assignments = [
                brokers for index, brokers in sorted(assignment.items()) if index >= current
            ]
        await client.create_partitions(name, args.partitions, new_assignments, validate_only=False)


async def _delete(client: ControllerClient, args: argparse.Namespace) -> None:
    for name in await _existing_topics(client, args):
        await client.delete_topic(name)


async def _describe(
    client: ControllerClient, args: argparse.Namespace, out: Callable[[str], None]
) -> None:
    topics = await _existing_topics(client, args)
    live = {broker.broker_id for broker in await client.list_brokers() if not broker.fenced}
    reports = args.under_replicated_partitions or args.unavailable_partitions
    for name in topics:
        description = await client.describe_topic(name)
        overrides = non_default_configs(description.configs)
        if not reports and (not args.topics_with_overrides or overrides):
            out(topic_line(description, overrides))
        if args.topics_with_overrides:
            continue
        for partition in sorted(description.partitions, key=lambda p: p.partition):
            if _wanted(args, partition, live):
                out(partition_line(name, partition))


def _wanted(args: argparse.Namespace, partition: PartitionDescription, live: set[int]) -> bool:
    if not (args.under_replicated_partitions or args.unavailable_partitions):
        return True
    under_replicated = replication_factor(partition) > len(partition.isr)
    unavailable = partition.leader < 0 or partition.leader not in live
    return bool(
        (args.under_replicated_partitions and under_replicated)
        or (args.unavailable_partitions and unavailable)
    )


def non_default_configs(configs: Mapping[str, str]) -> dict[str, str]:
    """The configs whose value is not Kafka's default (``!ConfigEntry.isDefault()``)."""
    return {
        name: value
        for name, value in sorted(configs.items())
        if name not in TOPIC_CONFIGS or TOPIC_CONFIGS[name].default != value
    }


def replication_factor(partition: PartitionDescription) -> int:
    """Kafka's ``getReplicationFactor``: during a reassignment, the replicas being added do
    not count."""
    if partition.adding_replicas or partition.removing_replicas:
        return len(partition.replicas) - len(partition.adding_replicas)
    return len(partition.replicas)


def topic_line(description: TopicDescription, overrides: dict[str, str]) -> str:
    first = min(description.partitions, key=lambda p: p.partition, default=None)
    rf = replication_factor(first) if first is not None else 0
    configs = ",".join(f"{name}={value}" for name, value in overrides.items())
    return (
        f"Topic: {description.name}\tTopicId: {description.topic_id}\t"
        f"PartitionCount: {len(description.partitions)}\tReplicationFactor: {rf}\t"
        f"Configs: {configs}"
    )


def partition_line(topic: str, partition: PartitionDescription) -> str:
    """One partition as kafka-topics.sh prints it (Kafka's TopicCommand.PartitionDescription):
    Elr/LastKnownElr as comma-separated ids (KIP-966), N/A when the controller did not say."""
    leader = str(partition.leader) if partition.leader >= 0 else "none"
    line = (
        f"\tTopic: {topic}\tPartition: {partition.partition}\tLeader: {leader}\t"
        f"Replicas: {_ids(partition.replicas)}\tIsr: {_ids(partition.isr)}"
    )
    if partition.adding_replicas or partition.removing_replicas:
        line += (
            f"\tAdding Replicas: {_ids(partition.adding_replicas)}"
            f"\tRemoving Replicas: {_ids(partition.removing_replicas)}"
        )
    elr, last_known = partition.eligible_leader_replicas, partition.last_known_elr
    return (
        line
        + f"\tElr: {'N/A' if elr is None else _ids(elr)}"
        + f"\tLastKnownElr: {'N/A' if last_known is None else _ids(last_known)}"
    )


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)


def main(argv: list[str] | None = None) -> int:
    """``python -m pykraft.topics_cmd ...`` (what ``pykraft topics`` runs)."""
    parser = argparse.ArgumentParser(
        prog="pykraft topics",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
