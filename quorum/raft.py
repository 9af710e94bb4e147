"""MetadataRaft: the replicated, ordered metadata log on pysyncobj (DESIGN.md §3.1).

Theory of operation
-------------------
One ``MetadataRaft`` per controller process. pysyncobj runs Raft on its own thread (the "Raft
thread"): elections, AppendEntries, the journal, and the calls of ``apply_batch`` for committed
entries, in Raft-index order. The asyncio thread talks to it three ways only:

* ``propose(blob, on_result)`` enqueues one atomic batch (``quorum.raft_batch`` bytes). Its
  outcome (an ``ApplyResult``, or a pysyncobj failure code) comes back on the Raft thread;
  the caller hands it to its event loop with ``call_soon_threadsafe``.
* ``RaftListener`` callbacks, on the Raft thread, for every applied batch and every state loaded
  from a dump, in order; the service forwards them to the loop the same way.
* ``call_in_raft_thread(fn)`` runs ``fn`` between two ticks (pysyncobj's status dicts are not
  safe to read from another thread).

Sharp edges of pysyncobj and what we do about each:
* ``apply_batch`` never raises and is deterministic: all the logic is ``raft_state.apply_entry``
  (pure); listener errors are logged, never propagated.
* pickle only wraps ``bytes``: the blob is our own format. Every frame between controllers is
  encrypted and authenticated with ``password`` (Fernet); a frame that fails authentication is
  dropped before it is unpickled. pysyncobj buffered any frame before that check (a 2 GiB
  length prefix was honoured): ``quorum.raft_transport.GuardedTransport`` bounds frame size,
  buffered bytes and time to authenticate, and makes large authenticated frames linear to read.
* ``journalFile`` and ``fullDumpFile`` are always set; the dump is our own format
  (``quorum.raft_dump``) via ``serializer``/``deserializer``, written off the Raft thread by
  ``quorum.raft_serializer.BackgroundSerializer``, fsync'd (file and directory) before pysyncobj
  may truncate the journal.
* Durability: pysyncobj writes the journal through ``mmap`` and never msyncs it. With
  ``controller.quorum.fsync`` (default) ``quorum/raft_journal.py`` syncs it (group commit)
  before the leader counts an entry towards commit and before a follower acknowledges it, as
  KRaft does; off, a committed entry survives ``kill -9`` but not a power loss of a majority.
  The dump and checkpoints are always fsync'd.
* Writes are proposed only on the leader; the service checks ``is_leader`` and answers
  NOT_CONTROLLER otherwise (pysyncobj would silently forward a follower's proposal).
* Voters (KIP-853): a static quorum (``controller.quorum.voters``, kraft.version 0) runs with
  ``dynamicMembershipChange=False`` and no hooks, exactly as before KIP-853: AddRaftVoter /
  RemoveRaftVoter answer UNSUPPORTED_VERSION as Kafka 3.9's do. Only a dynamic quorum
  (``controller.quorum.bootstrap.servers``, kraft.version 1; ``quorum/config.py``) gets
  ``quorum/raft_dynamic.DynamicMetadataRaft``, pysyncobj's dynamic membership and the hooks of
  ``quorum/raft_voter_hooks.py``; ``open_metadata_raft`` picks the class from the config.
* Latency: ``appendEntriesUseBatch=True`` (the mode that never showed "truncating
  already-applied log entries"), ``autoTickPeriod`` = pykraft.raft.tick.ms, and
  ``quorum/raft_prompt.py``: a proposal wakes the Raft thread and goes to the followers in the
  tick that appends it (after controller.quorum.append.linger.ms, default 0);
  ``appendEntriesPeriod`` is only an idle leader's heartbeat. See bench/quorum.py.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import attrs
from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated

from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import MetadataRecord
from pykraft.metadata.snapshot import load_snapshot
from pykraft.quorum.config import ControllerConfig
from pykraft.quorum.metadata_view import ResultCallback
from pykraft.quorum.raft_dump import DumpHeader, RaftEntry, read_dump, write_dump
from pykraft.quorum.raft_journal import DurableJournalMixin
from pykraft.quorum.raft_prompt import PromptAppendMixin, heartbeat_period_s
from pykraft.quorum.raft_serializer import BackgroundSerializer
from pykraft.quorum.raft_state import Applied, ApplyResult, ApplyStatus, MetadataState, apply_entry
from pykraft.quorum.raft_transport import GuardedTransport, cluster_key
from pykraft.quorum.raft_voters import RaftMembership
from pykraft.quorum.snapshots import SnapshotStore
from pykraft.quorum.voter_changes import Voter, VoterChangeKind, VoterSet

logger = logging.getLogger(__name__)

# Bounds (STYLE.md §7).
MAX_PENDING_PROPOSALS = 10_000
MAX_PENDING_CALLS = 1_000
# Decoded records of this node's own recent proposals, so the leader skips decoding them.
MAX_REMEMBERED_PROPOSALS = 64
# A restarted controller may find its port in TIME_WAIT briefly: retry for about 5 s.
BIND_RETRY_S = 0.25
MAX_BIND_RETRIES = 20
DUMP_FILE_NAME = "dump.bin"
JOURNAL_FILE_NAME = "journal.bin"
# Chunk size of a dump sent to a follower that fell behind the leader's journal.
LOG_COMPACTION_BATCH_BYTES = 1 << 20


class RaftBindError(RuntimeError):
    """The Raft port could not be bound."""


class RaftListener(Protocol):
    """Receives, on the Raft thread and in order, everything that changes the state machine."""

    def handle_applied(self, applied: Applied) -> None: ...

    def handle_state_loaded(self, state: MetadataState) -> None: ...

    def handle_snapshot_written(self, end_offset: int) -> None: ...


def describe_failure(code: int) -> str:
    names = {value: name for name, value in vars(FAIL_REASON).items() if name.isupper()}
    return str(names.get(code, f"FAIL_REASON {code}"))


class MetadataRaft(PromptAppendMixin, DurableJournalMixin, SyncObj):  # type: ignore[misc]
    """A static quorum's Raft (kraft.version 0); ``DynamicMetadataRaft`` adds KIP-853."""

    # pysyncobj's dynamicMembershipChange; True only in quorum/raft_dynamic.py.
    DYNAMIC_MEMBERSHIP = False

    def __init__(
        self, config: ControllerConfig, listener: RaftListener, *, wall_clock_ms: Callable[[], int]
    ) -> None:
        assert (config.kraft_version == 1) == self.DYNAMIC_MEMBERSHIP, "use open_metadata_raft"
        raft_dir = config.metadata_log_dir / "raft"
        raft_dir.mkdir(parents=True, exist_ok=True)
        self._config = config
        self._listener = listener
        # Dates the snapshots it writes (their header's created time).
        self._wall_clock_ms = wall_clock_ms
        self._raft_dir = raft_dir
        self.snapshots = SnapshotStore(
            config.metadata_log_dir / "snapshots", config.retained_snapshots
        )
        # Set before SyncObj.__init__: its Raft thread may apply entries right away.
        self._state = MetadataState()
        self._dumped_state = self._state
        # next_offset of the last snapshot taken or loaded (drives snapshot-every-N-records).
        self._snapshot_offset = 0
        self._calls: list[tuple[Callable[[], Any], concurrent.futures.Future[Any]]] = []
        self._calls_lock = threading.Lock()
        self._proposed: dict[bytes, tuple[MetadataRecord, ...]] = {}
        self.fatal_error: str | None = None
        self._voters_settled = False
        self_address = str(config.self_raft_address)
        # The voter set (quorum/raft_voters.py): its base is pysyncobj's initial member list.
        self.membership = RaftMembership(config, raft_dir)
        others = list(self.membership.initial_others)
        self._init_durability(config.fsync, raft_dir / JOURNAL_FILE_NAME, config.durable_images)
        self._init_prompt_append(config.append_linger_ms)
        super().__init__(
            self_address, others, self._sync_obj_conf(config), transportClass=GuardedTransport
        )
        # The one reach into pysyncobj's internals: write dumps off the Raft thread (see
        # quorum/raft_serializer.py). Assigning an attribute is atomic; until it happens the
        # synchronous hooks below do the same work.
        self._SyncObj__serializer = BackgroundSerializer(
            str(raft_dir / DUMP_FILE_NAME),
            LOG_COMPACTION_BATCH_BYTES,
            self._prepare_dump,
            self._write_dump,
            self._deserialize,
        )
        for callback in self._tick_callbacks():
            self.addOnTickCallback(callback)
        try:
            self.waitBinded()
        except Exception:
            self.destroy_synchronous()
            raise RaftBindError(
                f"cannot listen on the Raft address {self_address} (node {config.node_id}'s "
                "controller.quorum.voters entry or RAFT listener): is another process using "
                "the port?"
            ) from None

    def _tick_callbacks(self) -> list[Callable[[], None]]:
        """Run by pysyncobj at the end of every tick, in this order."""
        return [self._drain_calls, self._send_new_entries]

    def _sync_obj_conf(self, config: ControllerConfig) -> SyncObjConf:
        election_s = config.election_timeout_ms / 1000
        return SyncObjConf(
            # Salted per cluster (raft_transport.cluster_key), then pysyncobj's own derivation.
            password=cluster_key(config.quorum_password, config.cluster_id),
            journalFile=str(self._raft_dir / JOURNAL_FILE_NAME),
            fullDumpFile=str(self._raft_dir / DUMP_FILE_NAME),
            serializer=self._serialize_in_raft_thread,
            deserializer=self._deserialize,
            appendEntriesUseBatch=True,
            appendEntriesPeriod=heartbeat_period_s(config.election_timeout_ms),
            autoTickPeriod=config.raft_tick_ms / 1000,
            raftMinTimeout=election_s,
            raftMaxTimeout=2 * election_s,
            connectionTimeout=max(config.fetch_timeout_ms / 1000, 2 * election_s),
            connectionRetryTime=min(0.5, election_s / 2),
            leaderFallbackTimeout=max(config.fetch_timeout_ms / 1000, 2 * election_s),
            commandsQueueSize=MAX_PENDING_PROPOSALS,
            # Proposals are made on the leader only; never park them waiting for one.
            commandsWaitLeader=False,
            # Snapshots are forced every snapshot_interval_records records (_maybe_snapshot);
            # pysyncobj's own trigger counts Raft entries, which may hold thousands of records.
            logCompactionMinEntries=max(2, config.snapshot_interval_records),
            logCompactionMinTime=max(1, config.snapshot_interval_ms // 1000),
            appendEntriesBatchSizeBytes=1 << 20,
            logCompactionBatchSize=LOG_COMPACTION_BATCH_BYTES,
            # KIP-853 voter changes (quorum/raft_dynamic.py): a dynamic quorum only.
            dynamicMembershipChange=self.DYNAMIC_MEMBERSHIP,
            # Bind exactly the configured host (pysyncobj would bind 0.0.0.0).
            bindAddress=str(config.self_raft_address),
            bindRetryTime=BIND_RETRY_S,
            maxBindRetries=MAX_BIND_RETRIES,
        )

    # ---- the replicated state machine (Raft thread) ----

    @replicated  # type: ignore[untyped-decorator]
    def apply_batch(self, blob: bytes) -> ApplyResult:
        raft_index = self.raftLastApplied + 1
        try:
            decoded = self._proposed.pop(blob, None) if isinstance(blob, bytes) else None
            applied = apply_entry(self._state, raft_index, blob, decoded)
        except Exception as error:  # apply_entry never raises; belt and braces for pysyncobj
            logger.critical("apply_entry raised at raft index %d: %r", raft_index, error)
            return ApplyResult(status=ApplyStatus.INVALID, message=f"internal error: {error}")
        self._state = applied.state
        try:
            self._listener.handle_applied(applied)
        except Exception:
            logger.exception("metadata listener failed on raft index %d", raft_index)
        if (
            applied.state.next_offset - self._snapshot_offset
            >= self._config.snapshot_interval_records
        ):
            self._snapshot_offset = applied.state.next_offset  # ask once per interval
            self.forceLogCompaction()
        return applied.result

    @property
    def state(self) -> MetadataState:
        """The latest applied state (an immutable value; safe to read from any thread)."""
        return self._state

    # ---- proposals and queries (any thread) ----

    def propose(
        self,
        blob: bytes,
        on_result: ResultCallback,
        records: tuple[MetadataRecord, ...] | None = None,
    ) -> None:
        """Enqueue ``blob``; ``on_result(result, fail_reason)`` runs on the Raft thread.

        ``records``: the records encoded in ``blob``, kept so applying it skips decoding.
        """
        if records is not None:
            while len(self._proposed) >= MAX_REMEMBERED_PROPOSALS:
                self._proposed.pop(next(iter(self._proposed)), None)
            self._proposed[blob] = records
        self.apply_batch(blob, callback=on_result)
        self._wake_raft_thread()

    def is_leader(self) -> bool:
        return bool(self._isLeader())

    def leader_address(self) -> str | None:
        leader = self._getLeader()
        return None if leader is None else str(leader.address)

    @property
    def voter_set(self) -> VoterSet:
        """The voters as this node's log has them (committed or not); any thread."""
        return self.membership.voter_set

    def voter_change_state(self) -> tuple[bool, bool]:
        """Raft thread: (has the leader applied its term's first entry — Kafka's known high
        watermark; is the last membership change applied). pysyncobj refuses a change
        otherwise (``SyncObj.__changeCluster``); these let the refusal carry Kafka's reason."""
        last_applied = int(self.raftLastApplied)
        noop_index = self._SyncObj__noopIDx
        change_index = self._SyncObj__changeClusterIDx
        return (
            noop_index is not None and last_applied >= noop_index,
            change_index is None or last_applied >= change_index,
        )

    def propose_voter_change(
        self, kind: VoterChangeKind, voter: Voter, new_set: VoterSet, on_result: ResultCallback
    ) -> None:
        """Only a dynamic quorum changes voters (``DynamicMetadataRaft``); a static one's
        requests are refused before (``voter_changes`` answers UNSUPPORTED_VERSION)."""
        raise AssertionError("a static quorum (kraft.version 0) never changes its voters")

    def call_in_raft_thread(self, function: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._calls_lock:
            if len(self._calls) >= MAX_PENDING_CALLS:
                future.set_exception(RuntimeError("too many pending calls to the Raft thread"))
                return future
            self._calls.append((function, future))
        return future

    def _drain_calls(self) -> None:
        with self._calls_lock:
            calls, self._calls = self._calls, []
        for function, future in calls:
            # A caller that gave up cancelled its future: skip it (set_result would raise).
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(function())
            except Exception as error:
                future.set_exception(error)

    # ---- snapshots: pysyncobj's serializer hooks ----

    def _prepare_dump(self, data: Any) -> DumpHeader:
        """Raft thread: capture the state as of the entries in ``data`` (last, previous,
        nodes). The image is immutable, so the background writer sees exactly this state."""
        last_entry, prev_entry, _ = data
        state = self._state
        committed = self.membership.committed
        self._dumped_state = state
        self._snapshot_offset = state.next_offset
        return DumpHeader(
            next_offset=state.next_offset,
            last_raft_index=state.last_raft_index,
            epoch=state.image.epoch,
            last_entry=RaftEntry.from_tuple(last_entry),
            prev_entry=RaftEntry.from_tuple(prev_entry),
            # The committed voter set at the dump's last entry (Kafka: the snapshot's
            # voterSetAtOffset), never pysyncobj's live members, which may hold an uncommitted
            # change that a new leader truncates.
            voters=tuple(sorted(str(v.raft_address) for v in committed.voters)),
            checkpoint_name=None,
            checkpoint_size=0,
            voter_set=committed.voters,
            dynamic_voters=self.DYNAMIC_MEMBERSHIP,
        )

    def _write_dump(self, path: Path, header: DumpHeader) -> None:
        """Dump-writer thread: the checkpoint for brokers, then the dump that embeds it."""
        image = self._dumped_state.image
        checkpoint = None
        if image.offset >= 0:
            checkpoint = self.snapshots.write(image, self._wall_clock_ms())
            header = attrs.evolve(
                header, checkpoint_name=checkpoint.name, checkpoint_size=checkpoint.stat().st_size
            )
        write_dump(path, header, checkpoint)
        if checkpoint is not None:
            self._listener.handle_snapshot_written(header.next_offset)
        self.snapshots.prune()

    def _serialize_in_raft_thread(self, temp_file: str, data: Any) -> None:
        """pysyncobj's synchronous hook, used only until BackgroundSerializer is installed."""
        self._write_dump(Path(temp_file), self._prepare_dump(data))

    def _deserialize(self, file_name: str) -> tuple[Any, Any, Any]:
        try:
            header, checkpoint_bytes = read_dump(Path(file_name))
            image = MetadataImage.EMPTY
            if header.checkpoint_name is not None:
                path = self.snapshots.ensure(header.checkpoint_name, checkpoint_bytes)
                image = load_snapshot(path)
            if image.offset != header.next_offset - 1:
                raise ValueError(
                    f"checkpoint ends at offset {image.offset}, the dump at "
                    f"{header.next_offset - 1}"
                )
        except Exception as error:
            # pysyncobj would log and carry on from a journal that no longer starts at 1, which
            # wedges the node silently; record the error so the process exits loudly instead.
            self.fatal_error = f"cannot load the metadata dump {file_name}: {error}"
            logger.critical(self.fatal_error)
            raise
        self._state = MetadataState(
            image=image, next_offset=header.next_offset, last_raft_index=header.last_raft_index
        )
        self._snapshot_offset = header.next_offset
        try:
            self._listener.handle_state_loaded(self._state)
        except Exception:
            logger.exception("metadata listener failed on a loaded snapshot")
        others = self._members_from_dump(header)
        return (header.last_entry.as_tuple(), header.prev_entry.as_tuple(), others)

    def _members_from_dump(self, header: DumpHeader) -> list[str]:
        """The other members pysyncobj takes from a loaded dump; a static quorum's pysyncobj
        ignores them (dynamicMembershipChange=False)."""
        return list(self.membership.initial_others)

    def image(self) -> MetadataImage:
        return self._state.image
