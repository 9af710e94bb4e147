"""The lock one export run holds on its output (``LOCK_FILE``, see ``export.export_topic_job``).

The lock file names the driver attempt, since when, and where it runs (host and process id), so
a run that finds it says whether the holder is alive: on the same host the process id is asked
(``holder_alive``); on another host it cannot be, and the message says how to tell. A run
releases its lock however it ends (``release_lock``), and a failure to release never hides the
error that ended the run.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pykraft.export.manifest import LOCK_FILE

if TYPE_CHECKING:
    from pykraft.export.output_store import OutputStore


def lock_text(attempt: str, now_ms: int, host: str | None = None, pid: int | None = None) -> bytes:
    """What ``LOCK_FILE`` holds: which driver attempt runs, since when, and where (host and
    process id), so a run that finds it can say whether its holder is still alive."""
    document: dict[str, Any] = {"attempt": attempt, "sinceMs": now_ms}
    if host is not None and pid is not None:
        document |= {"host": host, "pid": pid}
    return (json.dumps(document) + "\n").encode("utf-8")


def lock_holder(holder: bytes | None) -> tuple[str, int] | None:
    """The host and process id a lock names; None if it names none (or is unreadable)."""
    try:
        document = json.loads(holder or b"")
        return str(document["host"]), int(document["pid"])
    except (ValueError, KeyError, TypeError):
        return None


def locked_message(out_dir: str, holder: bytes | None, holder_alive: bool | None = None) -> str:
    """Why a run cannot start: another run's lock, and what an operator does if it is stale.
    ``holder_alive``: whether the process the lock names runs (None: not known, e.g. it ran on
    another host)."""
    try:
        document = json.loads(holder or b"")
        since = datetime.datetime.fromtimestamp(int(document["sinceMs"]) / 1000, datetime.UTC)
        who = f"export-topic attempt {document['attempt']} since {since:%Y-%m-%d %H:%M:%S} UTC"
    except (ValueError, KeyError, TypeError, OverflowError):
        who = f"an unreadable lock ({holder!r:.80})"
    where = lock_holder(holder)
    if where is not None:
        who += f" on host {where[0]}, pid {where[1]}"
    stale = (
        f"delete {LOCK_FILE} and run again (the next run finishes or discards what the killed "
        "one left)"
    )
    if holder_alive is False:
        return (
            f"{out_dir}/{LOCK_FILE} is held by {who}, and no process {where and where[1]} runs "
            f"on that host: that run was killed and left its lock. If no other export-topic "
            f"driver is alive for {out_dir}, {stale}"
        )
    if holder_alive:
        return (
            f"{out_dir}/{LOCK_FILE} is held by {who}, and process {where and where[1]} is "
            "running on that host: another export-topic run on this output is running (unless "
            "that process id was reused since); wait for it to end"
        )
    return (
        f"{out_dir}/{LOCK_FILE} is held by {who}: another export-topic run on this output "
        "is running, or one was killed and left its lock. If no export-topic driver is alive "
        f"for {out_dir}, {stale}"
    )


def takeover_claim(holder: bytes | None) -> str:
    """The file a run creates (only if absent) to take over the lock of a dead ``holder``: of
    two runs that both find the same dead holder, one creates it and takes the lock over, the
    other stops as locked. Named after the dead attempt, so the next takeover (of the new
    holder, should it die too) has a name of its own."""
    try:
        attempt = str(json.loads(holder or b"")["attempt"])
    except (ValueError, KeyError, TypeError):
        attempt = "unreadable"
    return f"{LOCK_FILE}.takeover-{''.join(c for c in attempt if c.isalnum())[:32]}"


def acquire_lock(store: OutputStore, lock: bytes, progress: Callable[[str], None]) -> bytes | None:
    """Create ``LOCK_FILE`` holding ``lock``; None when taken, else what holds it. A lock whose
    holder ran on this host and is dead (a driver killed outright) is taken over, once, through
    ``takeover_claim``; a live holder, or one on another host (unknowable), keeps it."""
    if store.create_new(LOCK_FILE, lock):
        return None
    held = store.read_bytes(LOCK_FILE)
    claim = takeover_claim(held)
    if holder_alive(held) is not False or not store.create_new(claim, lock):
        return held
    try:
        # Still the dead holder's? A run that claimed it before us has replaced it (and only
        # then dropped its claim, so no two runs ever hold the claim of one dead holder).
        if store.read_bytes(LOCK_FILE) == held:
            store.delete(LOCK_FILE)
        if not store.create_new(LOCK_FILE, lock):
            return store.read_bytes(LOCK_FILE)
    finally:
        store.delete(claim)
    who = lock_holder(held)
    progress(f"took over {LOCK_FILE} from a driver that is gone (host {who and who[0]}, pid "
             f"{who and who[1]})")  # fmt: skip
    return None


def release_lock(store: OutputStore, lock: bytes, *, quiet: bool = False) -> None:
    """Delete the lock if it is still ours (not deleted by hand); ``quiet``: a failure to is
    only reported, so it never hides the error that ended the run."""
    try:
        if store.read_bytes(LOCK_FILE) == lock:
            store.delete(LOCK_FILE)
    except Exception as error:  # py4j's Py4JJavaError from the filesystem
        if not quiet:
            raise
        print(f"WARN could not release {store.uri}/{LOCK_FILE}: {error}", file=sys.stderr)


def holder_alive(holder: bytes | None) -> bool | None:
    """Whether the process a lock names runs: known only on this host (None elsewhere)."""
    where = lock_holder(holder)
    if where is None or where[0] != socket.gethostname():
        return None
    try:
        os.kill(where[1], 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, run by another user
    return True
