"""``pykraft reassign-partitions``: kafka-reassign-partitions.sh — move partition replicas
between brokers (KIP-455), with replication throttles (KIP-73).

    pykraft reassign-partitions --bootstrap-server HOST:PORT [--command-config FILE] \\
        --generate --topics-to-move-json-file FILE --broker-list 1,2,3
        --execute --reassignment-json-file FILE [--throttle BYTES_PER_S] [--additional]
        --verify --reassignment-json-file FILE [--preserve-throttles]
        --cancel --reassignment-json-file FILE [--preserve-throttles]
        --list

Options, JSON files and messages are Kafka's ``ReassignPartitionsCommand``; the decisions are
``reassign_plan.py``. ``--execute`` prints the current assignment (to save for a rollback),
sets the throttles when ``--throttle`` is given, then starts the moves; it refuses to run while
other reassignments are in progress unless ``--additional``. ``--verify`` prints each
partition's state and, once every one is complete, clears the throttles (unless
``--preserve-throttles``), as does ``--cancel``. ``--disable-rack-aware`` is accepted and is the
only placement ``--generate`` makes (pykraft's tool has no rack-aware variant yet). A bad option
or file, or a failed call, prints one line on stderr and exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from pykraft.admin_client import KafkaAdminClient
from pykraft.admin_codec import TopicMetadata
from pykraft.admin_config import load_admin_config
from pykraft.admin_errors import AdminError, BootstrapError
from pykraft.admin_errors import parse_bootstrap_servers as parse_bootstrap
from pykraft.admin_reassignments import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ConfigChange,
    ConfigOp,
    PartitionReassignment,
)
from pykraft.command_config import CommandConfigError
from pykraft.fetcher.replication_quota import (
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
)
from pykraft.protocol.errors import Errors
from pykraft.reassign_plan import (
    BROKER_THROTTLE_CONFIGS,
    TOPIC_THROTTLE_CONFIGS,
    Assignment,
    ReassignPlanError,
    format_assignment,
    list_lines,
    parse_broker_list,
    parse_reassignment,
    parse_topics_to_move,
    propose_assignment,
    throttles_for,
    verify_lines,
)
from pykraft.storage.system_clock import SystemClock
from pykraft.storage.topic_partition import TopicPartition

Out = Callable[[str], None]
ACTIONS = ("generate", "execute", "verify", "cancel", "list")


class ReassignAdmin(Protocol):
    """The calls of Kafka's ``Admin`` this command makes: ``KafkaAdminClient``."""

    async def describe_topics(self, topics: Sequence[str]) -> dict[str, TopicMetadata]: ...
    async def broker_ids(self) -> list[int]: ...
    async def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, tuple[Errors, str | None]]: ...
    async def list_partition_reassignments(
        self, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, PartitionReassignment]: ...
    async def incremental_alter_configs(self, changes: Sequence[ConfigChange]) -> None: ...


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "This tool helps to move topic partitions between replicas (KIP-455), "
        "with replication throttles (KIP-73)."
    )
    parser.add_argument("--bootstrap-server", metavar="host:port", help="REQUIRED")
    parser.add_argument(
        "--command-config", type=Path, metavar="FILE", help="admin client properties (TLS, SASL)"
    )
    for action in ACTIONS:
        parser.add_argument(f"--{action}", action="store_true", help=f"the {action} action")
    parser.add_argument("--topics-to-move-json-file", type=Path, metavar="FILE")
    parser.add_argument("--broker-list", metavar="1,2,3")
    parser.add_argument("--reassignment-json-file", type=Path, metavar="FILE")
    parser.add_argument(
        "--throttle", type=int, default=-1, metavar="BYTES_PER_S",
        help="the inter-broker replication throttle of the moves (bytes/s)",
    )  # fmt: skip
    parser.add_argument("--additional", action="store_true", help="add to running moves")
    parser.add_argument("--preserve-throttles", action="store_true")
    parser.add_argument("--disable-rack-aware", action="store_true")


