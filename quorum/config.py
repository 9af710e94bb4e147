"""Configuration of one controller: Kafka's property names, Kafka's defaults where Kafka has one.

``ControllerConfig`` is a value; ``pykraft/controller_cmd.py`` builds it from a ``.properties``
file (quorum/ never reads files of its own). Properties that Kafka does not have carry a
``pykraft``-flavoured but Kafka-shaped name and are documented on their field.

Addresses:
  controller.quorum.voters       ``1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095`` — the Raft
                                 (pysyncobj) ports, exactly Kafka's format.
  listeners                      ``CONTROLLER://127.0.0.1:19093`` — this controller's HTTP API
                                 (JSON under /v1). The listener named by
                                 ``controller.listener.names`` (default CONTROLLER) is used.
  controller.quorum.http.voters  ``1@127.0.0.1:19093,2@127.0.0.1:19094,...`` — every controller's
                                 HTTP listener, so a follower can name the leader's URL in a
                                 NOT_CONTROLLER answer. Optional; without it only this node's own
                                 URL is known.
  controller.quorum.bootstrap.servers  ``127.0.0.1:9093,127.0.0.1:9094`` — instead of
                                 ``controller.quorum.voters`` (KIP-853): the Raft addresses of the
                                 current voters. The controller starts as an observer and becomes
                                 a voter when AddRaftVoter adds it; its own Raft address is the
                                 ``RAFT://host:port`` entry of ``listeners``. Once the voter set
                                 has changed, the metadata log holds it (``quorum/raft_voters.py``)
                                 and both properties only seed a controller's first start.
  pykraft.quorum.initial.controllers  ``1@127.0.0.1:9093,2@127.0.0.1:9094`` — with
                                 ``controller.quorum.bootstrap.servers`` only: the founding voters
                                 of a dynamic quorum (Kafka's ``kafka-storage format
                                 --initial-controllers``; one entry naming this node is
                                 ``--standalone``). pykraft formats a controller on its first
                                 start, so the format flag is a property; it seeds that start only.

kraft.version (``ControllerConfig.kraft_version``, KIP-853): Kafka 3.9 allows voter changes only
when the quorum was formatted for them (``--standalone`` / ``--initial-controllers``, kraft.version
1) and its controllers find it through ``controller.quorum.bootstrap.servers``; a quorum of static
``controller.quorum.voters`` has kraft.version 0 and answers AddRaftVoter / RemoveRaftVoter with
UNSUPPORTED_VERSION. pykraft's equivalent: ``controller.quorum.voters`` is kraft.version 0
(pysyncobj's static membership, as before KIP-853); ``controller.quorum.bootstrap.servers`` is
kraft.version 1 (pysyncobj's dynamic membership, ``quorum/raft_voters.py``), a founding voter when
``pykraft.quorum.initial.controllers`` names it and an observer until added otherwise. Every
controller of one quorum must be configured the same way.

Security (issue 11; ``quorum/auth.py`` and ``quorum/auth_http.py`` say why):
  listener.security.protocol.map  ``CONTROLLER:SSL`` puts the HTTP listener on TLS, with the
                                 ``ssl.*`` properties (``listener.name.controller.ssl.*`` wins),
                                 ``http_tls``; PLAINTEXT (no entry) stays the default. Every
                                 controller listens with the same protocol.
  authorizer.class.name          set: every route is authorized; unset: everything is allowed.
  super.users                    ``User:admin;User:CN=broker-1`` (Kafka's ``;``-separated list).
  allow.everyone.if.no.acl.found Kafka's default false.
  pykraft.broker.principal       ``User:CN=broker-{broker_id}``: the one principal that may act
                                 for each broker id (``auth.BrokerBinding``).
  cluster.id                     salts the Raft transport's key (``raft_transport.cluster_key``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import attrs

from pykraft.metadata.auth.principal import KafkaPrincipal
from pykraft.metadata.auth.tls_settings import TlsSettings


class ControllerConfigError(ValueError):
    """A controller property is missing or malformed; the message names the property."""


@attrs.frozen(kw_only=True)
class HostPort:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url_with(self, scheme: str) -> str:
        return f"{scheme}://{self.host}:{self.port}"


@attrs.frozen(kw_only=True)
class ControllerConfig:
    node_id: int
    # Raft addresses of every voter, this node included (controller.quorum.voters).
    voters: Mapping[int, HostPort]
    # This node's HTTP listener (listeners=CONTROLLER://host:port).
    http_listener: HostPort
    # Every voter's HTTP listener (controller.quorum.http.voters); may lack other nodes.
    http_voters: Mapping[int, HostPort]
    metadata_log_dir: Path
    # pysyncobj encrypts and authenticates every frame with it (DESIGN.md §3.1).
    quorum_password: str
    # controller.quorum.election.timeout.ms: pysyncobj draws its election timeout from
    # [election_timeout_ms, 2 * election_timeout_ms).
    election_timeout_ms: int = 1000
    # controller.quorum.fetch.timeout.ms: a peer silent this long is considered disconnected.
    fetch_timeout_ms: int = 2000
    # controller.quorum.append.linger.ms (Kafka default 25): how long the leader lets new entries
    # wait for more before sending them (quorum/raft_prompt.py). pykraft defaults to 0: each
    # write is already one atomic batch, and entries proposed while an AppendEntries is on the
    # wire go out together anyway, fsynced once (group commit).
    append_linger_ms: int = 0
    # controller.quorum.fsync (pykraft; KRaft always flushes): the Raft journal is fsynced
    # before an entry counts towards commit (the leader) or is acknowledged (a follower), one
    # flush per Raft tick for every entry appended since the last (quorum/raft_journal.py).
    # false: pysyncobj's old mode, never synced (survives kill -9, not a power loss).
    fsync: bool = True
    # pykraft.quorum.durable.images (tests only): keep a copy of what each sync made durable,
    # for the simulated power loss of tests/sim/journal_faults.py.
    durable_images: bool = False
    # pykraft.raft.tick.ms: the Raft thread's poll timeout; bounds how late a proposal is noticed.
    raft_tick_ms: int = 2
    # broker.session.timeout.ms: a broker without heartbeat this long is fenced.
    broker_session_timeout_ms: int = 9000
    # pykraft.broker.channel.closed.timeout.ms (not in Kafka): a broker whose metadata long-poll
    # connection was closed (its process died) is fenced after this long unless it calls in
    # again, instead of after broker.session.timeout.ms (quorum/managers/sessions.py); -1: off
    # (this, and the shorter grace of a broker whose poll and idle heartbeat connections both
    # closed, below).
    broker_channel_closed_timeout_ms: int = 1000
    # pykraft.broker.exited.grace.ms (not in Kafka): a broker whose poll and idle heartbeat
    # connections both closed is fenced after this long unless it calls in again (long enough
    # for a live broker's call-in after a middlebox closed both; quorum/managers/sessions.py).
    broker_exited_grace_ms: int = 200
    # broker.heartbeat.interval.ms: told to brokers in the registration answer.
    broker_heartbeat_interval_ms: int = 2000
    # metadata.max.idle.interval.ms: the active controller appends a NoOpRecord this often.
    metadata_max_idle_interval_ms: int = 500
    # metadata.log.max.records.between.snapshots (pykraft; Kafka counts bytes instead): each
    # controller writes a snapshot and compacts its Raft journal after this many new records.
    snapshot_interval_records: int = 20_000
    # metadata.log.max.snapshot.interval.ms (Kafka default 1 hour).
    snapshot_interval_ms: int = 3_600_000
    # metadata.log.retained.snapshots (pykraft): checkpoint files kept on disk.
    retained_snapshots: int = 3
    # metadata.log.window.records (pykraft): committed records kept in memory for brokers'
    # GET /v1/metadata/records; older offsets are served by a snapshot.
    window_records: int = 100_000
    # metadata.fetch.max.wait.ms (pykraft): the upper bound of a broker's long poll.
    fetch_max_wait_ms: int = 30_000
    # num.partitions / default.replication.factor: topic creation defaults.
    num_partitions: int = 1
    default_replication_factor: int = 1
    # unclean.leader.election.enable
    unclean_leader_election_enable: bool = False
    # min.insync.replicas: the static default of KIP-966's effective min ISR (managers/elr.py).
    min_insync_replicas: int = 1
    # auto.leader.rebalance.enable, leader.imbalance.check.interval.seconds (Kafka: at least 1)
    # and leader.imbalance.per.broker.percentage (read by ZooKeeper's controller only; KRaft
    # balances whenever a partition is imbalanced: quorum/managers/leader_balance.py).
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    # delegation.token.secret.key (or the deprecated delegation.token.master.key): unset or
    # empty disables delegation tokens (KIP-48); the three times are Kafka's defaults.
    delegation_token_secret_key: str | None = attrs.field(default=None, repr=False)
    delegation_token_max_lifetime_ms: int = 7 * 24 * 3600_000
    delegation_token_expiry_time_ms: int = 24 * 3600_000
    delegation_token_expiry_check_interval_ms: int = 3600_000
    # controller.quorum.request.timeout.ms (Kafka default 2000): how long a write waits to commit.
    request_timeout_ms: int = 5000
    # The HTTP listener's TLS (listener.security.protocol.map maps it to SSL); None: PLAINTEXT.
    http_tls: TlsSettings | None = None
    # authorizer.class.name is set: every route is authorized (quorum/auth.py).
    authorizer_enabled: bool = False
    # super.users
    super_users: frozenset[KafkaPrincipal] = frozenset()
    # allow.everyone.if.no.acl.found
    allow_everyone_if_no_acl_found: bool = False
    # pykraft.broker.principal: the principal of broker {broker_id}; None: any principal.
    broker_principal: str | None = None
    # cluster.id: the Raft transport's key salt; None keeps pysyncobj's own fixed salt.
    cluster_id: str | None = None

    # controller.quorum.bootstrap.servers: the voters' Raft addresses (observer start, KIP-853).
    bootstrap_servers: tuple[HostPort, ...] = ()
    # listeners' RAFT://host:port: this node's Raft address when controller.quorum.voters does
    # not list it (an observer); must equal its entry there when it does.
    raft_listener: HostPort | None = None
    # pykraft.quorum.initial.controllers: a dynamic quorum's founding voters (their Raft
    # addresses), Kafka's format --initial-controllers; empty otherwise.
    initial_controllers: Mapping[int, HostPort] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        if not self.voters:
            if not self.bootstrap_servers:
                raise ControllerConfigError(
                    "one of controller.quorum.voters or controller.quorum.bootstrap.servers "
                    "must be set"
                )
            if self.raft_listener is None:
                raise ControllerConfigError(
                    "listeners: a controller started with controller.quorum.bootstrap.servers "
                    "needs a RAFT://host:port listener (its Raft address)"
                )
            founder = self.initial_controllers.get(self.node_id)
            if founder is not None and founder != self.raft_listener:
                raise ControllerConfigError(
                    f"listeners: RAFT://{self.raft_listener} is not node {self.node_id}'s "
                    f"pykraft.quorum.initial.controllers entry {founder}"
                )
        elif self.bootstrap_servers:
            raise ControllerConfigError(
                "controller.quorum.voters and controller.quorum.bootstrap.servers are exclusive"
            )
        elif self.initial_controllers:
            raise ControllerConfigError(
                "pykraft.quorum.initial.controllers needs controller.quorum.bootstrap.servers, "
                "not controller.quorum.voters (Kafka: --initial-controllers cannot be used with "
                "controller.quorum.voters)"
            )
        elif self.node_id not in self.voters:
            raise ControllerConfigError(
                f"node.id={self.node_id} is not one of controller.quorum.voters "
                f"({', '.join(str(n) for n in sorted(self.voters))})"
            )
        elif self.raft_listener is not None and self.raft_listener != self.voters[self.node_id]:
            raise ControllerConfigError(
                f"listeners: RAFT://{self.raft_listener} is not node {self.node_id}'s "
                f"controller.quorum.voters entry {self.voters[self.node_id]}"
            )
        if not self.quorum_password:
            raise ControllerConfigError("controller.quorum.password must not be empty")
        if self.leader_imbalance_check_interval_seconds < 1:
            raise ControllerConfigError(
                "leader.imbalance.check.interval.seconds must be at least 1, got "
                f"{self.leader_imbalance_check_interval_seconds}"
            )
        if self.append_linger_ms < 0:
            raise ControllerConfigError(
                "controller.quorum.append.linger.ms must be at least 0, got "
                f"{self.append_linger_ms}"
            )
        if self.append_linger_ms * 3 >= self.election_timeout_ms:
            raise ControllerConfigError(
                "controller.quorum.append.linger.ms must be under a third of "
                "controller.quorum.election.timeout.ms"
            )

    @property
    def kraft_version(self) -> int:
        """Kafka's ``kraft.version`` feature level (module docstring): 1 allows voter changes."""
        return 0 if self.voters else 1

    @property
    def self_raft_address(self) -> HostPort:
        address = self.voters.get(self.node_id, self.raft_listener)
        assert address is not None  # __attrs_post_init__
        return address

    @property
    def http_scheme(self) -> str:
        return "http" if self.http_tls is None else "https"

    def http_url(self, node_id: int) -> str | None:
        if node_id == self.node_id:
            return self.http_listener.url_with(self.http_scheme)
        address = self.http_voters.get(node_id)
        return address.url_with(self.http_scheme) if address is not None else None

    def node_id_for_raft_address(self, address: str) -> int | None:
        for node_id, host_port in self.voters.items():
            if str(host_port) == address:
                return node_id
        return None


