"""``pykraft metadata-shell``: kafka-metadata-shell.sh over a snapshot file or a live cluster.

    pykraft metadata-shell --snapshot metadata/00000000000000000100-0000000002.checkpoint
    pykraft metadata-shell --snapshot FILE ls /image/topics/byName
    pykraft metadata-shell --bootstrap-controller 127.0.0.1:19093 cat /image/topics/byName/pets/0

As Kafka's ``MetadataShell``: ``--snapshot`` loads a snapshot file; words after the options are
one command, run without a prompt (Kafka's non-interactive mode), else an interactive shell
reads commands until ``exit`` or end of input. ``--bootstrap-controller`` (ours: Kafka's shell
reads only files) reads the live image the way a broker does: the records feed
``GET /v1/metadata/records`` from offset 0, through a snapshot when the log starts later
(``broker/metadata_loader.py``), until caught up with the log end the controller reported. That
route is the brokers' (Kafka's Fetch of the metadata log): on a secure cluster the
``--command-config`` principal needs CLUSTER_ACTION on the cluster.

The tree is ``metadata/image_node.py``; the commands ``metadata_shell_commands.py``; this module
only loads the image and reads and prints lines.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.metadata_loader import MetadataLoader, MetadataLoadError
from pykraft.command_config import CommandConfigError, load_command_config
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.image_node import Directory, image_node
from pykraft.metadata.snapshot import SnapshotError, read_snapshot, snapshot_to_image
from pykraft.metadata_shell_commands import ShellState, root_node, run_command

Out = Callable[[str], None]
# How long a live load may take before the tool gives up (bounded, STYLE.md §7).
LOAD_DEADLINE_S = 30.0
PROMPT = ">> "


class ShellError(Exception):
    """Bad arguments or an image that cannot be loaded."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--snapshot", "-s", type=Path, metavar="FILE", help="a snapshot file")
    parser.add_argument(
        "--bootstrap-controller",
        metavar="HOST:PORT",
        help="read the live image from the controllers' HTTP listeners instead",
    )
    parser.add_argument(
        "--command-config", type=Path, metavar="FILE", help="client properties (TLS, SASL)"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="one command to run, then exit")


def run(args: argparse.Namespace, out: Out = print) -> int:
    try:
        state = ShellState(root_node(load_image_node(args)))
    except (ShellError, CommandConfigError) as error:
        print(error, file=sys.stderr)
        return 1
    if args.command:
        for line in run_command(state, " ".join(args.command)):
            out(line)
        return 0
    return _interactive(state, out)


def load_image_node(args: argparse.Namespace) -> Directory:
    if (args.snapshot is None) == (args.bootstrap_controller is None):
        raise ShellError("Exactly one of --snapshot and --bootstrap-controller must be specified")
    if args.snapshot is not None:
        try:
            header, records = read_snapshot(args.snapshot)
            image = snapshot_to_image(header, records, str(args.snapshot))
        except SnapshotError as error:
            raise ShellError(f"Unable to load snapshot {args.snapshot}: {error}") from None
        return image_node(image, iso_zoned_utc(header.created_ms))
    urls = [url for url in args.bootstrap_controller.split(",") if url.strip()]
    try:
        image = asyncio.run(load_live_image(urls, args.command_config))
    except (ControllerError, MetadataLoadError) as error:
        raise ShellError(f"Unable to load the metadata image: {error}") from None
    return image_node(image)


async def load_live_image(urls: list[str], command_config: Path | None) -> MetadataImage:
    """Replay the metadata log from its start until caught up (a broker's first load)."""
    connection = load_command_config(command_config)
    async with connection.client(urls, LOAD_DEADLINE_S) as client:
        loader = MetadataLoader(client)
        try:
            async with asyncio.timeout(LOAD_DEADLINE_S):
                while not loader.caught_up:
                    await loader.poll_once(max_wait_ms=0)
        except TimeoutError:
            raise ShellError(
                f"the metadata log was not read within {LOAD_DEADLINE_S:.0f} s"
            ) from None
        return loader.image


def iso_zoned_utc(epoch_ms: int) -> str:
    """Java's ``DateTimeFormatter.ISO_ZONED_DATE_TIME`` in UTC, as Kafka's ProvenanceNode
    prints: seconds and the fraction only when not zero (``2024-05-01T12:00Z[UTC]``)."""
    moment = datetime.datetime.fromtimestamp(epoch_ms / 1000, tz=datetime.UTC)
    text = moment.strftime("%Y-%m-%dT%H:%M")
    millis = epoch_ms % 1000
    if moment.second or millis:
        text += f":{moment.second:02d}"
    if millis:
        text += "." + f"{millis:03d}".rstrip("0")
    return text + "Z[UTC]"


def _interactive(state: ShellState, out: Out) -> int:
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (line editing and arrow-key history for input())
    out("[ Kafka Metadata Shell ]")
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    while not state.exited:
        try:
            line = input(PROMPT)
        except EOFError:
            break
        except KeyboardInterrupt:
            out("")
            continue
        for output in run_command(state, line, width):
            out(output)
    return 0
