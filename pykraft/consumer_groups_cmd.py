"""``pykraft consumer-groups``: kafka-consumer-groups.sh (Kafka 3.9's ``ConsumerGroupCommand``).

    pykraft consumer-groups --bootstrap-server HOST:PORT [--command-config FILE] \\
        --list [--state [STATES]] [--type [TYPES]]
        --describe (--group G ... | --all-groups) [--offsets | --members [--verbose] | --state]
        --reset-offsets (--group G ... | --all-groups) (--topic T[:P,P] ... | --all-topics)
            (--to-earliest | --to-latest | --to-current | --to-offset N | --shift-by N
             | --to-datetime YYYY-MM-DDTHH:mm:SS.sss | --by-duration PnDTnHnMnS | --from-file CSV)
            [--dry-run | --execute] [--export]
        --delete (--group G ... | --all-groups)
        --delete-offsets --group G --topic T[:P,P] ...

Option names, tables and messages are Kafka's (``ConsumerGroupCommandOptions``,
``ConsumerGroupCommand``, ``GroupOffsetsResetter``); the reset is planned by the pure
``consumer_groups_plan`` and printed by ``consumer_groups_views``. Offsets of an active group are
never reset ("Assignments can only be reset if the group 'g' is inactive, but the current state is
Stable."). Without ``--execute`` a reset is a dry run. An ``--execute`` over many partitions
commits them in batches under a progress bar (``rich``, on a terminal only).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pykraft.client_properties import load_client_properties
from pykraft.command_config import CommandConfigError
from pykraft.consumer_groups_plan import (
    GroupCommandError,
    LogOffsets,
    ResetPlan,
    Scenario,
    export_csv,
    parse_datetime_ms,
    parse_duration_ms,
    parse_reset_plan,
    parse_topic_arg,
    partitions_of,
    plan_reset,
)
from pykraft.consumer_groups_views import (
    DEAD,
    EMPTY,
    delete_groups_lines,
    delete_offsets_lines,
    group_info_lines,
    members_table,
    offset_rows,
    offsets_table,
    reset_table,
    state_message,
    state_table,
)
from pykraft.group_admin import (
    EARLIEST,
    LATEST,
    STATES_BY_NAME,
    TYPES_BY_NAME,
    GroupAdmin,
    GroupAdminError,
)
from pykraft.storage.clock import Clock
from pykraft.storage.system_clock import SystemClock
from pykraft.storage.topic_partition import TopicPartition

Out = Callable[[str], None]
ACTIONS = ("list", "describe", "delete", "reset-offsets", "delete-offsets")
SCENARIOS = {s.value: s for s in Scenario}
# An --execute commits at most this many partitions per OffsetCommit, the progress bar's step.
COMMIT_BATCH_PARTITIONS = 500
PROGRESS_MIN_PARTITIONS = 1000
DRY_RUN_WARNING = (
    "WARN: No action will be performed as the --execute option is missing. In a future major "
    "release, the default behavior of this command will be to prompt the user before executing "
    "the reset rather than doing a dry run. You should add the --dry-run option explicitly if you "
    "are scripting this command and want to keep the current default behavior without prompting."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "This tool helps to list all consumer groups, describe a consumer group, delete consumer "
        "group info, or reset consumer group offsets."
    )
    parser.add_argument("--bootstrap-server", metavar="server to connect to", help="REQUIRED")
    parser.add_argument("--command-config", type=Path, metavar="command config property file")
    for action in ACTIONS:
        parser.add_argument(f"--{action}", action="store_true")
    parser.add_argument("--group", action="append", default=[], metavar="consumer group")
    parser.add_argument("--all-groups", action="store_true")
    parser.add_argument("--topic", action="append", default=[], metavar="topic")
    parser.add_argument("--all-topics", action="store_true")
    parser.add_argument("--members", action="store_true")
    parser.add_argument("--offsets", action="store_true")
    parser.add_argument("--state", nargs="?", const="", default=None, metavar="state")
    parser.add_argument("--type", nargs="?", const="", default=None, metavar="type")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--timeout", type=int, default=5000, metavar="timeout (ms)")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--execute", action="store_true")
    parser.add_argument("--export", action="store_true")
    parser.add_argument("--to-offset", type=int)
    parser.add_argument("--to-earliest", action="store_true")
    parser.add_argument("--to-latest", action="store_true")
    parser.add_argument("--to-current", action="store_true")
    parser.add_argument("--shift-by", type=int, metavar="number-of-offsets")
    parser.add_argument("--to-datetime", metavar="datetime")
    parser.add_argument("--by-duration", metavar="duration")
    parser.add_argument("--from-file", type=Path, metavar="path to CSV file")


def chosen_scenario(args: argparse.Namespace) -> Scenario:
    chosen = [
        scenario
        for name, scenario in SCENARIOS.items()
        # "is": --to-offset 0 is given, though 0 == False.
        if getattr(args, name.replace("-", "_")) is not None
        and getattr(args, name.replace("-", "_")) is not False
    ]
    if len(chosen) != 1:
        raise GroupCommandError(
            "Option [reset-offsets] takes exactly one of these options: "
            + ", ".join(f"[{name}]" for name in SCENARIOS)
        )
    return chosen[0]


def check_args(args: argparse.Namespace) -> str:
    """The one action, as ``ConsumerGroupCommandOptions.checkArgs`` wants it."""
    if not args.bootstrap_server:
        raise GroupCommandError('Missing required argument "[bootstrap-server]"')
    chosen = [a for a in ACTIONS if getattr(args, a.replace("-", "_"))]
    if len(chosen) != 1:
        raise GroupCommandError(
            "Command must include exactly one action: " + ", ".join(f"--{a}" for a in ACTIONS)
        )
    action = chosen[0]
    groups_needed = action in ("describe", "delete", "reset-offsets")
    if groups_needed and not args.group and not args.all_groups:
        raise GroupCommandError(
            f"Option [{action}] takes one of these options: [all-groups], [group]"
        )
    if action == "delete-offsets" and (len(args.group) != 1 or not args.topic):
        raise GroupCommandError(
            "Option [delete-offsets] takes the following options: [topic], [group]"
        )
    if action == "reset-offsets":
        if args.dry_run and args.execute:
            raise GroupCommandError(
                "Option [reset-offsets] only accepts one of [execute], [dry-run]"
            )
        chosen_scenario(args)
        if not (args.topic or args.all_topics or args.from_file):
            raise GroupCommandError(
                "One of the reset scopes should be defined: --all-topics, --topic."
            )
    if args.state and action == "list":
        bad = [s for s in args.state.split(",") if s.strip().lower() not in STATES_BY_NAME]
        if bad:
            raise GroupCommandError(
                f"Invalid state list '{args.state}'. Valid states are: "
                "Unknown, PreparingRebalance, CompletingRebalance, Stable, Dead, Empty"
            )
    if args.type is not None and action != "list":
        # jopt-simple's answer to ``typeOpt.availableIf(listOpt)``.
        raise GroupCommandError(
            "Option(s) [type] are unavailable given other options on the command line"
        )
    if args.type:
        bad = [t for t in args.type.split(",") if t.strip().lower() not in TYPES_BY_NAME]
        if bad:
            # ConsumerGroupCommand.consumerGroupTypesFromString's message.
            raise GroupCommandError(
                f"Invalid types list '{args.type}'. Valid types are: Consumer, Classic"
            )
    return action


def run(args: argparse.Namespace, out: Out = print, err: Out | None = None) -> int:
    err = err or (lambda line: print(line, file=sys.stderr))
    try:
        action = check_args(args)
        properties = load_client_properties(args.command_config)
    except (GroupCommandError, CommandConfigError) as error:
        err(str(error))
        return 1
    try:
        admin = GroupAdmin(args.bootstrap_server, properties, args.timeout)
    except GroupAdminError as error:
        err(str(error))
        return 1
    try:
        return execute(action, args, admin, SystemClock(), out, err)
    except (GroupCommandError, GroupAdminError) as error:
        out("")
        out(f"Error: Executing consumer group command failed due to {error}")
        return 1
    finally:
        admin.close()


def execute(
    action: str, args: argparse.Namespace, admin: GroupAdmin, clock: Clock, out: Out, err: Out
) -> int:
    if action == "list":
        if args.state is None and args.type is None:
            for group, _ in admin.list_groups():
                out(group)
        else:
            states = [s.strip() for s in (args.state or "").split(",") if s.strip()]
            types = [t.strip() for t in (args.type or "").split(",") if t.strip()]
            listings = admin.list_group_listings(states, types)
            for line in group_info_lines(listings, args.type is not None, args.state is not None):
                out(line)
        return 0
    groups = args.group or [group for group, _ in admin.list_groups()]
    if action == "describe":
        describe(args, admin, groups, out, err)
    elif action == "delete":
        for line in delete_groups_lines(admin.delete_groups(groups)):
            out(line)
    elif action == "reset-offsets":
        reset_offsets(args, admin, groups, clock, out, err)
    else:
        delete_offsets(args, admin, out)
    return 0


def _emit(lines: Sequence[str], out: Out) -> None:
    for line in lines:
        out(line)


def describe(
    args: argparse.Namespace, admin: GroupAdmin, groups: Sequence[str], out: Out, err: Out
) -> None:
    descriptions = admin.describe_groups(groups)
    for group in sorted(descriptions):
        description = descriptions[group]
        if args.members and not args.offsets:
            lines = members_table(description, args.verbose)
            rows = len(description.members)
        elif args.state is not None and not args.offsets:
            lines, rows = state_table(description), 1
        else:
            with_epochs = admin.committed_with_epochs(group)
            committed = {p: offset for p, (offset, _) in with_epochs.items()}
            epochs = {p: e for p, (_, e) in with_epochs.items() if e is not None}
            partitions = {p for m in description.members for p in m.assignment} | set(committed)
            log_end = admin.list_offsets(partitions, LATEST)
            table_rows = offset_rows(description, committed, log_end, epochs)
            lines, rows = offsets_table(table_rows, args.verbose), len(table_rows)
        printed, show = state_message(group, description.state, rows)
        _emit(printed.out, out)
        _emit(printed.err, err)
        if show:
            _emit(lines, out)


def reset_offsets(
    args: argparse.Namespace,
    admin: GroupAdmin,
    groups: Sequence[str],
    clock: Clock,
    out: Out,
    err: Out,
) -> None:
    scenario = chosen_scenario(args)
    file_plans = parse_reset_plan(args.from_file.read_text(), args.group) if args.from_file else {}
    if not args.execute and not args.dry_run:
        err(DRY_RUN_WARNING)
    descriptions = admin.describe_groups(groups)
    plans: dict[str, dict[TopicPartition, int]] = {}
    for group in groups:
        state = descriptions[group].state
        if state not in (EMPTY, DEAD):
            out("")
            out(
                f"Error: Assignments can only be reset if the group '{group}' is inactive, "
                f"but the current state is {state}."
            )
            plans[group] = {}
            continue
        if scenario is Scenario.FROM_FILE and group not in file_plans:
            _emit(["", f"Error: No reset plan for group {group} found."], out)
            plans[group] = {}
            continue
        plan = plan_group(args, admin, scenario, group, file_plans, clock)
        for warning in plan.warnings:
            err(warning)
        if args.execute and plan.offsets:
            commit_in_batches(admin, group, plan.offsets)
        plans[group] = plan.offsets
    if args.export:
        out(export_csv(plans, single_group=len(args.group) == 1))
    else:
        _emit(reset_table(plans), out)


def partitions_to_reset(
    args: argparse.Namespace,
    admin: GroupAdmin,
    group: str,
    committed: dict[TopicPartition, int],
    file_plans: dict[str, dict[TopicPartition, int]],
) -> list[TopicPartition]:
    """Kafka's ``getPartitionsToReset``, then ``checkAllTopicPartitionsValid``."""
    if args.all_topics:
        partitions = sorted(committed)
    elif args.topic:
        whole = {t for t, parts in map(parse_topic_arg, args.topic) if parts is None}
        partitions = partitions_of(args.topic, admin.partition_counts(whole))
    else:
        partitions = sorted(file_plans.get(group, {}))
    counts = admin.partition_counts({p.topic for p in partitions})
    missing = [p for p in partitions if p.partition >= counts.get(p.topic, 0) or p.partition < 0]
    if missing:
        named = ",".join(str(p) for p in missing)
        raise GroupCommandError(f'The partitions "{named}" do not exist')
    return partitions


