"""The suite's own harness: a fresh broker serves a well-behaved client."""

from __future__ import annotations

from tests.hostile.conftest import SingleBroker


def test_a_fresh_broker_serves_and_reports_its_log_end(single_broker: SingleBroker) -> None:
    single_broker.create_topic("plain")
    assert single_broker.log_end_offset("plain") == 0
    single_broker.assert_still_serves()
