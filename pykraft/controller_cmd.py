"""``pykraft controller --config FILE``: run one controller of the metadata quorum.

The file is a Kafka ``.properties`` file. Example for node 1 of three::

    node.id=1
    process.roles=controller
    controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095
    controller.quorum.http.voters=1@127.0.0.1:19093,2@127.0.0.1:19094,3@127.0.0.1:19095
    listeners=CONTROLLER://127.0.0.1:19093
    controller.listener.names=CONTROLLER
    metadata.log.dir=/var/lib/pykraft/controller-1
    controller.quorum.password.file=/var/lib/pykraft/quorum.password

``controller.quorum.voters`` are the Raft (pysyncobj) ports; ``listeners`` is this controller's
HTTP API; ``controller.quorum.http.voters`` lets a follower point clients at the leader. The
password (``controller.quorum.password`` or ``controller.quorum.password.file``) is required:
every Raft frame is encrypted and authenticated with it; ``cluster.id`` salts its key.
SIGTERM stops the controller cleanly.

A secure controller (issue 11; ``quorum/auth_http.py`` says why TLS and what each door checks)::

    listener.security.protocol.map=CONTROLLER:SSL
    ssl.keystore.type=PEM
    ssl.keystore.location=/etc/pykraft/controller-1.pem
    ssl.truststore.location=/etc/pykraft/ca.pem
    ssl.client.auth=required
    ssl.principal.mapping.rules=RULE:^CN=([^,]+),.*$/$1/,DEFAULT
    authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
    super.users=User:admin;User:broker-1;User:broker-2
    pykraft.broker.principal=User:broker-{broker_id}
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from pykraft.event_loop import EventLoopChoiceError, loop_factory
from pykraft.metadata.auth.principal import KafkaPrincipal, PrincipalError
from pykraft.metadata.auth.tls_context import server_context
from pykraft.metadata.auth.tls_settings import (
    TlsSettings,
    TlsSettingsError,
    listener_prefix,
    parse_tls_settings,
)
from pykraft.properties import ConfigError, Properties
from pykraft.quorum.auth import BrokerBinding, BrokerBindingError
from pykraft.quorum.config import (
    ControllerConfig,
    ControllerConfigError,
    HostPort,
    parse_host_port,
    parse_listener,
    parse_voters,
)
from pykraft.quorum.runner import run_controller
from pykraft.quorum.voter_changes import RAFT_LISTENER
from pykraft.storage.atomic_file import write_atomically
from pykraft.storage.directory_id import META_PROPERTIES, ensure_directory_id, new_directory_id
from pykraft.storage.system_clock import SystemClock


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", required=True, type=Path, help="the controller's .properties file"
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        factory = loop_factory(os.environ)
        config = load_controller_config(Properties.load(args.config))
        if config.http_tls is not None:
            server_context(config.http_tls)  # reads the key files now: a bad one stops here
    except (ConfigError, ControllerConfigError, TlsSettingsError, EventLoopChoiceError) as error:
        print(f"pykraft controller: {error}", file=sys.stderr)
        return 2
    try:
        ensure_meta_properties(config.metadata_log_dir, config.node_id)
    except OSError as error:
        print(f"pykraft controller: {config.metadata_log_dir}: {error}", file=sys.stderr)
        return 2
    return run_controller(config, SystemClock(), factory)


def ensure_meta_properties(log_dir: Path, node_id: int) -> str:
    """The controller's ``directory.id`` (KIP-853: its voter key with ``node.id``), kept in
    ``metadata.log.dir/meta.properties`` as Kafka's ``kafka-storage format`` writes it; made at
    the first start. ``pykraft metadata-quorum add-controller`` reads it from there."""
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / META_PROPERTIES
    if not path.exists():
        write_atomically(
            path, f"version=1\nnode.id={node_id}\ndirectory.id={new_directory_id()}\n".encode()
        )
    return ensure_directory_id(log_dir)


def _password(props: Properties) -> str:
    inline = props.values.get("controller.quorum.password")
    path = props.values.get("controller.quorum.password.file")
    if inline and path:
        raise ConfigError(
            f"{props.source}: set controller.quorum.password or "
            "controller.quorum.password.file, not both"
        )
    if path:
        try:
            password = Path(path).read_text(encoding="utf-8").strip()
        except OSError as error:
            raise ConfigError(
                f"{props.source}: controller.quorum.password.file={path}: {error.strerror}"
            ) from None
        if not password:
            raise ConfigError(f"{props.source}: the password file {path} is empty")
        return password
    if not inline:
        raise ConfigError(
            f"{props.source}: controller.quorum.password or "
            "controller.quorum.password.file is required (pysyncobj runs "
            "whatever a peer sends unless frames are authenticated)"
        )
    return inline


# Kafka's listener.security.protocol.map default: each security protocol maps to itself.
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _http_tls(props: Properties, listener_name: str) -> TlsSettings | None:
    """The HTTP listener's TLS when ``listener.security.protocol.map`` maps it to SSL (a
    listener without an entry is PLAINTEXT, as before issue 11)."""
    protocol_map: dict[str, str] = {}
    for item in props.get_list("listener.security.protocol.map", ""):
        name, colon, protocol = item.partition(":")
        if not colon or protocol.strip().upper() not in _SECURITY_PROTOCOLS:
            raise ConfigError(
                f"{props.source}: listener.security.protocol.map: expected NAME:PROTOCOL "
                f"(one of {', '.join(_SECURITY_PROTOCOLS)}), got {item!r}"
            )
        protocol_map[name.strip().upper()] = protocol.strip().upper()
    protocol = protocol_map.get(listener_name.upper(), "PLAINTEXT")
    if protocol.startswith("SASL_"):
        raise ConfigError(
            f"{props.source}: listener.security.protocol.map: the controller listener "
            f"{listener_name} speaks HTTP, PLAINTEXT or SSL; over SSL, operators may sign in "
            "with HTTP Basic against their SCRAM credentials instead of SASL"
        )
    if protocol == "PLAINTEXT":
        return None
    try:
        return parse_tls_settings(props.values, listener_prefix(listener_name))
    except TlsSettingsError as error:
        raise ConfigError(f"{props.source}: {error}") from None


def _super_users(props: Properties) -> frozenset[KafkaPrincipal]:
    """``super.users``: Kafka's ``;``-separated principals."""
    raw = props.get_str("super.users", "")
    try:
        return frozenset(KafkaPrincipal.parse(p.strip()) for p in raw.split(";") if p.strip())
    except PrincipalError as error:
        raise ConfigError(f"{props.source}: super.users: {error}") from None


