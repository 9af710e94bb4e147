"""What the Kafka-protocol admin tools' ``run`` share (``pykraft metadata-quorum``,
``pykraft transactions``): check the arguments, read ``--command-config`` and
``--bootstrap-server``, then run the tool's body with one ``KafkaAdminClient``. A bad argument
prints its one line on stderr and exits 1 before anything connects, as Kafka's tools do
(``CommandLineUtils.printUsageAndExit``, ``TransactionsCommand.printErrorAndExit``).

The tool stays the composition root: it builds the clock and passes it in.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pykraft.admin_client import KafkaAdminClient
from pykraft.admin_config import load_admin_config
from pykraft.admin_errors import BootstrapError, parse_bootstrap_servers
from pykraft.command_config import CommandConfigError
from pykraft.storage.clock import Clock

_Checked = TypeVar("_Checked")


def run_admin_tool(
    args: argparse.Namespace,
    check_args: Callable[[argparse.Namespace], _Checked],
    usage_errors: tuple[type[Exception], ...],
    clock: Clock,
    body: Callable[[KafkaAdminClient, _Checked], Awaitable[int]],
) -> int:
    """The exit status: 1 when ``check_args`` raises one of ``usage_errors`` or the command
    config or bootstrap servers are bad, else what ``body`` returns given the client and what
    ``check_args`` returned."""
    refused: tuple[type[Exception], ...] = (*usage_errors, CommandConfigError, BootstrapError)
    try:
        checked = check_args(args)
        config = load_admin_config(args.command_config)
        servers = parse_bootstrap_servers(args.bootstrap_server)
    except refused as error:
        print(error, file=sys.stderr)
        return 1

    async def main() -> int:
        async with KafkaAdminClient(servers, config, clock) as admin:
            return await body(admin, checked)

    return asyncio.run(main())
