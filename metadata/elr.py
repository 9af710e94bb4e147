"""KIP-966's ``eligible.leader.replicas.version`` feature, as brokers and controllers read it.

Level 1 turns eligible leader replicas on: controllers keep each partition's ELR and
LastKnownElr (``quorum/managers/elr.py``). Leaders hold their high watermark while the ISR is
smaller than min ISR at every level (``replica/partition_state.py``, Kafka 3.7+). Both sides
support levels 0-1 (Kafka's ``EligibleLeaderReplicasVersion``); brokers register that range.
"""

from __future__ import annotations

from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import BrokerFeature

ELR_FEATURE = "eligible.leader.replicas.version"
ELR_MIN_LEVEL, ELR_MAX_LEVEL = 0, 1
# What a broker registers (BrokerRegistrationRequest.Features).
ELR_BROKER_FEATURE = BrokerFeature(
    name=ELR_FEATURE, min_supported_version=ELR_MIN_LEVEL, max_supported_version=ELR_MAX_LEVEL
)


def elr_enabled(image: MetadataImage) -> bool:
    """Kafka's ``isElrEnabled``: the feature's finalized level is at least 1."""
    return image.features.get(ELR_FEATURE, 0) >= 1
