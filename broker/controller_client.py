"""The broker's (and the admin tools') client of the controller quorum's HTTP API.

``ControllerClient`` is one retrying transport (``controller_transport.py``: picking a
controller, NOT_CONTROLLER redirects, back-off, TLS client certificates and HTTP Basic, every
failure as ``broker.controller_api.ControllerError``) with two families of route methods over it:
the broker's own RPCs (``controller_broker_rpcs.py``: register, heartbeat, the metadata log,
AlterPartition, producer ids) and the operators' and admin handlers' calls
(``controller_admin_calls.py``: topics, configs, cluster, ACLs, SCRAM). It satisfies the admin
handlers' ``ControllerClient`` protocol (``controller_api.py``); one per process, closed with
``close``.

This module is where callers import it from, with the answer types the broker reads.
"""

from __future__ import annotations

from pykraft.broker.controller_admin_calls import AdminCalls
from pykraft.broker.controller_broker_rpcs import BrokerRpcs
from pykraft.broker.controller_transport import (
    ControllerRequestError,
    SnapshotRequiredError,
    decode_answer,
    error_body_of,
    normalize_url,
)
from pykraft.metadata.api.brokers import BrokerHeartbeatResponse as HeartbeatReply
from pykraft.metadata.api.brokers import BrokerRegistrationReply
from pykraft.metadata.api.errors import SnapshotRef
from pykraft.metadata.api.records import MetadataBatch, RecordsPage
from pykraft.metadata.api.topics import PartitionDescription, TopicDescription, TopicListing

# The answers' types are the contract's (``metadata/api``); these names are what the broker
# imports.
__all__ = [
    "BrokerRegistrationReply",
    "ControllerClient",
    "ControllerRequestError",
    "HeartbeatReply",
    "MetadataBatch",
    "PartitionDescription",
    "RecordsPage",
    "SnapshotRef",
    "SnapshotRequiredError",
    "TopicDescription",
    "TopicListing",
    "decode_answer",
    "error_body_of",
    "normalize_url",
]


class ControllerClient(BrokerRpcs, AdminCalls):
    """aiohttp client of the controllers' ``/v1`` API; one per process, closed with ``close``."""
