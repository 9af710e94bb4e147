"""Fixtures shared by the storage tests."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest


@pytest.fixture
def count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[int]]:
    """Call it to start counting: every ``os.fsync`` from then on is made and its fd listed."""

    def start() -> list[int]:
        synced: list[int] = []
        real_fsync = os.fsync

        def counting_fsync(fd: int) -> None:
            synced.append(fd)
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", counting_fsync)
        return synced

    return start
