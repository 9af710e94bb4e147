"""What a heartbeat says about failed log dirs (KIP-858), apart so that both the storage side
(``broker.offline_storage``) and the controller client can name it without an import cycle."""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class OfflineLogDirs:
    """KIP-858 ``OfflineLogDirs`` (directory ids) and, since pykraft's partition records carry
    no ``Directories``, the broker's replicas on those dirs as (topic id, partition)."""

    directory_ids: tuple[str, ...] = ()
    replicas: tuple[tuple[str, int], ...] = ()


NO_OFFLINE_LOG_DIRS = OfflineLogDirs()
