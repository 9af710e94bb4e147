"""The unclean-election checker (``tests/chaos/election_checker.py``): metadata logs with each
violation planted, each reported; clean elections counted by cause."""

from __future__ import annotations

from typing import Any

import pytest

from pykraft.metadata.api.records import MetadataBatch
from pykraft.metadata.codec import record_to_json
from pykraft.metadata.delta import apply_records
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    FenceBrokerRecord,
    LeaderRecoveryState,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from pykraft.metadata.snapshot import encode_snapshot
from tests.chaos.election_checker import (
    UNCLEAN,
    ElectionReport,
    check_elections,
    fetch_metadata_log,
)

FOO = "ThIaNwRnSM2Nt9Mx1v0RvA"
CREATED: list[MetadataRecord] = [
    # Brokers 1, 2, 3 at epochs 5, 6, 7.
    *(
        RegisterBrokerRecord(broker_id=b, incarnation_id=f"{FOO[:-1]}{b}", broker_epoch=b + 4)
        for b in (1, 2, 3)
    ),
    TopicRecord(name="foo", topic_id=FOO),
    PartitionRecord(partition_id=0, topic_id=FOO, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1),
]


def change(**fields: Any) -> PartitionChangeRecord:
    return PartitionChangeRecord(topic_id=FOO, partition_id=0, **fields)


def run(*batches: list[MetadataRecord], unclean_default: bool = False) -> ElectionReport:
    """``batches`` after the topic's creation, one atomic batch each, offsets in a row."""
    out, offset = [], 0
    for records in [CREATED, *batches]:
        out.append(MetadataBatch(
            base_offset=offset, last_offset=offset + len(records) - 1, epoch=1,
            append_time_ms=0, records=tuple(records),
        ))  # fmt: skip
        offset += len(records)
    return check_elections(out, unclean_default=unclean_default)


def test_clean_elections_are_counted_by_cause_and_pass() -> None:
    report = run(
        [FenceBrokerRecord(id=1, epoch=5), change(isr=(2, 3), leader=2)],
        [change(isr=(3,))],  # an ISR shrink without a leader change is no election
        [BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=6, fenced=1),
         change(isr=(3,), leader=3)],
        [change(isr=(1, 3))],
        [change(leader=1)],  # the preferred replica, back in the ISR
        [change(leader=-1)],
        [NoOpRecord(), change(leader=1)],
    )  # fmt: skip
    assert report.violations == ()
    assert [(e.previous_leader, e.leader, e.leader_epoch) for e in report.elections] == [
        (1, 2, 1), (2, 3, 2), (3, 1, 3), (-1, 1, 5),
    ]  # fmt: skip
    assert report.by_cause() == {
        "old leader fenced": 2,
        "preferred leader": 1,
        "back from no leader": 1,
    }
    assert report.offline == 1
    assert (report.first_offset, report.last_offset) == (0, 14)
    assert "4 leader elections" in report.render() and "unclean elections: 0" in report.render()


def test_a_leader_from_outside_the_isr_is_reported() -> None:
    report = run([change(isr=(1,))], [change(leader=3, isr=(3,))])
    [violation] = report.violations
    assert (violation.offset, violation.topic, violation.partition) == (6, "foo", 0)
    assert "leader 3 (epoch 1) is not in the ISR [1]" in violation.detail
    assert report.by_cause() == {"unclean": 1}
    assert "unclean elections: 1" in report.render()
    assert "at 6: foo-0: leader 3" in report.render()


def test_the_isr_is_the_one_before_the_change_not_the_one_it_sets() -> None:
    # The record names the new leader and an ISR holding it: still elected from [1, 2].
    [violation] = run([change(isr=(1, 2))], [change(leader=3, isr=(2, 3))]).violations
    assert "not in the ISR [1, 2]" in violation.detail


