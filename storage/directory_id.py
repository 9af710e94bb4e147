"""A log dir's ``directory.id`` (KIP-858): the Kafka uuid naming the dir to the controller.

Kafka keeps it in each log dir's ``meta.properties`` (version 1) and its
``MetaPropertiesEnsemble`` adds one to a dir that has none at start-up. When a dir fails, the
broker's heartbeat names it by this id (``OfflineLogDirs``). A dir without ``meta.properties``
(unit tests, tools that open logs directly) gets an id for this process only.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from pykraft.storage.atomic_file import write_atomically

META_PROPERTIES = "meta.properties"
DIRECTORY_ID_PROPERTY = "directory.id"
# meta.properties is a handful of lines; anything larger is not one.
META_PROPERTIES_MAX_BYTES = 64 * 1024


def new_directory_id() -> str:
    """Kafka's ``DirectoryId.random()`` in its text form (URL-safe base64, no padding); a
    version-4 uuid is never one of the reserved ids below 100."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


def ensure_directory_id(log_dir: Path) -> str:
    """The ``directory.id`` of ``log_dir``'s ``meta.properties``, added when missing; a fresh
    id for this process when the dir has no ``meta.properties``. Raises ``OSError``."""
    path = log_dir / META_PROPERTIES
    try:
        with path.open("rb") as file:
            text = file.read(META_PROPERTIES_MAX_BYTES).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return new_directory_id()
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == DIRECTORY_ID_PROPERTY and value.strip():
            return value.strip()
    directory_id = new_directory_id()
    ending = "" if text.endswith("\n") or not text else "\n"
    write_atomically(path, f"{text}{ending}{DIRECTORY_ID_PROPERTY}={directory_id}\n".encode())
    return directory_id
