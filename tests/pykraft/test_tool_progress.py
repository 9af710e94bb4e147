"""``tool_progress``: the perf tests' bar reaches stderr only on a terminal and never with
``--no-progress``; stdout (Kafka's lines) never sees it."""

from __future__ import annotations

import pytest

from pykraft.tool_progress import progress_bar


def run_bar(disabled: bool) -> None:
    with progress_bar("Producing to t", total=10, disabled=disabled) as advance:
        advance(4)
        advance(6)


@pytest.mark.parametrize(
    ("terminal", "disabled", "shown"),
    [(True, False, True), (True, True, False), (False, False, False)],
)
def test_bar_only_on_a_terminal_and_not_when_disabled(
    terminal: bool, disabled: bool, shown: bool, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    if terminal:
        monkeypatch.setenv("FORCE_COLOR", "1")  # rich: treat stderr as a terminal
    run_bar(disabled)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert ("Producing to t" in captured.err) is shown


def test_stdout_lines_printed_under_the_bar_stay_on_stdout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    with progress_bar("Producing to t", total=2, disabled=False) as advance:
        print(
            "1 records sent, 1.0 records/sec (0.00 MB/sec), 1.0 ms avg latency, 1.0 ms max latency."
        )
        advance(2)
    captured = capsys.readouterr()
    assert captured.out == (
        "1 records sent, 1.0 records/sec (0.00 MB/sec), 1.0 ms avg latency, 1.0 ms max latency.\n"
    )
    assert "records sent" not in captured.err
