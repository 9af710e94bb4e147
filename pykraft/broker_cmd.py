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
import os
import signal
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

from pykraft.broker.config import BrokerConfig, BrokerConfigError
from pykraft.broker.server import BrokerServer
from pykraft.broker.server_run import run_broker, set_collector_policy
from pykraft.event_loop import EventLoopChoiceError, loop_factory
from pykraft.metadata.records import uuid_to_kafka_string
from pykraft.open_files import raise_open_files_limit
from pykraft.properties import ConfigError, Properties
from pykraft.storage.system_clock import SystemClock

logger = logging.getLogger(__name__)
META_PROPERTIES = "meta.properties"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, type=Path, help="the broker's .properties file")
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )


def new_cluster_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()`` form (what ``kafka-storage random-uuid`` prints)."""
    return uuid_to_kafka_string(uuid.uuid4().bytes)


def ensure_meta_properties(
    log_dirs: tuple[Path, ...],
    node_id: int,
    cluster_id: str | None,
    new_cluster_id: Callable[[], str] = new_cluster_id,
) -> str:
    """The cluster id this broker's log dirs belong to (Kafka's ``meta.properties``).

    Every log dir that has a ``meta.properties`` must agree on cluster.id and name this
    node.id (Kafka refuses to start otherwise); dirs without one get it written. The id comes
    from the existing files, else ``cluster_id`` (the ``cluster.id`` property), else
    ``new_cluster_id()``.
    """
    found = {
        path: Properties.load(path).values
        for path in (log_dir / META_PROPERTIES for log_dir in log_dirs)
        if path.exists()
    }
    ids = {props.get("cluster.id", "") for props in found.values()}
    if len(ids) > 1:
        raise ConfigError(f"log.dirs disagree on cluster.id: {', '.join(sorted(ids))}")
    stored = ids.pop() if ids else None
    if stored is not None and cluster_id is not None and stored != cluster_id:
        raise ConfigError(
            f"cluster.id={cluster_id} but the log dirs belong to cluster "
            f"{stored} ({', '.join(str(p) for p in found)})"
        )
    for path, props in found.items():
        if props.get("node.id") != str(node_id):
            raise ConfigError(
                f"{path} says node.id={props.get('node.id')}, but this "
                f"broker's node.id is {node_id}"
            )
    chosen = stored or cluster_id or new_cluster_id()
    for log_dir in log_dirs:
        if log_dir / META_PROPERTIES not in found:
            log_dir.mkdir(parents=True, exist_ok=True)
            (log_dir / META_PROPERTIES).write_text(
                f"#\n#Written by pykraft\nversion=1\ncluster.id={chosen}\nnode.id={node_id}\n",
                encoding="utf-8",
            )
    return chosen


def load_broker_config(props: Properties) -> BrokerConfig:
    roles = props.get_list("process.roles", "broker")
    if roles != ["broker"]:
        raise ConfigError(
            f"{props.source}: process.roles={','.join(roles)}: a pykraft broker "
            "process has the role broker only (controllers run as "
            "`pykraft controller`)"
        )
    try:
        return BrokerConfig.from_properties(props.values)
    except BrokerConfigError as error:
        raise ConfigError(f"{props.source}: {error}") from None


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    limit = raise_open_files_limit()  # each partition holds a descriptor
    logger.log(logging.WARNING if limit.error else logging.INFO, "%s", limit.describe())
    try:
        factory = loop_factory(os.environ)
        props = Properties.load(args.config)
        config = load_broker_config(props)
        cluster_id = ensure_meta_properties(
            config.log_dirs, config.node_id, props.values.get("cluster.id")
        )
    except (ConfigError, EventLoopChoiceError) as error:
        print(f"pykraft broker: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"pykraft broker: cannot prepare log.dirs: {error}", file=sys.stderr)
        return 2

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        logger.info("event loop %s.%s", type(loop).__module__, type(loop).__qualname__)
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        server = BrokerServer(config, cluster_id=cluster_id, clock=SystemClock())
        return await run_broker(server, stop)

    set_collector_policy()
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main())


def main(argv: list[str] | None = None) -> int:
    """``python -m pykraft.broker_cmd --config FILE`` (what ``pykraft broker`` runs)."""
    parser = argparse.ArgumentParser(
        prog="pykraft broker",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
