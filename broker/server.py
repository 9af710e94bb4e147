"""BrokerServer: one broker process — storage, metadata, replicas, the Kafka and HTTP listeners.

Theory of operation (Kafka's ``BrokerServer.startup``/``shutdown``; lifecycle in
``broker.lifecycle``)
-------------------------------------------------------------------------------------------
Start-up, in ``STARTING``:
  1. the local HTTP API starts first, so the state is visible while everything else happens;
  2. ``log.dirs`` are loaded (log recovery, off the event loop) into a ``LogManager``;
  3. ``ReplicaManager`` (with the replica fetchers, the AlterPartition channel and one timer at
     its core's next deadline: high-watermark checkpoint, ISR expiration, waiters' deadlines),
     ``BrokerMetadataPublisher``, ``KafkaApis`` with every handler, and the Kafka listeners are
     built. The listeners bind now (a listener on port 0 must be advertised with its real
     port), but hold requests until the broker has caught up with the metadata log, as Kafka
     enables request processing only then;
  4. the ``MetadataLoader`` long-polls the metadata log;
  5. ``BrokerLifecycleManager`` registers (fresh incarnation id) and heartbeats with the loader's
     offset. Caught up -> ``RECOVERY``: from now on each published image goes through
     ``local_changes`` into ``ReplicaManager.apply_delta`` (become leader / follower / delete),
     starting with the whole current image; requests flow and the broker asks to be unfenced.
     Unfenced -> ``RUNNING``. Logs load with the broker's log defaults; each topic's overrides
     reach its logs when ``ReplicaManager`` first opens the partition, and every later change
     of them through ``ReplicaManager.update_topic_configs``.

Shutdown (SIGTERM): from ``RUNNING`` a controlled shutdown first — heartbeats say
want_shut_down while the loader keeps applying the leadership moves the controller makes — until
the controller answers should_shut_down (or ``controlled_shutdown_timeout_s`` passes). Then, in
``SHUTTING_DOWN``: heartbeats and the loader stop, the Kafka listeners close, the fetchers stop,
waiting requests are answered, every log is closed and checkpointed with the clean-shutdown
marker, and the HTTP API closes last (``NOT_RUNNING``).

Alongside: ``server_listeners.py`` binds the Kafka listeners with their security (step 3),
``server_views.py`` is what the HTTP API shows of the broker, and ``server_run.py`` is the
process around it (serve until stopped, exit code).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable
from typing import Any

from pykraft.broker.add_partitions_to_txn_manager import (
    AddPartitionsToTxnManager,
    build_add_partitions_to_txn_manager,
)
from pykraft.broker.alter_partition import AlterPartitionManager
from pykraft.broker.authorization import RequestAuthorizer
from pykraft.broker.authorization_scram import ImageScramCredentials
from pykraft.broker.config import BrokerConfig
from pykraft.broker.controller_client import ControllerClient
from pykraft.broker.controller_transport import DEFAULT_KEEPALIVE_TIMEOUT_S
from pykraft.broker.coordinators import Coordinators, build_coordinators
from pykraft.broker.handlers import BrokerServices, broker_handlers
from pykraft.broker.handlers.services import FetchKey, random_session_id
from pykraft.broker.heartbeat import BrokerIdentity, BrokerLifecycleManager
from pykraft.broker.heartbeat_thread import HeartbeatThread
from pykraft.broker.http import BrokerHttpApi, BrokerHttpServer, BrokerStatus, PartitionRow
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.broker.lifecycle import BrokerLifecycle, BrokerStartupError, BrokerState
from pykraft.broker.log_cleaner import LogCleanerShell
from pykraft.broker.log_dir_mover import LogDirMover
from pykraft.broker.metadata_loader import MetadataLoader
from pykraft.broker.metadata_publisher import BrokerMetadataPublisher
from pykraft.broker.metrics import BrokerMetrics
from pykraft.broker.network import KafkaListener, RequestContext
from pykraft.broker.new_logs import create_new_logs
from pykraft.broker.producer_ids import ProducerIdManager
from pykraft.broker.quotas import QuotaWindow
from pykraft.broker.quotas_channel import ChannelThrottles
from pykraft.broker.quotas_shell import ClientQuotas
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.broker.replication_quotas import ReplicationQuotas
from pykraft.broker.sasl_authentication import inter_broker_client_security
from pykraft.broker.sasl_mechanisms import ScramCredentialSource
from pykraft.broker.server_listeners import security_or_startup_error, start_kafka_listeners
from pykraft.broker.server_views import broker_status, metrics_text, partition_rows
from pykraft.fetcher import FetcherConfig, ReplicaFetcherManager
from pykraft.metadata.auth.tls_context import client_context
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.elr import ELR_BROKER_FEATURE
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import uuid_to_kafka_string
from pykraft.protocol.fetch import FetchPartition
from pykraft.protocol.segments import Segments
from pykraft.replica.fetch_sessions import FetchSessionCache
from pykraft.storage.clock import Clock
from pykraft.storage.deadline_timer import DeadlineTimer
from pykraft.storage.log_manager import LogManager, LogManagerSettings

logger = logging.getLogger(__name__)

# Bounds (STYLE.md §7).
CONTROLLED_SHUTDOWN_TIMEOUT_S = 30.0
PERIODIC_INTERVAL_MAX_S = 1.0
SHUTDOWN_STEP_TIMEOUT_S = 5.0


class LogDirsOfflineError(Exception):
    """Every log dir failed: the broker stops (Kafka halts it)."""


class BrokerServer:
    def __init__(
        self,
        config: BrokerConfig,
        *,
        cluster_id: str,
        clock: Clock,
        controlled_shutdown_timeout_s: float = CONTROLLED_SHUTDOWN_TIMEOUT_S,
        scram_credentials: ScramCredentialSource | None = None,
    ) -> None:
        self.config = config
        # SASL/SCRAM users beyond each listener's bootstrap users (broker.sasl_authentication):
        # the metadata image's KIP-554 credentials.
        self.scram_credentials = scram_credentials or ImageScramCredentials(
            lambda: self.loader.image, config.delegation_token_secret_key
        )
        # authorizer.class.name: rebuilt from the image's ACLs by the metadata publisher.
        self.authorizer = RequestAuthorizer(config.authorizer)
        self.cluster_id = cluster_id
        # The process's one clock (built by pykraft.broker_cmd): monotonic time for deadlines,
        # wall time for what is dated (logs, records, offset commits).
        self.clock = clock
        self.controlled_shutdown_timeout_s = controlled_shutdown_timeout_s
        self.incarnation_id = uuid_to_kafka_string(uuid.uuid4().bytes)
        self.lifecycle = BrokerLifecycle()
        self.metrics = BrokerMetrics()
        self.fetch_sessions: FetchSessionCache[FetchKey, FetchPartition] = FetchSessionCache(
            random_session_id, config.max_incremental_fetch_session_cache_slots
        )
        self.client = self._new_controller_client()
        self.heartbeat_thread: HeartbeatThread | None = None
        self.loader = MetadataLoader(self.client)
        self.http = BrokerHttpServer(
            BrokerHttpApi(
                status=self.status, metrics_text=self._metrics_text, partitions=self.partition_rows
            ),
            host=config.http_listener.host,
            port=config.http_listener.port,
            bearer_token=config.http_bearer_token,
        )
        self.kafka_apis = KafkaApis()
        self.listeners: list[KafkaListener] = []
        self.log_manager: LogManager | None = None
        self.log_cleaner: LogCleanerShell | None = None
        self.replica_manager: ReplicaManager | None = None
        self.fetcher_manager: ReplicaFetcherManager | None = None
        self.coordinators: Coordinators | None = None
        self.add_partitions_to_txn: AddPartitionsToTxnManager | None = None
        self.publisher: BrokerMetadataPublisher | None = None
        self.alter_partition = AlterPartitionManager(
            self.client, broker_id=config.node_id, broker_epoch=self._broker_epoch
        )
        self.heartbeats: BrokerLifecycleManager | None = None
        self.producer_ids = ProducerIdManager(
            self.client,
            broker_id=config.node_id,
            broker_epoch=self._broker_epoch,
            monotonic_ms=clock.monotonic_ms,
        )
        self._serving = asyncio.Event()
        self._stop_loader = asyncio.Event()
        self._all_log_dirs_offline = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # ------------------------------------------------------------------ views

    def status(self) -> BrokerStatus:
        return broker_status(
            self.config,
            self.lifecycle.state,
            metadata_offset=self.loader.image.offset,
            broker_epoch=self._broker_epoch(),
            log_manager=self.log_manager,
        )

    def partition_rows(self) -> list[PartitionRow]:
        return partition_rows(self.replica_manager, self.log_manager)

    def _metrics_text(self) -> str:
        self.metrics.set_fetch_sessions(
            sessions=len(self.fetch_sessions.sessions),
            partitions=self.fetch_sessions.total_partitions,
        )
        return metrics_text(
            self.metrics, self.lifecycle.state, self.loader, self.replica_manager, self.log_manager
        )

    # ------------------------------------------------------------------ start-up

    async def startup(self) -> None:
        """Run the start-up sequence up to RUNNING (raises ``BrokerStartupError``)."""
        self.lifecycle.become(BrokerState.STARTING)
        await self._start_http()
        now_ms = self.clock.wall_clock_ms()
        self.log_manager = await asyncio.to_thread(self._open_logs, now_ms)
        # Checkpoints and rolled segments fsync: synced off this loop (storage/log_manager.py).
        self.log_manager.sync_off_loop(asyncio.get_running_loop().call_soon_threadsafe)
        fetcher_config = self._fetcher_config()
        self.replication_quotas = ReplicationQuotas(
            self.config.node_id,
            window_num=self.config.replication_quota_window_num,
            window_size_ms=self.config.replication_quota_window_size_seconds * 1000,
        )
        self.fetcher_manager = ReplicaFetcherManager(
            fetcher_config,
            self.log_manager.get_log,
            broker_epoch=self._broker_epoch,
            clock=self.clock,
            quota=self.replication_quotas.follower,
            on_replication_bytes_in=self.metrics.broker_topic_stats.record_replication_bytes_in,
        )
        # KIP-890 part 1: transactional writes verified with their coordinator first.
        self.add_partitions_to_txn = build_add_partitions_to_txn_manager(
            self.config,
            lambda: self.loader.image,
            fetcher_config.client_security,
            self.clock.monotonic_ms,
        )
        self.replica_manager = ReplicaManager(
            broker_id=self.config.node_id,
            log_manager=self.log_manager,
            fetcher_manager=self.fetcher_manager,
            alter_partition=self.alter_partition,
            inter_broker_listener_name=self.config.inter_broker_listener_name,
            min_insync_replicas=self.config.min_insync_replicas,
            replica_lag_time_max_ms=self.config.replica_lag_time_max_ms,
            high_watermark_checkpoint_interval_ms=(
                self.config.replica_high_watermark_checkpoint_interval_ms
            ),
            monotonic_ms=self.clock.monotonic_ms,
            timer=lambda on_due: DeadlineTimer(self.clock.monotonic_ms, on_due),
            transaction_verifier=self.add_partitions_to_txn,
            replication_quotas=self.replication_quotas,
            broker_topic_stats=self.metrics.broker_topic_stats,
        )
        offline_storage = self.replica_manager.offline_storage
        self.fetcher_manager.on_storage_error = offline_storage.handle_storage_error
        offline_storage.on_all_log_dirs_offline = self._all_log_dirs_offline.set
        self.coordinators = build_coordinators(
            self.config,
            self.replica_manager,
            self.producer_ids,
            lambda: self.loader.image,
            fetcher_config.client_security,
            self.clock,
        )
        # The coordinators load / unload their partitions (__consumer_offsets,
        # __transaction_state) after the replicas.
        self.publisher = BrokerMetadataPublisher(
            self.config.node_id,
            self.replica_manager,
            wall_clock_ms=self.clock.wall_clock_ms,
            listeners=self.coordinators.metadata_listeners,
            authorizer=self.authorizer,
        )
        # KIP-546 client quotas, enforced by the Produce and Fetch handlers; the listeners mute
        # throttled connections (KIP-219).
        self.channel_throttles = ChannelThrottles(
            self.clock.wait, enforcing=lambda: bool(self.loader.image.client_quotas.entities)
        )
        self.client_quotas = ClientQuotas(
            lambda: self.loader.image.client_quotas,
            self.clock.monotonic_ms,
            self.channel_throttles,
            window=QuotaWindow(
                self.config.quota_window_num, self.config.quota_window_size_seconds * 1000
            ),
            metrics=self.metrics,
        )
        self.kafka_apis.request_quota = self.client_quotas.record_request
        self.kafka_apis.register_all(
            broker_handlers(
                BrokerServices(
                    broker_id=self.config.node_id,
                    cluster_id=self.cluster_id,
                    replica_manager=self.replica_manager,
                    metadata=lambda: self.loader.image,
                    controller=self.client,
                    wall_clock_ms=self.clock.wall_clock_ms,
                    auto_create_topics_enable=self.config.auto_create_topics_enable,
                    num_partitions=self.config.num_partitions,
                    default_replication_factor=self.config.default_replication_factor,
                    authorizer=self.authorizer,
                    static_broker_configs=self.config.static_properties,
                    client_quotas=self.client_quotas,
                    delegation_token_secret_key=self.config.delegation_token_secret_key,
                    fetch_sessions=self.fetch_sessions,
                ),
                producer_ids=self.producer_ids,
                group_coordinator=self.coordinators.group,
                transaction_coordinator=self.coordinators.transaction,
            )
        )
        endpoints = await start_kafka_listeners(
            self.config,
            self.listeners,
            dispatch=self._dispatch,
            metrics=self.metrics,
            scram_credentials=self.scram_credentials,
            monotonic_ms=self.clock.monotonic_ms,
            throttles=self.channel_throttles,
        )
        self.heartbeats = BrokerLifecycleManager(
            self.client,
            BrokerIdentity(
                broker_id=self.config.node_id,
                incarnation_id=self.incarnation_id,
                endpoints=endpoints,
                rack=self.config.rack,
                features=(ELR_BROKER_FEATURE,),
                previous_broker_epoch=(
                    -1 if self.log_manager is None else self.log_manager.previous_broker_epoch()
                ),
            ),
            self.lifecycle,
            lambda: self.loader.image.offset,
            heartbeat_interval_ms=self.config.broker_heartbeat_interval_ms,
            offline_log_dirs=lambda: offline_storage.offline_log_dirs(self.loader.image),
            counters=self.metrics.heartbeat_counters,
            monotonic_ms=self.clock.monotonic_ms,
        )
        offline_storage.on_directory_failure = self.heartbeats.propagate_directory_failure
        # Its own thread, loop and client (issue 18): a long metadata apply on this loop does
        # not starve it (broker/heartbeat_thread.py).
        # Its idle connection outlives the gap between beats: the active controller fences a
        # broker whose heartbeat connection closed while idle (quorum/broker_channels.py).
        keepalive_s = max(
            DEFAULT_KEEPALIVE_TIMEOUT_S, 2 * self.config.broker_heartbeat_interval_ms / 1000
        )
        self.heartbeat_thread = HeartbeatThread(
            self.heartbeats, lambda: self._new_controller_client(keepalive_timeout_s=keepalive_s)
        )
        self.heartbeat_thread.start()
        self._spawn(self.heartbeat_thread.wait(), "heartbeats")
        self._spawn(
            self.loader.run(self._stop_loader, on_failure=self.heartbeats.call_in_now),
            "metadata loader",
        )
        self._spawn(self._run_periodic(), "log manager")
        if self.config.log_cleaner.enable:  # Kafka's LogCleaner, log.cleaner.enable
            self.log_cleaner = LogCleanerShell(
                self.config.log_cleaner, self.log_manager, self.clock, self.metrics.log_cleaner
            )
            self._spawn(self.log_cleaner.run(), "log cleaner")
        self._spawn(self._halt_when_log_dirs_fail(), "log dirs")
        # KIP-113: replicas moving between log dirs (ReplicaAlterLogDirsManager).
        mover = LogDirMover(self.replica_manager, self.clock.wall_clock_ms)
        self._spawn(mover.run(), "log dir mover")
        await self._wait_until_running(self.heartbeats)

    async def _start_http(self) -> None:
        try:
            await self.http.start()
        except OSError as error:
            raise BrokerStartupError(
                f"cannot listen on {self.config.http_listener.url} "
                f"(http.listener): {error.strerror}"
            ) from None

    def _new_controller_client(
        self, keepalive_timeout_s: float = DEFAULT_KEEPALIVE_TIMEOUT_S
    ) -> ControllerClient:
        config = self.config
        client = ControllerClient(
            # host:port; the client picks http or https.
            [hp.url.removeprefix("http://") for hp in config.controller_bootstrap_servers],
            ssl_context=(
                None if config.controller_tls is None else client_context(config.controller_tls)
            ),
            keepalive_timeout_s=keepalive_timeout_s,
        )
        client.identify_as(lambda: (config.node_id, self._broker_epoch()))
        return client

    def _broker_epoch(self) -> int:
        return self.heartbeats.broker_epoch if self.heartbeats is not None else -1

    def _fetcher_config(self) -> FetcherConfig:
        config = self.config
        return FetcherConfig(
            replica_id=config.node_id,
            num_replica_fetchers=config.num_replica_fetchers,
            fetch_wait_max_ms=config.replica_fetch_wait_max_ms,
            fetch_min_bytes=config.replica_fetch_min_bytes,
            fetch_max_bytes=config.replica_fetch_max_bytes,
            fetch_response_max_bytes=config.replica_fetch_response_max_bytes,
            fetch_backoff_ms=config.replica_fetch_backoff_ms,
            socket_timeout_ms=config.replica_socket_timeout_ms,
            client_security=security_or_startup_error(lambda: inter_broker_client_security(config)),
        )

    def _open_logs(self, now_ms: int) -> LogManager:
        try:
            manager = LogManager.open(
                self.config.log_dirs,
                self.config.log_config,
                now_ms,
                settings=LogManagerSettings(
                    log_retention_check_interval_ms=self.config.log_retention_check_interval_ms,
                    log_flush_scheduler_interval_ms=self.config.log_flush_scheduler_interval_ms,
                    num_recovery_threads_per_data_dir=self.config.num_recovery_threads_per_data_dir,
                ),
            )
        except OSError as error:
            raise BrokerStartupError(f"cannot load log.dirs: {error}") from None
        for problem in manager.problems:
            logger.warning("log dir: %s", problem)
        if not manager.online_dirs:
            raise BrokerStartupError(f"every log dir is offline: {manager.offline_dirs}")
        unclean = [str(d) for d, clean in manager.had_clean_shutdown.items() if not clean]
        logger.info(
            "loaded %d partition logs%s",
            len(manager.logs),
            f" (recovered after an unclean shutdown: {', '.join(unclean)})"
            if unclean and manager.logs
            else "",
        )
        return manager

    def _dispatch(
        self, context: RequestContext, body: memoryview
    ) -> Awaitable[Segments | None] | None:
        """KafkaApis once caught up; until then requests wait (Kafka has not yet enabled
        request processing)."""
        if self._serving.is_set():
            return self.kafka_apis.dispatch(context, body)
        return self._dispatch_when_serving(context, bytes(body))

    async def _dispatch_when_serving(self, context: RequestContext, body: bytes) -> Segments | None:
        await self._serving.wait()
        return await self.kafka_apis.dispatch(context, memoryview(body))

    def _install_publisher(self) -> None:
        """Hand the image to the replica layer from now on, starting with all of it
        (``broker.metadata_publisher``: only after the initial catch-up, as Kafka does)."""
        assert self.publisher is not None
        self.publisher.install(self.loader.image)
        self.loader.add_listener(self._on_metadata)
        self.loader.before_publish = self._create_new_logs

    async def _create_new_logs(self, delta: MetadataDelta) -> None:
        """A delta's new logs, made off the event loop before it is published."""
        assert self.replica_manager is not None and self.log_manager is not None
        await create_new_logs(
            delta,
            broker_id=self.config.node_id,
            replica_manager=self.replica_manager,
            log_manager=self.log_manager,
            now_ms=self.clock.wall_clock_ms(),
        )

    def _on_metadata(self, delta: MetadataDelta, image: MetadataImage) -> None:
        assert self.publisher is not None
        self.publisher.publish(delta, image)

    async def _wait_until_running(self, heartbeats: BrokerLifecycleManager) -> None:
        await self._first_of(heartbeats.caught_up.wait())
        if self.lifecycle.state is BrokerState.RECOVERY:
            logger.info(
                "broker %d caught up with the metadata log at offset %d",
                self.config.node_id,
                self.loader.image.offset,
            )
            self._install_publisher()
            self._serving.set()
            heartbeats.set_ready_to_unfence()
            await self._first_of(heartbeats.unfenced.wait())
        if self.lifecycle.state is BrokerState.RUNNING:
            logger.info(
                "broker %d is RUNNING (broker epoch %d)",
                self.config.node_id,
                heartbeats.broker_epoch,
            )

    async def _first_of(self, awaitable: Awaitable[bool]) -> None:
        """Wait for ``awaitable`` unless a background task ends first (shutdown or a bug)."""
        waiter = asyncio.ensure_future(awaitable)
        await asyncio.wait([waiter, *self._tasks], return_when=asyncio.FIRST_COMPLETED)
        if not waiter.done():
            waiter.cancel()
        for task in self._tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise BrokerStartupError(f"{task.get_name()} failed: {task.exception()}")

    @property
    def background_tasks(self) -> tuple[asyncio.Task[None], ...]:
        return tuple(self._tasks)

    def _spawn(self, coroutine: Awaitable[None], name: str) -> None:
        self._tasks.append(asyncio.ensure_future(coroutine))
        self._tasks[-1].set_name(name)

    async def _halt_when_log_dirs_fail(self) -> None:
        """Kafka halts a broker whose every log dir failed (``handleLogDirFailure``): this
        task then ends with an error, which stops the broker (``broker.server_run``)."""
        await self._all_log_dirs_offline.wait()
        raise LogDirsOfflineError(f"every log dir is offline: {self.config.log_dirs}")

    async def _run_periodic(self) -> None:
        """The log manager's flushes, retention and checkpoints, on the wall clock."""
        while True:
            assert self.log_manager is not None
            now_ms = self.clock.wall_clock_ms()
            next_due_ms = self.log_manager.maybe_run_periodic(now_ms)
            await asyncio.sleep(
                min(PERIODIC_INTERVAL_MAX_S, max(0.0, (next_due_ms - now_ms) / 1000))
            )

    # ------------------------------------------------------------------ shutdown

    async def shutdown(self) -> None:
        """Controlled shutdown (if RUNNING), then stop everything; ends NOT_RUNNING."""
        if self.heartbeats is not None:
            was_running = self.lifecycle.state is BrokerState.RUNNING
            allowed = await self.heartbeats.controlled_shutdown(self.controlled_shutdown_timeout_s)
            if was_running:
                logger.info(
                    "broker %d: controlled shutdown %s",
                    self.config.node_id,
                    "complete" if allowed else "timed out",
                )
            self.heartbeats.stop()
            if self.heartbeat_thread is not None:  # its client closes before the process ends
                await self._bounded(self.heartbeat_thread.wait(), "stopping the heartbeats")
        else:
            self.lifecycle.maybe_begin_shutdown()
        if self.lifecycle.state is not BrokerState.SHUTTING_DOWN:
            self.lifecycle.become(BrokerState.SHUTTING_DOWN)
        self._stop_loader.set()
        self._serving.set()  # let held requests fail fast against closing listeners
        if self.log_cleaner is not None:  # before its logs close
            await self._bounded(self.log_cleaner.stop(), "stopping the log cleaner")
        for task in self._tasks:
            task.cancel()
        await self._bounded(
            asyncio.gather(*self._tasks, return_exceptions=True), "stopping the background tasks"
        )
        if self.coordinators is not None:  # waiting clients learn to look elsewhere
            for step, what in self.coordinators.shutdown_steps():
                await self._bounded(step, what)
        for listener in self.listeners:
            await self._bounded(listener.close(), f"closing listener {listener.listener_name}")
        if self.add_partitions_to_txn is not None:
            await self._bounded(
                self.add_partitions_to_txn.close(), "stopping transaction verification"
            )
        # Kafka's order: fetchers stop before the logs they append to close.
        if self.fetcher_manager is not None:
            await self._bounded(self.fetcher_manager.shutdown(), "stopping the replica fetchers")
        if self.replica_manager is not None:
            self.replica_manager.shutdown()
        await self._bounded(self.alter_partition.close(), "stopping AlterPartition requests")
        if self.log_manager is not None:
            # KIP-966: the marker holds this broker's epoch, sent back at the next registration.
            await asyncio.to_thread(self.log_manager.shutdown, self._broker_epoch())
        await self.producer_ids.close()
        await self.client.close()
        self.lifecycle.become(BrokerState.NOT_RUNNING)
        await self.http.close()
        logger.info("broker %d stopped", self.config.node_id)

    async def _bounded(self, awaitable: Awaitable[Any], what: str) -> None:
        """Await a shutdown step for at most ``SHUTDOWN_STEP_TIMEOUT_S``: a step that hangs
        must not keep the process (and its clean-shutdown marker) from finishing."""
        step = asyncio.ensure_future(awaitable)
        done, _ = await asyncio.wait({step}, timeout=SHUTDOWN_STEP_TIMEOUT_S)
        if not done:
            logger.warning(
                "broker %d: %s took over %.0fs; going on without it",
                self.config.node_id,
                what,
                SHUTDOWN_STEP_TIMEOUT_S,
            )
            step.cancel()
