"""Kafka's classic group coordinator: consumer groups and their committed offsets.

Pure cores (no I/O, no clock: every call takes ``now_ms``):

  state.py        one group: ``GroupState`` (EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE,
                  STABLE, DEAD) and its legal transitions, members, protocol selection
  rebalance.py    the rebalance protocol over one group: joins, generations, assignments, timers
  manager.py      ``GroupMetadataManager``: which ``__consumer_offsets`` partitions this broker
                  coordinates (loading / active), the groups in them, writes and timers
  coordinator.py  ``GroupCoordinator``: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
                  OffsetCommit, OffsetFetch, DescribeGroups, ListGroups
  offsets.py      offset commit validation, the records to write, replay of a partition's log
  records.py      the ``__consumer_offsets`` key and value formats (Kafka's, byte for byte)
  effects.py      what a call returns: answers by request id, records to append

Shells (asyncio):

  loader.py       reads a ``__consumer_offsets`` partition's log back as records
  shell.py        ``GroupCoordinatorShell``: request futures, the timer, appends through
                  the broker's replica layer (acks=-1), loading/unloading on leadership changes
  replicas.py     ``Replicas``: the part of the broker's ``ReplicaManager`` the shell is handed
"""