def parse_host_port(text: str, what: str) -> HostPort:
    host, separator, port = text.strip().rpartition(":")
    if not separator or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ControllerConfigError(f"{what}: expected host:port, got {text!r}")
    return HostPort(host=host.strip("[]"), port=int(port))


def parse_voters(items: list[str], what: str) -> dict[int, HostPort]:
    """Parse Kafka's ``id@host:port`` list (controller.quorum.voters)."""
    voters: dict[int, HostPort] = {}
    for item in items:
        node, separator, address = item.partition("@")
        if not separator or not node.strip().lstrip("-").isdigit():
            raise ControllerConfigError(f"{what}: expected id@host:port, got {item!r}")
        node_id = int(node)
        if node_id in voters:
            raise ControllerConfigError(f"{what}: node {node_id} is listed twice")
        voters[node_id] = parse_host_port(address, what)
    if not voters:
        raise ControllerConfigError(f"{what}: no voters listed")
    return voters


def parse_listener(items: list[str], listener_name: str) -> HostPort:
    """Pick ``NAME://host:port`` out of Kafka's ``listeners`` list."""
    for item in items:
        name, separator, address = item.partition("://")
        if not separator:
            raise ControllerConfigError(f"listeners: expected NAME://host:port, got {item!r}")
        if name.strip().upper() == listener_name.upper():
            return parse_host_port(address, "listeners")
    raise ControllerConfigError(
        f"listeners: no listener named {listener_name} (controller.listener.names)"
    )
