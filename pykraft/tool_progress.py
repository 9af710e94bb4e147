"""A progress bar on stderr for the tools' long runs (``rich``), shown only to a person:
off when stderr is not a terminal or with the tool's ``--no-progress``, so pipes, logs and
scripts see exactly Kafka's lines on stdout and nothing else."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


class Advance(Protocol):
    def __call__(self, steps: int) -> None: ...


@contextmanager
def progress_bar(description: str, total: int, disabled: bool) -> Iterator[Advance]:
    """Yields ``advance(steps)``; the bar is gone (transient) when the block ends."""
    # Imported here: every pykraft process builds the parser, few run a perf test.
    from rich.console import Console
    from rich.progress import Progress

    console = Console(stderr=True)
    # No redirection: rich would send the tool's stdout lines through its stderr console, and
    # `pykraft producer-perf-test > out.txt` on a terminal would lose them from the file.
    with Progress(
        console=console,
        disable=disabled or not console.is_terminal,
        transient=True,
        redirect_stdout=False,
        redirect_stderr=False,
    ) as bar:
        task = bar.add_task(description, total=total)

        def advance(steps: int) -> None:
            bar.advance(task, steps)

        yield advance
