"""``pykraft broker --config FILE``: run one broker.

The file is a Kafka ``.properties`` file (every property and default: ``broker/config.py``).
Example for broker 10 of a cluster whose controllers serve HTTP on 19093-19095::

    node.id=10
    process.roles=broker
    listeners=PLAINTEXT://127.0.0.1:9092
    log.dirs=/var/lib/pykraft/broker-10
    controller.quorum.bootstrap.servers=127.0.0.1:19093,127.0.0.1:19094,127.0.0.1:19095
    http.listener=127.0.0.1:8092
    num.partitions=1
    default.replication.factor=1

``controller.quorum.bootstrap.servers`` lists the controllers' HTTP listeners (or set
``controller.quorum.http.voters`` as the controllers do). ``cluster.id`` (optional) must match the
``meta.properties`` already in ``log.dirs``; without either a new id is written there.

The broker loads its logs, registers with the quorum, reads the metadata log, and serves Kafka
clients once the controller unfences it. SIGTERM (or Ctrl-C) runs a controlled shutdown: the
controller moves leadership away before the process exits. The broker's state is served at
``http://<http.listener>/v1/broker`` and ``/healthz``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import uuid
from pathlib import Path

from broker.config import BrokerConfig, BrokerConfigError
from broker.server import BrokerServer, BrokerStartupError, ensure_meta_properties, run_broker
from metadata.records import uuid_to_kafka_string
from pykraft.properties import ConfigError, Properties


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, type=Path,
                        help="the broker's .properties file")
    parser.add_argument("--log-level", default="INFO",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"])


def new_cluster_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()`` form (what ``kafka-storage random-uuid`` prints)."""
    return uuid_to_kafka_string(uuid.uuid4().bytes)


def load_broker_config(props: Properties) -> BrokerConfig:
    roles = props.get_list("process.roles", "broker")
    if roles != ["broker"]:
        raise ConfigError(f"{props.source}: process.roles={','.join(roles)}: a pykraft broker "
                          "process has the role broker only (controllers run as "
                          "`pykraft controller`)")
    try:
        return BrokerConfig.from_properties(props.values)
    except BrokerConfigError as error:
        raise ConfigError(f"{props.source}: {error}") from None


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        props = Properties.load(args.config)
        config = load_broker_config(props)
        cluster_id = ensure_meta_properties(config.log_dirs, config.node_id,
                                            props.values.get("cluster.id"), new_cluster_id)
    except (ConfigError, BrokerStartupError) as error:
        print(f"pykraft broker: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"pykraft broker: cannot prepare log.dirs: {error}", file=sys.stderr)
        return 2

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        return await run_broker(BrokerServer(config, cluster_id=cluster_id), stop)

    return asyncio.run(main())


def main(argv: list[str] | None = None) -> int:
    """``python -m pykraft.broker_cmd --config FILE`` (what ``pykraft broker`` runs)."""
    parser = argparse.ArgumentParser(prog="pykraft broker", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