def plan_group(
    args: argparse.Namespace,
    admin: GroupAdmin,
    scenario: Scenario,
    group: str,
    file_plans: dict[str, dict[TopicPartition, int]],
    clock: Clock,
) -> ResetPlan:
    committed = admin.committed_offsets(group)
    partitions = partitions_to_reset(args, admin, group, committed, file_plans)
    wanted = list(file_plans.get(group, {})) if scenario is Scenario.FROM_FILE else partitions
    offsets = LogOffsets(
        log_start=admin.list_offsets(wanted, EARLIEST),
        log_end=admin.list_offsets(wanted, LATEST),
        for_timestamp=_timestamp_offsets(args, admin, scenario, wanted, clock),
    )
    value = args.to_offset if scenario is Scenario.TO_OFFSET else (args.shift_by or 0)
    return plan_reset(scenario, partitions, committed, offsets, value, file_plans.get(group))


def _timestamp_offsets(
    args: argparse.Namespace,
    admin: GroupAdmin,
    scenario: Scenario,
    partitions: list[TopicPartition],
    clock: Clock,
) -> dict[TopicPartition, int]:
    if scenario is Scenario.TO_DATETIME:
        timestamp = parse_datetime_ms(args.to_datetime)
    elif scenario is Scenario.BY_DURATION:
        timestamp = clock.wall_clock_ms() - parse_duration_ms(args.by_duration)
    else:
        return {}
    return admin.list_offsets(partitions, timestamp)


