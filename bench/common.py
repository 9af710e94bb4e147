"""What the benchmarks that start a ``pykraft dev`` cluster share.

A benchmark's numbers mean nothing if a half-started cluster keeps running after it: every
cluster here is started inside ``with`` and stopped on the way out, also when startup fails.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Self

from pykraft.dev import ClusterLayout, DevCluster

STARTUP_TIMEOUT_S = 90.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU time of the processes so far (``/proc/PID/stat`` fields 14 and 15)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


class RunningCluster:
    """``pykraft dev``'s own API: the nodes of ``layout``, started on enter, always stopped."""

    def __init__(self, layout: ClusterLayout, data_dir: Path) -> None:
        self.dev = DevCluster(layout, data_dir)
        self.bootstrap_servers = layout.bootstrap_servers

    def __enter__(self) -> Self:
        try:
            self.dev.prepare()
            for node in (*self.dev.layout.controllers, *self.dev.layout.brokers):
                self.dev.start(node)
            self.dev.wait_until_ready(STARTUP_TIMEOUT_S, threading.Event())
        except BaseException:
            self.dev.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.dev.stop()


def print_table(figures: Mapping[str, Any]) -> None:
    width = max(len(name) for name in figures)
    for name, value in figures.items():
        print(f"{name.ljust(width)}  {value}")


def print_figures(figures: Mapping[str, Any]) -> None:
    """A benchmark's end: its figures as a table, then as the one JSON line."""
    print_table(figures)
    print(json.dumps(figures))
