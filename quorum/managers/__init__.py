"""The controller's managers: pure functions from (image, request, now_ms) to records + response.

``cluster`` (broker registration, heartbeats, fencing, controlled shutdown), ``replication``
(topics and partitions), ``leadership`` (AlterPartition and leader elections),
``partition_change`` (Kafka's ``PartitionChangeBuilder``), ``configs``, ``producer_ids``,
``acls`` (Kafka's ``AclControlManager``), ``scram`` (``ScramControlManager``) and
``client_quotas`` (``ClientQuotaControlManager``).
``quorum.controller.QuorumController`` ties them together; nothing here does I/O, reads a clock
or draws randomness of its own.
"""
