"""Kafka's transaction coordinator: transactional ids, their producer ids and epochs, and the
two-phase commit of their transactions (KIP-98), over ``__transaction_state``.

Pure cores (no I/O, no clock: every call takes ``now_ms``):

  state.py             ``TransactionState`` (Empty, Ongoing, PrepareCommit, PrepareAbort,
                       CompleteCommit, CompleteAbort, Dead, PrepareEpochFence) and its legal
                       transitions
  metadata.py          ``TransactionMetadata``: one id's producer id, epochs, partitions,
                       timestamps, and the prepare / complete discipline of its transitions
  records.py           the ``__transaction_state`` key and value formats (Kafka's, byte for byte)
  config.py            ``TransactionConfig`` (``transaction.*``), placement, topic configs
  manager.py           ``TransactionStateManager``: which partitions this broker coordinates
                       (loading / active), the ids in them, writes, timeouts, expiration
  writes.py            why each write was made, and the append-error mapping
  coordinator.py       ``TransactionCoordinator``: InitProducerId, AddPartitionsToTxn (and
                       KIP-890 verification), AddOffsetsToTxn, EndTxn, Describe/ListTransactions
  init_producer_id.py  InitProducerId's decisions (epoch bumps, fencing, KIP-360)
  end_txn.py           EndTxn and the coordinator's own aborts (fencing, timeouts)
  markers.py           WriteTxnMarkers in flight, their retries, and the completion append
  replay.py            replay of a partition's log into the ids it holds
  effects.py           what a call returns: answers, appends, markers to send

Shells (asyncio):

  loader.py            reads a ``__transaction_state`` partition back (``coordinator.log_reader``)
  shell.py             ``TransactionCoordinatorShell``: request futures, the timer, appends through
                       the broker's replica layer (acks=-1), loading on leadership changes
  marker_sender.py     ``TxnMarkerChannel`` (what the broker provides) and the sending of markers
"""
