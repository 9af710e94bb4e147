"""``ControllerSettings``: the Kafka properties the controller's decisions depend on."""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class ControllerSettings:
    """Kafka's property names and defaults (the controller process builds this from its config).

    ``quorum.config.ControllerConfig`` is the process configuration (addresses, Raft tuning);
    this is only what the pure core reads.
    """

    # broker.session.timeout.ms: an unfenced broker silent this long is fenced.
    broker_session_timeout_ms: int = 9000
    # pykraft.broker.channel.closed.timeout.ms (not in Kafka): a broker whose metadata long-poll
    # connection closed and that has not called in since is fenced after this long, not after
    # the whole session (managers/sessions.py); -1: off (this, and the shorter grace of a broker
    # whose poll and idle heartbeat connections both closed, below).
    broker_channel_closed_timeout_ms: int = 1000
    # pykraft.broker.exited.grace.ms (not in Kafka): a broker whose poll and idle heartbeat
    # connections both closed (its process exited, or a middlebox closed both of a live one's)
    # is fenced after this long unless it calls in again (managers/sessions.py).
    broker_exited_grace_ms: int = 200
    # metadata.max.idle.interval.ms: append a NoOpRecord when nothing was written this long.
    metadata_max_idle_interval_ms: int = 500
    # num.partitions / default.replication.factor: used when CreateTopics says -1.
    default_num_partitions: int = 1
    default_replication_factor: int = 1
    # unclean.leader.election.enable: the static default when neither the topic nor the
    # cluster-wide broker config sets it.
    unclean_leader_election_enable: bool = False
    # min.insync.replicas: the static default when neither the topic nor the cluster-wide broker
    # config sets it (KIP-966 effective min ISR, quorum/managers/elr.py).
    min_insync_replicas: int = 1
    # The eligible.leader.replicas.version a new cluster starts with. Kafka 4.1 formats new
    # clusters with 1; pykraft with 0 (Kafka 4.0's default) because it lacks Kafka's
    # last-known-leader election, without which a partition whose every eligible replica was
    # killed stays offline (quorum/managers/elr.py). UpdateFeatures turns it on.
    eligible_leader_replicas_version: int = 0
    # auto.leader.rebalance.enable / leader.imbalance.check.interval.seconds (in ms here):
    # move leaderships back to preferred replicas (managers/leader_balance.py).
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_ms: int = 300_000
    # Kafka's maxElectionsPerImbalance: PREFERRED elections one balancing run may make.
    max_elections_per_imbalance: int = 1000
    # pykraft bound (STYLE.md §7): partitions one CreateTopics / CreatePartitions request may
    # create. Kafka bounds records per user operation the same way (MAX_RECORDS_PER_USER_OP).
    max_partitions_per_request: int = 100_000
    # KIP-48 delegation tokens (Kafka's DelegationTokenControlManager): no secret key, no
    # tokens (DELEGATION_TOKEN_AUTH_DISABLED). delegation.token.max.lifetime.ms (7 days),
    # delegation.token.expiry.time.ms (1 day), delegation.token.expiry.check.interval.ms (1 hour).
    delegation_token_secret_key: str | None = attrs.field(default=None, repr=False)
    delegation_token_max_lifetime_ms: int = 7 * 24 * 3600_000
    delegation_token_expiry_time_ms: int = 24 * 3600_000
    delegation_token_expiry_check_interval_ms: int = 3600_000

    def __attrs_post_init__(self) -> None:
        for name in (
            "broker_session_timeout_ms",
            "metadata_max_idle_interval_ms",
            "default_num_partitions",
            "default_replication_factor",
            "min_insync_replicas",
            "max_partitions_per_request",
            "leader_imbalance_check_interval_ms",
            "max_elections_per_imbalance",
            "delegation_token_max_lifetime_ms",
            "delegation_token_expiry_time_ms",
            "delegation_token_expiry_check_interval_ms",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.broker_channel_closed_timeout_ms < -1:
            raise ValueError(
                "broker_channel_closed_timeout_ms must be -1 (off) or at least 0, got "
                f"{self.broker_channel_closed_timeout_ms}"
            )
        if self.broker_exited_grace_ms < 0:
            raise ValueError(
                f"broker_exited_grace_ms must be at least 0, got {self.broker_exited_grace_ms}"
            )