def _broker_principal(props: Properties) -> str | None:
    template = props.values.get("pykraft.broker.principal") or None
    try:
        BrokerBinding(template)
    except BrokerBindingError as error:
        raise ConfigError(f"{props.source}: {error}") from None
    return template


def _static_voters(props: Properties) -> dict[int, HostPort]:
    """controller.quorum.voters; empty when unset (an observer uses bootstrap servers)."""
    items = [item for item in props.get_list("controller.quorum.voters", "") if item.strip()]
    return parse_voters(items, "controller.quorum.voters") if items else {}


def _raft_listener(props: Properties) -> HostPort | None:
    """The ``RAFT://host:port`` entry of ``listeners`` (KIP-853 observers), if any."""
    items = props.get_list("listeners")
    if not any(item.strip().upper().startswith(f"{RAFT_LISTENER}://") for item in items):
        return None
    return parse_listener(items, RAFT_LISTENER)


def _initial_controllers(props: Properties) -> dict[int, HostPort]:
    """pykraft.quorum.initial.controllers (Kafka's format --initial-controllers); empty when
    unset."""
    name = "pykraft.quorum.initial.controllers"
    items = [item for item in props.get_list(name, "") if item.strip()]
    return parse_voters(items, name) if items else {}


def load_controller_config(props: Properties) -> ControllerConfig:
    roles = props.get_list("process.roles", "controller")
    if "controller" not in roles:
        raise ConfigError(f"{props.source}: process.roles={','.join(roles)} lacks controller")
    listener_name = props.get_str("controller.listener.names", "CONTROLLER").split(",")[0]
    http_voters = {}
    if "controller.quorum.http.voters" in props.values:
        http_voters = parse_voters(
            props.get_list("controller.quorum.http.voters"), "controller.quorum.http.voters"
        )
    log_dir = props.values.get("metadata.log.dir") or props.get_list("log.dirs")[0]
    return ControllerConfig(
        node_id=props.get_int("node.id"),
        voters=_static_voters(props),
        bootstrap_servers=tuple(
            parse_host_port(item, "controller.quorum.bootstrap.servers")
            for item in props.get_list("controller.quorum.bootstrap.servers", "")
            if item.strip()
        ),
        raft_listener=_raft_listener(props),
        initial_controllers=_initial_controllers(props),
        http_listener=parse_listener(props.get_list("listeners"), listener_name.strip()),
        http_voters=http_voters,
        metadata_log_dir=Path(log_dir),
        quorum_password=_password(props),
        election_timeout_ms=props.get_int("controller.quorum.election.timeout.ms", 1000),
        fetch_timeout_ms=props.get_int("controller.quorum.fetch.timeout.ms", 2000),
        append_linger_ms=props.get_int("controller.quorum.append.linger.ms", 0),
        raft_tick_ms=props.get_int("pykraft.raft.tick.ms", 2),
        fsync=props.get_bool("controller.quorum.fsync", True),
        durable_images=props.get_bool("pykraft.quorum.durable.images", False),
        broker_session_timeout_ms=props.get_int("broker.session.timeout.ms", 9000),
        broker_channel_closed_timeout_ms=props.get_int(
            "pykraft.broker.channel.closed.timeout.ms", 1000
        ),
        broker_exited_grace_ms=props.get_int("pykraft.broker.exited.grace.ms", 200),
        broker_heartbeat_interval_ms=props.get_int("broker.heartbeat.interval.ms", 2000),
        metadata_max_idle_interval_ms=props.get_int("metadata.max.idle.interval.ms", 500),
        snapshot_interval_records=props.get_int(
            "metadata.log.max.records.between.snapshots", 20_000
        ),
        snapshot_interval_ms=props.get_int("metadata.log.max.snapshot.interval.ms", 3_600_000),
        retained_snapshots=props.get_int("metadata.log.retained.snapshots", 3),
        window_records=props.get_int("metadata.log.window.records", 100_000),
        fetch_max_wait_ms=props.get_int("metadata.fetch.max.wait.ms", 30_000),
        num_partitions=props.get_int("num.partitions", 1),
        default_replication_factor=props.get_int("default.replication.factor", 1),
        unclean_leader_election_enable=props.get_bool("unclean.leader.election.enable", False),
        min_insync_replicas=props.get_int("min.insync.replicas", 1),
        auto_leader_rebalance_enable=props.get_bool("auto.leader.rebalance.enable", True),
        leader_imbalance_check_interval_seconds=props.get_int(
            "leader.imbalance.check.interval.seconds", 300
        ),
        leader_imbalance_per_broker_percentage=props.get_int(
            "leader.imbalance.per.broker.percentage", 10
        ),
        request_timeout_ms=props.get_int("controller.quorum.request.timeout.ms", 5000),
        delegation_token_secret_key=props.get_str(
            "delegation.token.secret.key", props.get_str("delegation.token.master.key", "")
        )
        or None,
        delegation_token_max_lifetime_ms=props.get_int(
            "delegation.token.max.lifetime.ms", 7 * 24 * 3600_000
        ),
        delegation_token_expiry_time_ms=props.get_int(
            "delegation.token.expiry.time.ms", 24 * 3600_000
        ),
        delegation_token_expiry_check_interval_ms=props.get_int(
            "delegation.token.expiry.check.interval.ms", 3600_000
        ),
        http_tls=_http_tls(props, listener_name.strip()),
        authorizer_enabled=bool(props.get_str("authorizer.class.name", "").strip()),
        super_users=_super_users(props),
        allow_everyone_if_no_acl_found=props.get_bool("allow.everyone.if.no.acl.found", False),
        broker_principal=_broker_principal(props),
        cluster_id=props.values.get("cluster.id") or None,
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m pykraft.controller_cmd --config FILE`` (what ``pykraft controller`` runs)."""
    parser = argparse.ArgumentParser(
        prog="pykraft controller",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