def commit_in_batches(admin: GroupAdmin, group: str, offsets: dict[TopicPartition, int]) -> None:
    """AlterConsumerGroupOffsets in batches; a progress bar on a terminal for big resets."""
    # Imported here: every pykraft process builds this parser, few ever reset offsets.
    from rich.console import Console
    from rich.progress import Progress

    items = sorted(offsets.items())
    console = Console(stderr=True)
    disable = len(items) < PROGRESS_MIN_PARTITIONS or not console.is_terminal
    with Progress(console=console, disable=disable, transient=True) as progress:
        task = progress.add_task(f"Resetting {group}", total=len(items))
        for start in range(0, len(items), COMMIT_BATCH_PARTITIONS):
            batch = dict(items[start : start + COMMIT_BATCH_PARTITIONS])
            admin.alter_offsets(group, batch)
            progress.advance(task, len(batch))


def delete_offsets(args: argparse.Namespace, admin: GroupAdmin, out: Out) -> None:
    group = args.group[0]
    whole = {t for t, parts in map(parse_topic_arg, args.topic) if parts is None}
    try:
        counts = admin.partition_counts(whole)
    except GroupAdminError as error:
        raise GroupCommandError(str(error)) from None
    partitions = partitions_of(args.topic, counts)
    top_level, results = admin.delete_offsets(group, partitions)
    _emit(delete_offsets_lines(group, top_level, results), out)
