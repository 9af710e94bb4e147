"""The examples in examples/produce_consume_*.py run against a real cluster as a newcomer would
run them against ``make run``: they create their topic, produce, and read everything back."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.clients.conftest import ROOT, DevCluster
from tests.clients.support import unique_topic

pytestmark = pytest.mark.clients

EXAMPLES = ["confluent", "kafka_python", "aiokafka"]


@pytest.mark.parametrize("client", EXAMPLES)
def test_example_produces_and_reads_everything_back(cluster: DevCluster, client: str) -> None:
    topic = unique_topic(f"example-{client.replace('_', '-')}")
    command = [
        sys.executable,
        str(ROOT / "examples" / f"produce_consume_{client}.py"),
        "--bootstrap-servers",
        cluster.bootstrap_servers,
        "--topic",
        topic,
    ]
    for run, expected in ((1, f"created topic {topic}"), (2, f"topic {topic} already exists")):
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=150)
        assert done.returncode == 0, f"run {run}:\n{done.stdout}\n{done.stderr[-3000:]}"
        assert expected in done.stdout
        # The second run reads only its own messages: from the offsets it wrote at.
        assert "read 6 of 6 messages back" in done.stdout, done.stdout
