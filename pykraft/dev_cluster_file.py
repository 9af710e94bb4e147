"""``cluster.json``: what ``pykraft dev`` writes about its cluster, and how others read it.

The file is replaced atomically on every change of state. Its ``"state"`` is ``"starting"``,
``"running"`` or ``"stopped"``. The addresses a client connects to — ``bootstrap_servers``,
``admin_url``, ``admin_urls`` — are top-level keys only while the state is ``"running"``, that
is once the cluster is ready (``pykraft/dev_ready.py``); in every other state they sit under
``"not_ready"``, so a script that takes the first ``bootstrap_servers`` it sees never gets a
cluster whose brokers are still registering. Each process's entry (pid, config, log, its own
port) is there from the start, for tools that stop or inspect processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CLUSTER_FILE = "cluster.json"
NOT_READY_KEY = "not_ready"
ADDRESS_KEYS = ("bootstrap_servers", "admin_url", "admin_urls")
STARTING, RUNNING, STOPPED = "starting", "running", "stopped"


def place_addresses(
    body: Mapping[str, Any], addresses: Mapping[str, Any], state: str
) -> dict[str, Any]:
    """``body`` with ``addresses`` top-level when ``state`` is running, else under not_ready."""
    assert state in (STARTING, RUNNING, STOPPED), state
    assert set(addresses) == set(ADDRESS_KEYS), sorted(addresses)
    placed = {"state": state, **body}
    if state == RUNNING:
        placed.update(addresses)
    else:
        placed[NOT_READY_KEY] = dict(addresses)
    return placed


def write_cluster_json(data_dir: Path, body: Mapping[str, Any]) -> Path:
    """Write ``cluster.json`` whole: a reader sees the old file or the new one, never a part."""
    path = data_dir / CLUSTER_FILE
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    partial.replace(path)
    return path


def read_cluster_json(data_dir: Path) -> dict[str, Any]:
    """``cluster.json`` as ``pykraft dev`` last wrote it in ``data_dir`` ({} before it exists)."""
    try:
        info: dict[str, Any] = json.loads((data_dir / CLUSTER_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def stop_dev_process(process: subprocess.Popen[Any], data_dir: Path, timeout_s: float) -> None:
    """Stop a ``pykraft dev`` run started as a subprocess, and every node it started.

    SIGTERM first (brokers stop under control, then controllers); SIGKILL after ``timeout_s``.
    Its nodes run in sessions of their own, so a killed ``pykraft dev`` leaves them behind:
    every node in ``cluster.json`` still running its own config file is killed too.
    """
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    info = read_cluster_json(data_dir)
    for node in info.get("controllers", []) + info.get("brokers", []):
        if node.get("pid") and runs_config(node["pid"], node["config"]):
            os.kill(node["pid"], signal.SIGKILL)


def runs_config(pid: int, config: str) -> bool:
    """Whether ``pid`` is still the node started with ``config`` (not a reused pid)."""
    try:
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return config.encode() in command_line.split(b"\0")


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (``cluster.json``'s ``dev_pid``)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
