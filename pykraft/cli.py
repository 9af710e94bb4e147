"""The ``pykraft`` command: one subcommand per module.

Each subcommand module defines ``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# name -> (module, one-line help). Modules are imported by name when the parser
# is built, so a subcommand is one line here plus its own module.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("pykraft.demo", "append, crash, recover and read a partition log"),
    "dump-log": ("pykraft.dump_log", "print the batches of segment files, like kafka-dump-log"),
    "controller": ("pykraft.controller_cmd", "run one controller of the metadata quorum"),
    "broker": ("pykraft.broker_cmd", "run one broker"),
    "dev": ("pykraft.dev", "run a local cluster of controller and broker processes"),
    "dev-wait": ("pykraft.dev_wait", "wait until a pykraft dev cluster is ready (for scripts)"),
    "spark": ("pykraft.spark_cmd", "Spark jobs over snapshots and segment files"),
    "topics": ("pykraft.topics_cmd", "create, list, describe, alter and delete topics"),
    "acls": ("pykraft.acls_cmd", "add, list and remove ACLs, like kafka-acls"),
    "user-scram": (
        "pykraft.user_scram_cmd",
        "alter and describe SCRAM users, like kafka-configs --entity-type users",
    ),
    "transactions": (
        "pykraft.transactions_cmd",
        "find and abort hanging transactions, like kafka-transactions",
    ),
    "metadata-quorum": (
        "pykraft.metadata_quorum_cmd",
        "describe the controller quorum, add and remove controllers, like kafka-metadata-quorum",
    ),
    "reassign-partitions": (
        "pykraft.reassign_cmd",
        "move partition replicas between brokers, like kafka-reassign-partitions",
    ),
    "consumer-groups": (
        "pykraft.consumer_groups_cmd",
        "list, describe, reset offsets of and delete consumer groups, like kafka-consumer-groups",
    ),
    "get-offsets": (
        "pykraft.get_offsets_cmd",
        "print the offsets of topic partitions at a time, like kafka-get-offsets",
    ),
    "metadata-shell": (
        "pykraft.metadata_shell_cmd",
        "browse the metadata image as a tree (ls, cat, cd, find), like kafka-metadata-shell",
    ),
    "configs": (
        "pykraft.configs_cmd",
        "describe and alter topic, broker, logger and user configs, like kafka-configs",
    ),
    "console-producer": (
        "pykraft.console_producer_cmd",
        "produce lines of standard input as records, like kafka-console-producer",
    ),
    "console-consumer": (
        "pykraft.console_consumer_cmd",
        "print records of topics to standard output, like kafka-console-consumer",
    ),
    "producer-perf-test": (
        "pykraft.producer_perf_cmd",
        "measure producer throughput and latency, like kafka-producer-perf-test",
    ),
    "consumer-perf-test": (
        "pykraft.consumer_perf_cmd",
        "measure consumer throughput, like kafka-consumer-perf-test",
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pykraft", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        sub = commands.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(sub)
        sub.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args._module.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
