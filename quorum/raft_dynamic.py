"""A dynamic quorum's Raft (KIP-853, kraft.version 1) and the choice between the two modes.

Kafka 3.9 changes voters only when the quorum was formatted for it (``kafka-storage format
--standalone`` / ``--initial-controllers``: kraft.version 1; ``KafkaRaftClient`` and
``AddVoterHandler`` / ``RemoveVoterHandler`` answer UNSUPPORTED_VERSION at kraft.version 0).
pykraft's equivalent is the configuration (``quorum/config.py``'s ``kraft_version``):

* ``controller.quorum.voters`` — static: ``MetadataRaft`` with pysyncobj's static membership and
  no hooks, exactly as before KIP-853;
* ``controller.quorum.bootstrap.servers`` — dynamic: ``DynamicMetadataRaft``, pysyncobj's
  dynamic membership with ``quorum/raft_voter_hooks.py``; the founding voters come from
  ``pykraft.quorum.initial.controllers``, any other controller starts as an observer.

pysyncobj's own utility commands (``syncobj_admin -add/-remove/-set_version``) are refused in the
dynamic mode: voters change only through AddRaftVoter / RemoveRaftVoter and their checks.
"""

from __future__ import annotations

from collections.abc import Callable

from pykraft.quorum.commit_trace import CommitTrace, traced_class
from pykraft.quorum.config import ControllerConfig
from pykraft.quorum.raft import MetadataRaft, RaftListener
from pykraft.quorum.raft_dump import DumpHeader
from pykraft.quorum.raft_voter_hooks import RaftVoterHooks
from pykraft.quorum.raft_voters import uncommitted_voter_sets

# pysyncobj's utility commands that would change the cluster or its code version.
REFUSED_UTILITY_COMMANDS = ("add", "remove", "set_version")


class DynamicMetadataRaft(RaftVoterHooks, MetadataRaft):
    DYNAMIC_MEMBERSHIP = True

    def __init__(
        self, config: ControllerConfig, listener: RaftListener, *, wall_clock_ms: Callable[[], int]
    ) -> None:
        super().__init__(config, listener, wall_clock_ms=wall_clock_ms)
        transport = self._SyncObj__transport
        for command in REFUSED_UTILITY_COMMANDS:
            transport.setOnUtilityMessageCallback(command, self._deny_utility_command)

    def _tick_callbacks(self) -> list[Callable[[], None]]:
        # The voter set settles before anything else reads it (_drain_calls answers readers).
        return [
            self._settle_voters_after_replay,
            self._hold_elections_while_observer,
            *super()._tick_callbacks(),
        ]

    def _members_from_dump(self, header: DumpHeader) -> list[str]:
        others = self.membership.handle_dump(header.voter_set)
        if not self._voters_settled:
            # This node's own dump at start-up: pysyncobj keeps the journal that follows it
            # (its first two entries are the dump's), whose membership entries come after the
            # dump's committed set at once — no tick runs with the dump's set alone.
            journal = self._SyncObj__raftLog
            prev_entry, last_entry = header.prev_entry.as_tuple(), header.last_entry.as_tuple()
            if len(journal) >= 2 and journal[0] == prev_entry and journal[1] == last_entry:
                self._voters_settled = True
                self.membership.handle_journal(
                    uncommitted_voter_sets(journal, header.last_entry.index)
                )
                others = self.membership.members()
        return others


def open_metadata_raft(
    config: ControllerConfig,
    listener: RaftListener,
    *,
    wall_clock_ms: Callable[[], int],
    trace: CommitTrace | None = None,
) -> MetadataRaft:
    """The Raft of ``config``'s mode: static (kraft.version 0) or dynamic (1); with ``trace``,
    timing every commit's hand-offs (``quorum/commit_trace.py``)."""
    raft_class: type[MetadataRaft] = (
        DynamicMetadataRaft if config.kraft_version == 1 else MetadataRaft
    )
    if trace is not None:
        raft_class = traced_class(raft_class, trace)
    return raft_class(config, listener, wall_clock_ms=wall_clock_ms)