def check_args(args: argparse.Namespace) -> str:
    """The one action asked for, with the options it needs (Kafka's ``validateAndParseArgs``)."""
    if not args.bootstrap_server:
        raise ReassignPlanError("Please specify --bootstrap-server")
    chosen = [action for action in ACTIONS if getattr(args, action)]
    if len(chosen) != 1:
        raise ReassignPlanError(
            "Command must include exactly one action: --generate, --execute, --verify, "
            "--cancel, or --list"
        )
    action = chosen[0]
    if action == "generate" and (args.topics_to_move_json_file is None or not args.broker_list):
        raise ReassignPlanError("--generate needs --topics-to-move-json-file and --broker-list")
    if action in ("execute", "verify", "cancel") and args.reassignment_json_file is None:
        raise ReassignPlanError(f"--{action} needs --reassignment-json-file")
    return action


def run(args: argparse.Namespace, out: Out = print) -> int:
    try:
        action = check_args(args)
        config = load_admin_config(args.command_config)
        servers = parse_bootstrap(args.bootstrap_server)
    except (ReassignPlanError, CommandConfigError, BootstrapError) as error:
        print(error, file=sys.stderr)
        return 1
    clock = SystemClock()

    async def main() -> int:
        async with KafkaAdminClient(servers, config, clock) as admin:
            return await execute(action, args, admin, out, random.Random())

    return asyncio.run(main())


async def execute(
    action: str, args: argparse.Namespace, admin: ReassignAdmin, out: Out, rng: random.Random
) -> int:
    try:
        if action == "generate":
            await generate(admin, args, out, rng)
        elif action == "execute":
            await execute_assignment(admin, args, out)
        elif action == "verify":
            await verify(admin, args, out)
        elif action == "cancel":
            await cancel(admin, args, out)
        else:
            reassignments = await admin.list_partition_reassignments()
            for line in list_lines(
                {
                    tp: (r.replicas, r.adding_replicas, r.removing_replicas)
                    for tp, r in reassignments.items()
                }
            ):
                out(line)
    except (ReassignPlanError, AdminError, OSError) as error:
        print(f"Error: {error}", file=sys.stderr)
        return 1
    return 0


async def current_assignment(admin: ReassignAdmin, topics: Sequence[str]) -> Assignment:
    described = await admin.describe_topics(sorted(set(topics)))
    return {
        TopicPartition(name, p.partition): tuple(p.replicas)
        for name, topic in described.items()
        for p in topic.partitions
    }


async def generate(
    admin: ReassignAdmin, args: argparse.Namespace, out: Out, rng: random.Random
) -> None:
    topics = parse_topics_to_move(args.topics_to_move_json_file.read_text())
    brokers = parse_broker_list(args.broker_list)
    unknown = sorted(set(brokers) - set(await admin.broker_ids()))
    if unknown:
        raise ReassignPlanError("Unknown broker id " + ",".join(map(str, unknown)))
    current = await current_assignment(admin, topics)
    out("Current partition replica assignment")
    out(format_assignment(current))
    out("")
    out("Proposed partition reassignment configuration")
    out(format_assignment(propose_assignment(current, brokers, rng)))


async def execute_assignment(admin: ReassignAdmin, args: argparse.Namespace, out: Out) -> None:
    targets = parse_reassignment(args.reassignment_json_file.read_text())
    running = await admin.list_partition_reassignments()
    if not args.additional and running:
        raise ReassignPlanError(
            "Cannot execute because there is an existing partition assignment. Use "
            "--additional to override this and create a new partition assignment in addition "
            "to the existing one. The --additional flag can also be used to change the "
            "throttle by resubmitting the current reassignment."
        )
    wanted = {b for replicas in targets.values() for b in replicas}
    unknown = sorted(wanted - set(await admin.broker_ids()))
    if unknown:
        raise ReassignPlanError("Unknown broker id " + ",".join(map(str, unknown)))
    current = await current_assignment(admin, [tp.topic for tp in targets])
    missing = sorted(str(tp) for tp in targets if tp not in current)
    if missing:
        raise ReassignPlanError("Topic or partition not found: " + ",".join(missing))
    out("Current partition replica assignment")
    out("")
    out(format_assignment({tp: current[tp] for tp in targets}))
    out("")
    out("Save this to use as the --reassignment-json-file option during rollback")
    if args.throttle >= 0:
        await set_throttles(admin, current, targets, running, args.throttle)
        out(
            "Warning: You must run --verify periodically, until the reassignment completes, "
            "to ensure the throttle is removed."
        )
        out(f"The inter-broker throttle limit was set to {args.throttle} B/s")
    results = await admin.alter_partition_reassignments(targets)
    failed = {tp: result for tp, result in results.items() if result[0] is not Errors.NONE}
    if failed:
        lines = [f"{tp}: {message or error.name}" for tp, (error, message) in failed.items()]
        raise ReassignPlanError("Error reassigning partition(s):\n" + "\n".join(lines))
    started = ",".join(str(tp) for tp in targets)
    plural = "" if len(targets) == 1 else "s"
    out(f"Successfully started partition reassignment{plural} for {started}")


