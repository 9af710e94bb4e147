"""KIP-890 part 1 through one broker in process (``tests/broker/verification_world.py``): the
Produce handler, ``ReplicaManager`` with its ``AddPartitionsToTxnManager``, the AddPartitionsToTxn
v4 handler and the transaction coordinator, only the network replaced.

The scenarios are Kafka's ReplicaManagerTest verification cases (core/src/test/scala/unit/kafka/
server: testVerificationForTransactionalPartitionsOnly, testTransactionVerificationFlow,
testTransactionVerificationBlocksOutOfOrderSequence, testTransactionVerificationGuardOnMultiple
Partitions, testExceptionWhenUnverifiedTransactionHasMultipleProducerIds,
testTransactionVerificationWhenNotLeader, testDisabledTransactionVerification,
testVerificationErrorConversions)
and the hanging transaction KIP-890 was written for: a write arriving after its transaction
ended must not open a new one (the LSO would stay behind it for good).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from pykraft.metadata.records import FenceBrokerRecord, TopicRecord
from pykraft.protocol.errors import Errors
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker
from pykraft.storage.verification_guard import SENTINEL
from tests.broker.replica_harness import BIRDS_ID, LOCAL, NOW_MS, partition_record
from tests.broker.verification_world import (
    PETS0,
    PETS1,
    TIMEOUT_MS,
    TXN,
    VerificationWorld,
    settle,
)

Scenario = Callable[[VerificationWorld], Awaitable[None]]


def run(tmp_path: Path, scenario: Scenario, *, verification: bool = True) -> None:
    async def main() -> None:
        world = VerificationWorld(tmp_path, verification=verification)
        try:
            await world.start()
            await scenario(world)
        finally:
            await world.close()

    asyncio.run(main())


def test_a_late_write_after_its_transaction_ended_is_refused(tmp_path: Path) -> None:
    # KIP-890's hanging transaction: the write of a committed transaction arrives late.
    async def scenario(world: VerificationWorld) -> None:
        pid, epoch = await world.begin(PETS0)
        assert (await world.produce_to(PETS0, pid, epoch, 0))[:2] == (Errors.NONE, 0)
        await world.end(pid, epoch, commit=True)
        assert world.offsets(PETS0) == (2, 2, 2)  # the data, the COMMIT marker

        error, _, message = await world.produce_to(PETS0, pid, epoch, 1)
        # The coordinator says TRANSACTION_ABORTABLE; Produce v9 learns INVALID_TXN_STATE.
        assert error is Errors.INVALID_TXN_STATE
        assert message == "Partition was not added to the transaction"
        assert world.offsets(PETS0) == (2, 2, 2)  # nothing written, the LSO is not held back
        assert not world.replica_manager.get_partition(PETS0).log.producer_state.ongoing_txns  # type: ignore[union-attr]

    run(tmp_path, scenario)


def test_without_verification_the_late_write_hangs_the_partition(tmp_path: Path) -> None:
    # The same late write with transaction.partition.verification.enable=false (Kafka's
    # testDisabledTransactionVerification): it opens a transaction no coordinator will end.
    async def scenario(world: VerificationWorld) -> None:
        pid, epoch = await world.begin(PETS0)
        await world.produce_to(PETS0, pid, epoch, 0)
        await world.end(pid, epoch, commit=True)
        assert (await world.produce_to(PETS0, pid, epoch, 1))[:2] == (Errors.NONE, 2)
        assert world.offsets(PETS0) == (3, 3, 2)  # the LSO is stuck behind the late write
        assert world.sender.requests == []  # nothing was asked

    run(tmp_path, scenario, verification=False)


def test_transaction_verification_flow(tmp_path: Path) -> None:
    # ReplicaManagerTest.testTransactionVerificationFlow: the first write of a transaction to a
    # partition is verified; once the transaction is open there the next ones are not.
    async def scenario(world: VerificationWorld) -> None:
        pid, epoch = await world.begin(PETS0)
        assert (await world.produce_to(PETS0, pid, epoch, 0))[:2] == (Errors.NONE, 0)
        assert len(world.sender.requests) == 1
        [(_, [asked])] = world.sender.requests
        assert (asked.transactional_id, asked.partitions) == (TXN, (PETS0,))
        assert (await world.produce_to(PETS0, pid, epoch, 1))[:2] == (Errors.NONE, 1)
        assert len(world.sender.requests) == 1  # no second question
        partition = world.replica_manager.get_partition(PETS0)
        assert partition is not None
        assert partition.log.verification_guard(pid) is SENTINEL  # spent by the first write

    run(tmp_path, scenario)


def test_a_partition_never_added_to_the_transaction_is_refused(tmp_path: Path) -> None:
    # A producer that writes to pets-1 without AddPartitionsToTxn for it.
    async def scenario(world: VerificationWorld) -> None:
        pid, epoch = await world.begin(PETS0)
        assert (await world.produce_to(PETS1, pid, epoch, 0))[0] is Errors.INVALID_TXN_STATE
        assert world.offsets(PETS1) == (0, 0, 0)

    run(tmp_path, scenario)


def test_a_fenced_producer_learns_invalid_producer_epoch(tmp_path: Path) -> None:
    # AddPartitionsToTxnManager: the coordinator's PRODUCER_FENCED is what producers expect
    # as INVALID_PRODUCER_EPOCH.
    async def scenario(world: VerificationWorld) -> None:
        pid, epoch = await world.begin(PETS0)
        again, new_epoch = await world.begin(PETS0)  # a new instance fences the old one
        assert again == pid and new_epoch > epoch
        error, _, _ = await world.produce_to(PETS1, pid, epoch, 0)
        assert error is Errors.INVALID_PRODUCER_EPOCH

    run(tmp_path, scenario)


def test_coordinator_not_available_is_retriable(tmp_path: Path) -> None:
    # ReplicaManagerTest.testVerificationErrorConversions: COORDINATOR_NOT_AVAILABLE (here: the
    # coordinator's broker is fenced) reaches the producer as NOT_ENOUGH_REPLICAS.
    async def scenario(world: VerificationWorld) -> None:
        pid, epoch = await world.begin(PETS0)
        world.publish(FenceBrokerRecord(id=LOCAL, epoch=100 + LOCAL))
        error, _, message = await world.produce_to(PETS0, pid, epoch, 0)
        assert error is Errors.NOT_ENOUGH_REPLICAS
        assert message == (
            "Unable to verify the partition has been added to the transaction. "
            "Underlying error: COORDINATOR_NOT_AVAILABLE"
        )
        assert world.offsets(PETS0)[0] == 0

    run(tmp_path, scenario)


def test_transaction_verification_blocks_out_of_order_sequence(tmp_path: Path) -> None:
    # ReplicaManagerTest.testTransactionVerificationBlocksOutOfOrderSequence: the first write
    # failed verification; a later sequence, verified, still may not go before it.
    async def scenario(world: VerificationWorld) -> None:
        pid, epoch = await world.begin(PETS0)
        assert (await world.produce_to(PETS1, pid, epoch, 0))[0] is Errors.INVALID_TXN_STATE
        partition = world.replica_manager.get_partition(PETS1)
        assert partition is not None
        guard = partition.log.verification_guard(pid)
        assert guard is not SENTINEL
        added = await world.coordinator.add_partitions_to_txn(TXN, pid, epoch, [PETS1])
        assert added == {PETS1: Errors.NONE}
        error, _, _ = await world.produce_to(PETS1, pid, epoch, 1)
        assert error is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert partition.log.verification_guard(pid) is guard  # kept for the retry of 0
        assert (await world.produce_to(PETS1, pid, epoch, 0))[:2] == (Errors.NONE, 0)
        assert partition.log.verification_guard(pid) is SENTINEL

    run(tmp_path, scenario)


def test_transaction_verification_guard_on_multiple_partitions(tmp_path: Path) -> None:
    # ReplicaManagerTest.testTransactionVerificationGuardOnMultiplePartitions
    async def scenario(world: VerificationWorld) -> None:
        pid, epoch = await world.begin(PETS0, PETS1)
        response = await world.produce_raw(
            {PETS0: _batch(pid, epoch, 0), PETS1: _batch(pid, epoch, 0)}
        )
        codes = [p.error_code for topic in response.responses for p in topic.partition_responses]
        assert codes == [Errors.NONE, Errors.NONE]
        [(_, [asked])] = world.sender.requests  # one question for both partitions
        assert set(asked.partitions) == {PETS0, PETS1}

    run(tmp_path, scenario)


def test_verification_for_transactional_partitions_only(tmp_path: Path) -> None:
    # ReplicaManagerTest.testVerificationForTransactionalPartitionsOnly: in one request, the
    # idempotent partition is appended without asking; the transactional one is asked about.
    async def scenario(world: VerificationWorld) -> None:
        pid, epoch = await world.begin(PETS0)
        idempotent = _batch(pid, epoch, 0, transactional=False)
        transactional = _batch(pid, epoch, 0)
        response = await world.produce_raw({PETS1: idempotent, PETS0: transactional})
        errors = {
            (topic.name, p.index): Errors(p.error_code)
            for topic in response.responses
            for p in topic.partition_responses
        }
        assert errors == {("pets", 1): Errors.NONE, ("pets", 0): Errors.NONE}
        [(_, [asked])] = world.sender.requests
        assert asked.partitions == (PETS0,)

    run(tmp_path, scenario)


def test_unverified_transaction_with_multiple_producer_ids(tmp_path: Path) -> None:
    # ReplicaManagerTest.testExceptionWhenUnverifiedTransactionHasMultipleProducerIds
    async def scenario(world: VerificationWorld) -> None:
        pid, epoch = await world.begin(PETS0, PETS1)
        response = await world.produce_raw(
            {PETS0: _batch(pid, epoch, 0), PETS1: _batch(pid + 1, epoch, 0)}
        )
        codes = {p.error_code for topic in response.responses for p in topic.partition_responses}
        assert codes == {Errors.INVALID_PRODUCER_ID_MAPPING}
        assert world.offsets(PETS0)[0] == world.offsets(PETS1)[0] == 0
        assert world.sender.requests == []

    run(tmp_path, scenario)


def test_verification_when_not_leader(tmp_path: Path) -> None:
    # ReplicaManagerTest.testTransactionVerificationWhenNotLeader
    async def scenario(world: VerificationWorld) -> None:
        world.publish(
            TopicRecord(name="birds", topic_id=BIRDS_ID),
            partition_record(BIRDS_ID, 0, (2, 1), leader=2),
        )
        pid, epoch = await world.begin(PETS0)
        error, _, _ = await world.produce_to(TopicPartition("birds", 0), pid, epoch, 0)
        assert error is Errors.NOT_LEADER_OR_FOLLOWER
        assert world.sender.requests == []

    run(tmp_path, scenario)


# ---------------------------------------------------------------------------- races and order


def test_a_marker_between_verification_and_append_refuses_the_write(tmp_path: Path) -> None:
    # The ABA case (UnifiedLog.analyzeAndValidateProducerState's comment, ReplicaManagerTest
    # .testTransactionVerificationFlow's "guard does not match"): the coordinator vouched for the
    # partition, but the transaction was aborted before the write reached the log.
    async def scenario(world: VerificationWorld) -> None:
        pid, epoch = await world.begin(PETS0)
        world.sender.gate.clear()
        write = asyncio.ensure_future(world.produce_to(PETS0, pid, epoch, 0))
        await settle()
        assert len(world.sender.requests) == 1 and not write.done()
        # The coordinator aborts (say the transaction timed out) while the question waits.
        abort = TxnMarker(
            producer_id=pid, producer_epoch=epoch, coordinator_epoch=0, commit=False,
            partitions=(PETS0,),
        )  # fmt: skip
        written = await world.replica_manager.append_txn_markers(
            [abort], timeout_ms=TIMEOUT_MS, now_ms=NOW_MS
        )
        assert set(written.values()) == {Errors.NONE}
        # The answer (verified: pets-0 still in the transaction the coordinator holds) comes
        # back; the log's guard is gone with the marker, so the write is refused.
        world.sender.gate.set()
        error, _, _ = await write
        assert error is Errors.INVALID_TXN_STATE
        assert world.offsets(PETS0) == (1, 1, 1)  # only the marker

    run(tmp_path, scenario)


def test_a_producers_pipelined_writes_append_in_order(tmp_path: Path) -> None:
    # Kafka answers one request per connection at a time; pykraft's listener runs them
    # concurrently, so the second write waits for the first one's verification and append.
    async def scenario(world: VerificationWorld) -> None:
        pid, epoch = await world.begin(PETS0, PETS1)
        world.sender.gate.clear()
        first = asyncio.ensure_future(world.produce_to(PETS0, pid, epoch, 0))
        second = asyncio.ensure_future(
            world.produce_raw({PETS0: _batch(pid, epoch, 1), PETS1: _batch(pid, epoch, 0)})
        )
        await settle()
        assert not first.done() and not second.done()
        assert len(world.sender.requests) == 1  # the second one waits its turn, unasked
        world.sender.gate.set()
        assert (await first)[:2] == (Errors.NONE, 0)
        response = await second
        results = {
            (topic.name, p.index): (Errors(p.error_code), p.base_offset)
            for topic in response.responses
            for p in topic.partition_responses
        }
        assert results == {("pets", 0): (Errors.NONE, 1), ("pets", 1): (Errors.NONE, 0)}
        # pets-1 was new to the transaction on this partition: asked once, after the first.
        assert [asked.partitions for _, [asked] in world.sender.requests] == [(PETS0,), (PETS1,)]

    run(tmp_path, scenario)


def test_others_do_not_wait_for_a_producers_verification(tmp_path: Path) -> None:
    async def scenario(world: VerificationWorld) -> None:
        pid, epoch = await world.begin(PETS0)
        world.sender.gate.clear()
        waiting = asyncio.ensure_future(world.produce_to(PETS0, pid, epoch, 0))
        await settle()
        plain = await world.produce_raw(
            {PETS1: build_batch([SimpleRecord(value=b"plain")])}, transactional_id=None
        )
        assert plain.responses[0].partition_responses[0].error_code == Errors.NONE
        assert not waiting.done()
        world.sender.gate.set()
        assert (await waiting)[0] is Errors.NONE

    run(tmp_path, scenario)


def test_a_cancelled_write_passes_its_turn_on(tmp_path: Path) -> None:
    # A produce whose connection went away while it waited must not block the producer.
    async def scenario(world: VerificationWorld) -> None:
        pid, epoch = await world.begin(PETS0)
        world.sender.gate.clear()
        first = asyncio.ensure_future(world.produce_to(PETS0, pid, epoch, 0))
        await settle()
        second = asyncio.ensure_future(world.produce_to(PETS0, pid, epoch, 0))  # a retry
        await settle()
        first.cancel()
        await settle()
        assert not second.done()  # still behind the verification the first one started
        world.sender.gate.set()
        assert (await second)[:2] == (Errors.NONE, 0)
        assert world.offsets(PETS0)[0] == 1

    run(tmp_path, scenario)


def _batch(producer_id: int, epoch: int, sequence: int, *, transactional: bool = True) -> bytes:
    return build_batch(
        [SimpleRecord(value=b"v", timestamp=NOW_MS)],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=transactional,
    )
