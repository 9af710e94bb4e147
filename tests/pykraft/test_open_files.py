"""The broker raises its soft open-files limit to the hard one at start (as Go's runtime)."""

from __future__ import annotations

import resource
from collections.abc import Iterator

import pytest

from pykraft.open_files import raise_open_files_limit


@pytest.fixture
def original_limit() -> Iterator[tuple[int, int]]:
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        yield limits
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)


def test_the_soft_limit_is_raised_to_the_hard_one(original_limit: tuple[int, int]) -> None:
    hard = original_limit[1]
    if hard == resource.RLIM_INFINITY or hard < 256:
        pytest.skip(f"needs a finite hard limit above 256 (have {hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    limit = raise_open_files_limit()
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    assert (limit.soft_before, limit.soft, limit.hard, limit.error) == (256, hard, hard, None)
    assert limit.describe() == f"open files limit raised from 256 to the hard limit {hard}"


def test_a_soft_limit_already_at_the_hard_one_is_left(original_limit: tuple[int, int]) -> None:
    hard = original_limit[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    limit = raise_open_files_limit()
    assert (limit.soft_before, limit.soft, limit.error) == (hard, hard, None)
    assert limit.describe() == f"open files limit {hard} (hard {hard})"
