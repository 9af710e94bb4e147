"""Produce throughput over SASL_SSL next to PLAINTEXT, in one run on one broker: the TLS cost.

    .venv/bin/python -m bench.secure_produce             # 128 MB per measurement
    .venv/bin/python -m bench.secure_produce --quick     # 16 MB: a smoke run

One ``pykraft dev --secure`` layout (1 controller, 1 broker; ``pykraft/dev_secure.py``) with one
more listener on the broker, PLAINTEXT, so both paths reach the same process, log and disk.
The SASL_SSL producer signs in once as the admin with SCRAM-SHA-512 (the login is per
connection, so what differs afterwards is TLS: record bytes encrypted by librdkafka's OpenSSL,
decrypted by the broker's ``ssl`` module). PLAINTEXT clients are ``User:ANONYMOUS``, made a super
user here so the authorizer lets them write; both producers send to topics of their own.

confluent-kafka produces 1 KiB records into 4 partitions (``batch.size`` 64 KiB, ``linger.ms``
5, ``acks=all``, no compression; ``bench/produce_fetch.py``'s producer) until every delivery
report is in. Each figure is the best of ``--repeats`` runs (3), PLAINTEXT and SASL_SSL
alternating so that a noisy neighbour hurts both. MB means 10^6 bytes of record values.
Prints a table, then one JSON line; ``tls_cost_ratio = produce_mb_s_sasl_ssl /
produce_mb_s_plaintext`` (1.0: TLS is free; 0.5: it halves throughput). Never run by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Self

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bench.common import RunningCluster, print_table
from bench.produce_fetch import MB, RECORD_BYTES, produce
from pykraft import dev_secure
from pykraft.dev import plan_layout, secured
from pykraft.free_ports import pick_free_ports
from pykraft.properties import Properties

PARTITIONS = 4
TOPIC_READY_TIMEOUT_S = 30.0


class SecureCluster(RunningCluster):
    """``pykraft dev --secure`` with 1 controller and 1 broker, plus a PLAINTEXT listener."""

    def __init__(self, root: Path) -> None:
        raft, admin, sasl_ssl, http, internal, plaintext = pick_free_ports(6)
        layout = secured(plan_layout(1, 1, 0, [raft, admin, sasl_ssl, http]), [internal])
        super().__init__(layout, root / "cluster")
        self.plaintext = f"127.0.0.1:{plaintext}"
        broker = layout.brokers[0]
        self.dev.overrides = {
            "broker": {
                "listeners": f"{dev_secure.INTER_BROKER_LISTENER}://127.0.0.1:{internal},"
                f"{dev_secure.CLIENT_LISTENER}://127.0.0.1:{sasl_ssl},"
                f"PLAINTEXT://{self.plaintext}",
                "listener.security.protocol.map": f"{dev_secure.INTER_BROKER_LISTENER}:SSL,"
                f"{dev_secure.CLIENT_LISTENER}:SASL_SSL,CONTROLLER:SSL,PLAINTEXT:PLAINTEXT",
                "super.users": dev_secure.super_users((broker.node_id,)) + ";User:ANONYMOUS",
            }
        }

    def __enter__(self) -> Self:
        super().__enter__()
        try:  # what pykraft dev --secure does once the brokers run: the admin's credentials
            assert self.dev.material is not None
            urls = [c.http_url for c in self.dev.layout.controllers]
            asyncio.run(dev_secure.write_admin_credentials(self.dev.material, urls, 30.0))
        except BaseException:
            self.dev.stop()
            raise
        return self

    def sasl_ssl_config(self) -> dict[str, str]:
        """The printed librdkafka file: bootstrap server, SASL_SSL, SCRAM-SHA-512, the CA."""
        path = self.dev.client_files["librdkafka_properties"]
        return dict(Properties.load(path).values)

    def create_topic(self, config: dict[str, str]) -> str:
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        admin = AdminClient(dict[str, str | int | float | bool](config))
        futures = admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=30)
        futures[topic].result(timeout=30)
        deadline = time.monotonic() + TOPIC_READY_TIMEOUT_S
        while True:  # every partition has a leader in the broker's metadata
            described = admin.list_topics(topic, timeout=10).topics[topic]
            if described.error is None and all(
                p.leader >= 0 for p in described.partitions.values()
            ):
                return topic
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {topic} has no leaders after 30 s: {described}")
            time.sleep(0.1)


def produce_over(config: dict[str, str], cluster: SecureCluster, records: int) -> float:
    """A fresh topic, then ``records`` records through the listener ``config`` names."""
    topic = cluster.create_topic(config)
    servers = config.pop("bootstrap.servers")
    return produce(servers, topic, PARTITIONS, records, security=config)


def measure(records: int, repeats: int, root: Path) -> dict[str, float]:
    best = {"plaintext": float("inf"), "sasl_ssl": float("inf")}
    with SecureCluster(root) as cluster:
        configs = {
            "plaintext": lambda: {"bootstrap.servers": cluster.plaintext},
            "sasl_ssl": cluster.sasl_ssl_config,
        }
        for _ in range(repeats):
            for name, config in configs.items():
                best[name] = min(best[name], produce_over(config(), cluster, records))
    payload_mb = records * RECORD_BYTES / MB
    plaintext, sasl_ssl = payload_mb / best["plaintext"], payload_mb / best["sasl_ssl"]
    return {
        "produce_mb_s_plaintext": round(plaintext, 1),
        "produce_mb_s_sasl_ssl": round(sasl_ssl, 1),
        "tls_cost_ratio": round(sasl_ssl / plaintext, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=128, help="record bytes per run (MB)")
    parser.add_argument("--quick", action="store_true", help="16 MB per run")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    megabytes = 16 if args.quick else args.megabytes
    records = megabytes * MB // RECORD_BYTES
    with tempfile.TemporaryDirectory(prefix="pykraft-bench-secure-") as root:
        figures: dict[str, float | int] = {
            "megabytes": megabytes,
            "repeats": args.repeats,
            **measure(records, args.repeats, Path(root)),
        }
    print_table(figures)
    print(json.dumps({"bench": "secure_produce", **figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
