"""``pykraft get-offsets``: kafka-get-offsets.sh (Kafka 3.9's ``GetOffsetShell``).

    pykraft get-offsets --bootstrap-server HOST:PORT [--command-config FILE] \\
        [--topic REGEX [--partitions 0,1] | --topic-partitions t:0,u:1-3,:5-] \\
        [--time -1|latest|-2|earliest|-3|max-timestamp|-4|earliest-local|-5|latest-tiered|MS] \\
        [--exclude-internal-topics]

Prints ``topic:partition:offset`` per partition, in Kafka's order (``get_offsets_filter``), through
confluent-kafka's ListOffsets. A partition the broker refuses is reported on stderr as Kafka does
("Skip getting offsets for topic-partition t-0 due to error: ...") and left out; a bad option is
"Error occurred: ..." on stderr with exit status 1.

pykraft keeps no tiered storage (KIP-405), so, as Kafka's broker answers then, ``earliest-local``
is the log start offset and ``latest-tiered`` has no offset (no line); librdkafka cannot send
either spec, so the tool asks for ``earliest`` or nothing instead.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from pykraft.client_properties import load_client_properties
from pykraft.command_config import CommandConfigError
from pykraft.get_offsets_filter import (
    EARLIEST,
    EARLIEST_LOCAL,
    LATEST_TIERED,
    GetOffsetsError,
    matching_partitions,
    output_lines,
    parse_time,
    rules_of_topic_and_partitions,
    rules_of_topic_partitions,
)
from pykraft.group_admin import GroupAdmin, GroupAdminError
from pykraft.storage.topic_partition import TopicPartition

Out = Callable[[str], None]
TIMEOUT_MS = 30_000  # Kafka's AdminClient default.api.timeout.ms is 60 s; one call here
CLIENT_ID = "GetOffsetShell"  # the client.id Kafka's tool sets
UNKNOWN_OFFSET = -1  # Kafka's ListOffsetsResponse.UNKNOWN_OFFSET


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "An interactive shell for getting topic-partition offsets."
    parser.add_argument("--bootstrap-server", metavar="HOST1:PORT1,...,HOST3:PORT3")
    parser.add_argument("--command-config", type=Path, metavar="config file")
    parser.add_argument("--topic", metavar="topic")
    parser.add_argument("--partitions", metavar="partition ids")
    parser.add_argument("--topic-partitions", metavar="topic1:1,topic2:0-3,topic3,topic4:5-")
    parser.add_argument("--time", default="latest", metavar="<timestamp> / -1 or latest / ...")
    parser.add_argument("--exclude-internal-topics", action="store_true")


def offsets_at(
    admin: GroupAdmin, partitions: list[TopicPartition], timestamp: int
) -> dict[TopicPartition, int | str]:
    if timestamp == LATEST_TIERED:
        return dict.fromkeys(partitions, UNKNOWN_OFFSET)
    if timestamp == EARLIEST_LOCAL:
        timestamp = EARLIEST
    return admin.list_offsets_or_errors(partitions, timestamp)


def run(args: argparse.Namespace, out: Out = print, err: Out | None = None) -> int:
    err = err or (lambda line: print(line, file=sys.stderr))
    try:
        if not args.bootstrap_server:
            raise GetOffsetsError('Missing required argument "[bootstrap-server]"')
        if args.topic_partitions and (args.topic is not None or args.partitions is not None):
            raise GetOffsetsError("--topic-partitions cannot be used with --topic or --partitions")
        timestamp = parse_time(args.time)
        rules = (
            rules_of_topic_partitions(args.topic_partitions)
            if args.topic_partitions
            else rules_of_topic_and_partitions(args.topic, args.partitions)
        )
        properties = {"client.id": CLIENT_ID, **load_client_properties(args.command_config)}
        admin = GroupAdmin(args.bootstrap_server, properties, TIMEOUT_MS)
        try:
            partitions = matching_partitions(
                admin.topic_partitions(), rules, args.exclude_internal_topics
            )
            answers = offsets_at(admin, partitions, timestamp)
        finally:
            admin.close()
    except (GetOffsetsError, CommandConfigError, GroupAdminError) as error:
        err(f"Error occurred: {error}")
        return 1
    offsets = {}
    for partition, answer in sorted(answers.items(), key=lambda item: str(item[0])):
        if isinstance(answer, str):
            err(f"Skip getting offsets for topic-partition {partition} due to error: {answer}")
        else:
            offsets[partition] = answer
    for line in output_lines(offsets):
        out(line)
    return 0