def test_a_leader_from_the_eligible_leader_replicas_is_clean_one_from_neither_is_not() -> None:
    # KIP-966: with min.insync.replicas 2, the ISR shrank to [1] and 2 went to the ELR; 1 is
    # fenced, the ISR empties into the ELR, then 2 is elected from it (its ISR becomes [2]).
    shrink = change(isr=(1,), eligible_leader_replicas=(2,))
    fence: list[MetadataRecord] = [
        FenceBrokerRecord(id=1, epoch=5),
        change(isr=(), leader=-1, eligible_leader_replicas=(1, 2)),
    ]
    clean = run([shrink], fence, [change(leader=2, isr=(2,), eligible_leader_replicas=(1,))])
    assert clean.violations == ()
    [violation] = run([shrink], fence, [change(leader=3, isr=(3,))]).violations
    assert violation.detail.endswith("nor in the ELR [1, 2]")


def test_a_leader_recovering_with_unclean_election_off_is_reported() -> None:
    # In the ISR, yet RECOVERING: only an unclean election sets that (KIP-704).
    report = run([change(leader=2, leader_recovery_state=LeaderRecoveryState.RECOVERING.value)])
    [violation] = report.violations
    assert violation.detail == f"leader 2 is RECOVERING with {UNCLEAN}=false"


@pytest.mark.parametrize(
    ("config", "unclean_default"),
    [
        (ConfigRecord(resource_type=ConfigResourceType.TOPIC.value, resource_name="foo",
                      name=UNCLEAN, value="true"), False),
        (ConfigRecord(resource_type=ConfigResourceType.BROKER.value, resource_name="",
                      name=UNCLEAN, value="true"), False),
        (NoOpRecord(), True),
    ],
)  # fmt: skip
def test_with_unclean_election_on_an_unclean_election_is_counted_not_reported(
    config: MetadataRecord, unclean_default: bool
) -> None:
    report = run(
        [config, change(isr=(1,))],
        [change(leader=3, isr=(3,), leader_recovery_state=LeaderRecoveryState.RECOVERING.value)],
        unclean_default=unclean_default,
    )
    assert report.violations == ()
    assert report.by_cause() == {"unclean": 1}


def test_a_topic_config_set_back_to_false_reports_again() -> None:
    on, off = (
        ConfigRecord(resource_type=ConfigResourceType.TOPIC.value, resource_name="foo",
                     name=UNCLEAN, value=value)
        for value in ("true", None)
    )  # fmt: skip
    report = run([on], [off, change(isr=(1,))], [change(leader=2)], unclean_default=False)
    assert len(report.violations) == 1


def test_a_log_below_the_controllers_window_is_read_from_its_snapshot_then_checked() -> None:
    # The controller kept offsets 6.. only (409 SNAPSHOT_REQUIRED below): the snapshot at 5
    # holds the ISR [1] the election at 6 must come from.
    snapshot = encode_snapshot(
        apply_records(MetadataImage.EMPTY, [*CREATED, change(isr=(1,))], offset=5, epoch=1), 0
    )
    tail = {"base_offset": 6, "last_offset": 6, "epoch": 1, "append_time_ms": 0,
            "records": [record_to_json(change(leader=3))]}  # fmt: skip
    answers: dict[str, Any] = {
        "/v1/metadata/snapshots": {"snapshots": [], "latest": "s5"},
        "/v1/metadata/records?from=0&max_records=100000": None,
        "/v1/metadata/snapshots/s5": snapshot,
        "/v1/metadata/records?from=6&max_records=100000": {
            "from_offset": 6, "next_offset": 7, "log_end_offset": 7, "batches": [tail],
        },
    }  # fmt: skip
    base, batches = fetch_metadata_log(answers.__getitem__)
    assert base.offset == 5 and [b.base_offset for b in batches] == [6]
    report = check_elections(batches, base)
    assert (report.first_offset, report.last_offset) == (6, 6)
    [violation] = report.violations
    assert "leader 3 (epoch 1) is not in the ISR [1]" in violation.detail
