"""``pykraft dev-wait DIR``: block until the ``pykraft dev`` cluster in DIR is ready, for scripts.

    pykraft dev --data-dir data/dev &
    BOOTSTRAP=$(pykraft dev-wait data/dev) || exit 1
    kcat -b "$BOOTSTRAP" -L

It watches ``DIR/cluster.json`` (``pykraft/dev_cluster_file.py``): ``pykraft dev`` makes the
bootstrap servers a top-level key, with ``"state": "running"``, only once the cluster is ready
(``pykraft/dev_ready.py``). On ready it prints the bootstrap servers, alone on one line, and
exits 0. Exit 1: the cluster stopped (its ``pykraft dev`` exited) while being waited for;
exit 3: ``--timeout`` passed; exit 2: usage. A file left by an earlier run (its ``dev_pid`` gone)
is waited past, as a new ``pykraft dev`` is about to replace it.

Why a command of its own rather than ``pykraft dev --wait``: ``pykraft dev`` is the foreground
supervisor of its processes (Ctrl-C stops them in order), so the script that starts it in the
background needs a second command to block on; this one works for a cluster started in any way
(another terminal, ``&``, a CI service step) and never starts or stops one itself.
"""

from __future__ import annotations

import argparse
import enum
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pykraft.dev_cluster_file import RUNNING, STOPPED, process_alive, read_cluster_json

POLL_INTERVAL_S = 0.1
EXIT_READY, EXIT_STOPPED, EXIT_USAGE, EXIT_TIMED_OUT = 0, 1, 2, 3


class Verdict(enum.Enum):
    READY = "ready"
    WAIT = "wait"
    STOPPED = "stopped"


def verdict(info: Mapping[str, Any], dev_alive: bool, watched_pids: set[int]) -> Verdict:
    """What one look at ``cluster.json`` says. ``watched_pids``: the ``dev_pid``s seen alive
    while waiting; only their stop is a failure (an older run's ``stopped`` file is not)."""
    dev_pid = info.get("dev_pid")
    state = info.get("state")
    if state == STOPPED and dev_pid in watched_pids:
        return Verdict.STOPPED
    if not dev_alive:
        return Verdict.WAIT  # no file yet, or an earlier run's
    if state == RUNNING and "bootstrap_servers" in info:
        return Verdict.READY
    return Verdict.WAIT


def wait_ready(data_dir: Path, timeout_s: float) -> tuple[int, Mapping[str, Any]]:
    """Poll ``data_dir``'s ``cluster.json`` until a verdict; the exit code and the last file."""
    deadline = time.monotonic() + timeout_s
    watched: set[int] = set()
    while True:
        info = read_cluster_json(data_dir)
        dev_pid = info.get("dev_pid")
        alive = isinstance(dev_pid, int) and process_alive(dev_pid)
        if alive:
            assert isinstance(dev_pid, int)
            watched.add(dev_pid)
        result = verdict(info, alive, watched)
        if result is Verdict.READY:
            return EXIT_READY, info
        if result is Verdict.STOPPED:
            return EXIT_STOPPED, info
        if time.monotonic() >= deadline:
            return EXIT_TIMED_OUT, info
        time.sleep(POLL_INTERVAL_S)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("data_dir", type=Path, metavar="DIR", help="pykraft dev's --data-dir")
    parser.add_argument(
        "--timeout", type=float, default=120.0, metavar="SECONDS", help="give up after (120)"
    )


def run(args: argparse.Namespace) -> int:
    if args.timeout < 0:
        print("pykraft dev-wait: --timeout must be 0 or more", file=sys.stderr)
        return EXIT_USAGE
    code, info = wait_ready(args.data_dir, args.timeout)
    if code == EXIT_READY:
        print(info["bootstrap_servers"], flush=True)
    elif code == EXIT_STOPPED:
        print(
            f"pykraft dev-wait: the cluster in {args.data_dir} stopped before it was ready; "
            f"see {args.data_dir / 'logs'}",
            file=sys.stderr,
        )
    else:
        state = info.get("state", "no cluster.json")
        print(
            f"pykraft dev-wait: not ready after {args.timeout:g}s (state: {state})",
            file=sys.stderr,
        )
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="pykraft dev-wait", description="wait until a pykraft dev cluster is ready"
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
