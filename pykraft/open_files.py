"""The process's open-files limit (``RLIMIT_NOFILE``), raised at start.

A broker holds at least one descriptor per partition (its active segment's ``.log``; an index
once it has entries, see ``storage/index.py``), so a soft limit of 1,024 — the usual default —
caps it near a thousand partitions. Kafka leaves the limit to the operator (its operations
docs: "File descriptors and mmap", a limit of 100,000 or more); the Go runtime raises the soft
limit to the hard one at start (Go 1.19, ``os`` package). A broker does the same, and says
both, so that an operator who sees ``[Errno 24] Too many open files`` (a log dir taken offline:
``LogManager.handle_log_dir_failure``) knows which limit it was.
"""

from __future__ import annotations

import resource

import attrs


@attrs.frozen
class OpenFilesLimit:
    soft_before: int
    soft: int
    hard: int
    error: str | None = None  # why the soft limit could not be raised

    def describe(self) -> str:
        hard = "unlimited" if self.hard == resource.RLIM_INFINITY else str(self.hard)
        if self.error is not None:
            return f"open files limit {self.soft} (hard {hard}); cannot raise it: {self.error}"
        if self.soft != self.soft_before:
            return f"open files limit raised from {self.soft_before} to the hard limit {hard}"
        return f"open files limit {self.soft} (hard {hard})"


def raise_open_files_limit() -> OpenFilesLimit:
    """Raise this process's soft ``RLIMIT_NOFILE`` to its hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return OpenFilesLimit(soft, soft, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (OSError, ValueError) as error:  # an unlimited hard limit cannot be the soft one
        return OpenFilesLimit(soft, soft, hard, str(error))
    return OpenFilesLimit(soft, hard, hard)
