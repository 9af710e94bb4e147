"""Kafka's classic group coordinator: consumer groups and their committed offsets.

Pure cores (no I/O, no clock: every call takes ``now_ms``):

  state.py        one group: ``GroupState`` (EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE,
                  STABLE, DEAD) and its legal transitions, members, protocol selection
  rebalance.py    the rebalance protocol over one group: joins, generations, assignments, timers
  manager.py      ``GroupMetadataManager``: which ``__consumer_offsets`` partitions this broker
                  coordinates (loading / active), the groups in them, writes and timers
  coordinator.py  ``GroupCoordinator``: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
                  OffsetCommit, TxnOffsetCommit, OffsetFetch, DescribeGroups, ListGroups
  deletion.py     ``GroupDeletion``: DeleteGroups and OffsetDelete, their tombstones, and the
                  offset expiry task (KIP-211) that writes the same
  expiration.py   which committed offsets have expired (``removeExpiredOffsets``)
  static_members.py  static membership (KIP-345): instance ids, replacement, fencing
  commits.py      ``OffsetCommits``: OffsetCommit and TxnOffsetCommit into the coordinator
  consumer_protocol.py  the topics a consumer group subscribes to (OffsetDelete keeps them)
  offsets.py      offset commit validation, the records to write, OffsetFetch (KIP-447's
                  require_stable), replay of a partition's log (transactions included)
  transactions.py transactional offset commits (KIP-98): validation, which groups hold which
                  producer's pending offsets, the sequence of their batches
  views.py        what DescribeGroups and ListGroups show
  records.py      the ``__consumer_offsets`` key and value formats (Kafka's, byte for byte)
  effects.py      what a call returns: answers by request id, records to append

Shells (asyncio):

  loader.py       reads a ``__consumer_offsets`` partition's log back as records
  shell.py        ``GroupCoordinatorShell``: request futures, the timer, loading/unloading on
                  leadership changes, transaction completion (WriteTxnMarkers)
  writer.py       ``OffsetsWriter``: appends to ``__consumer_offsets`` (acks=-1)
  replicas.py     ``Replicas``: the part of the broker's ``ReplicaManager`` the shell is handed
"""
