"""What the group coordinator's shell needs from the broker's replica layer, and no more.

The coordinator sits below ``broker`` (``coordinator`` never imports ``broker``), so the shell
is handed the broker's ``ReplicaManager`` typed as this protocol: append a batch to a
``__consumer_offsets`` partition with acks=-1, and find a partition this broker leads to load it.
Kafka draws the same line for its newer coordinators: ``CoordinatorPartitionWriter`` wraps the
``ReplicaManager`` behind the ``PartitionWriter`` interface (coordinator-common runtime), and the
loader reads the partition's log (``CoordinatorLoaderImpl``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from pykraft.protocol.errors import Errors
from pykraft.storage.log_validator import AppendOrigin
from pykraft.storage.topic_partition import TopicPartition

if TYPE_CHECKING:  # a type only: the protocol itself stays pure
    from pykraft.storage.partition_log import PartitionLog


class AppendOutcome(Protocol):
    """One partition's append result (Kafka's ``PartitionResponse``)."""

    @property
    def error(self) -> Errors: ...

    @property
    def base_offset(self) -> int: ...


class HostedPartition(Protocol):
    """A partition this broker hosts: its role and epoch, and its log to load from."""

    @property
    def is_leader(self) -> bool: ...

    @property
    def leader_epoch(self) -> int: ...

    @property
    def log(self) -> PartitionLog: ...


class Replicas(Protocol):
    """The broker's replica layer as the shell uses it (``ReplicaManager`` in production)."""

    async def append_records(
        self,
        entries: Mapping[TopicPartition, bytearray],
        *,
        required_acks: int,
        timeout_ms: int,
        now_ms: int,
        internal_topics_allowed: bool = False,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> Mapping[TopicPartition, AppendOutcome]: ...

    def get_partition(self, topic_partition: TopicPartition) -> HostedPartition | None: ...