async def set_throttles(
    admin: ReassignAdmin,
    current: Assignment,
    targets: Assignment,
    running: Mapping[TopicPartition, PartitionReassignment],
    rate: int,
) -> None:
    moving = {tp: (r.replicas, r.adding_replicas) for tp, r in running.items()}
    throttles = throttles_for(current, targets, moving)
    changes = [
        ConfigChange(TOPIC_RESOURCE, topic, name, ConfigOp.SET, value)
        for topic, (leaders, followers) in throttles.topics.items()
        for name, value in ((LEADER_THROTTLED_REPLICAS, leaders),
                            (FOLLOWER_THROTTLED_REPLICAS, followers))
        if value
    ]  # fmt: skip
    changes += [
        ConfigChange(BROKER_RESOURCE, str(broker), name, ConfigOp.SET, str(rate))
        for broker in throttles.brokers
        for name in (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE)
    ]
    await admin.incremental_alter_configs(changes)


async def clear_throttles(admin: ReassignAdmin, topics: Sequence[str], out: Out) -> None:
    """Kafka's ``clearAllThrottles``: every broker's rates, the moved topics' replica lists."""
    brokers = await admin.broker_ids()
    out("Clearing broker-level throttles on brokers " + ",".join(map(str, brokers)))
    changes = [
        ConfigChange(BROKER_RESOURCE, str(broker), name, ConfigOp.DELETE)
        for broker in brokers
        for name in BROKER_THROTTLE_CONFIGS
    ]
    for topic in sorted(set(topics)):
        out(f"Clearing topic-level throttles on topic {topic}")
        changes += [
            ConfigChange(TOPIC_RESOURCE, topic, name, ConfigOp.DELETE)
            for name in TOPIC_THROTTLE_CONFIGS
        ]
    await admin.incremental_alter_configs(changes)


async def verify(admin: ReassignAdmin, args: argparse.Namespace, out: Out) -> None:
    targets = parse_reassignment(args.reassignment_json_file.read_text())
    # Kafka's findPartitionReassignmentStates lists every reassignment: the throttles are
    # cleared only when none runs, the file's or another's (verifyAssignment).
    in_progress = await admin.list_partition_reassignments()
    current = await current_assignment(admin, [tp.topic for tp in targets])
    lines, done = verify_lines(targets, current, in_progress)
    for line in lines:
        out(line)
    if done and not in_progress and not args.preserve_throttles:
        out("")
        await clear_throttles(admin, [tp.topic for tp in targets], out)


async def cancel(admin: ReassignAdmin, args: argparse.Namespace, out: Out) -> None:
    targets = parse_reassignment(args.reassignment_json_file.read_text())
    in_progress = await admin.list_partition_reassignments(list(targets))
    moving = [tp for tp in targets if tp in in_progress]
    if moving:
        results = await admin.alter_partition_reassignments(dict.fromkeys(moving))
        failed = [
            f"{tp}: {message or error.name}"
            for tp, (error, message) in results.items()
            if error is not Errors.NONE
        ]
        if failed:
            raise ReassignPlanError(
                "Error cancelling partition reassignment(s):\n" + "\n".join(failed)
            )
        out("Successfully cancelled partition reassignment(s) for: " + ",".join(map(str, moving)))
    else:
        out("None of the specified partition reassignments are active.")
    if not args.preserve_throttles:
        await clear_throttles(admin, [tp.topic for tp in targets], out)
