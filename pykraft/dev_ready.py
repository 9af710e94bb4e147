"""When a ``pykraft dev`` cluster is ready for clients, decided from what its processes report.

Pure: no clock, no I/O. The shell (``pykraft/dev_probe.py``) gathers a ``ClusterView`` — each
broker's own state over its HTTP API and the active controller's view of the brokers — and
``readiness`` says whether a client may use the cluster now, and what each process is doing.

Ready means what a script that takes the bootstrap servers at once needs, so its first
``CreateTopics`` with replication factor 3 never meets ``Replication factor: 3 larger than
available brokers: 2`` (Kafka's ``ReplicationControlManager.createTopic`` counts only unfenced
brokers) and never waits for a controller:

- the controller quorum has a leader (Kafka's ``QuorumState`` with a known leader; the active
  controller is the Raft leader, KIP-631);
- every broker of the layout is registered with that controller, unfenced and not in controlled
  shutdown (KIP-631's broker lifecycle: ``BrokerHeartbeatManager`` unfences a broker once it has
  caught up with the metadata log), and reports ``RUNNING`` itself (``BrokerState.RUNNING``);
- the internal topics' replication factor (``offsets.topic.replication.factor``,
  ``transaction.state.log.replication.factor``) is at most the unfenced brokers, so the first
  FindCoordinator can create ``__consumer_offsets`` (``AutoTopicCreationManager``'s
  ``hasEnoughLiveBrokers``).

Each process's progress is one short phrase (``NodeProgress``); ``progress_lines`` turns two
successive snapshots into the lines ``pykraft dev`` prints, one per process that moved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

RUNNING = "RUNNING"


@attrs.frozen(kw_only=True)
class RegisteredBroker:
    """One broker as the active controller's image holds it (``GET /v1/brokers``)."""

    broker_id: int
    fenced: bool
    in_controlled_shutdown: bool = False


@attrs.frozen(kw_only=True)
class ClusterView:
    """What the processes said in one probe; ``None`` where one did not answer."""

    # The active controller's node id (``GET /v1/cluster``'s controller_id), None: no leader.
    leader_id: int | None
    # The active controller's brokers; None when it could not be asked.
    registered: tuple[RegisteredBroker, ...] | None
    # Each layout broker's own state (``GET /v1/broker``), None when it did not answer.
    broker_states: Mapping[int, str | None]
    # Controllers that answered the probe at all (their admin API is up).
    controllers_up: frozenset[int] = frozenset()


@attrs.frozen(kw_only=True)
class Readiness:
    ready: bool
    # One phrase per process name (``controller-1``, ``broker-10``), in layout order.
    progress: Mapping[str, str]
    # Why not ready, for the time-out message; empty when ready.
    waiting_for: tuple[str, ...]


def readiness(
    controller_ids: Sequence[int],
    broker_ids: Sequence[int],
    internal_replication_factor: int,
    view: ClusterView,
) -> Readiness:
    """Whether ``view`` is a ready cluster of these controllers and brokers."""
    assert internal_replication_factor >= 1
    registered = {b.broker_id: b for b in view.registered or ()}
    progress: dict[str, str] = {}
    waiting: list[str] = []
    for node_id in controller_ids:
        progress[f"controller-{node_id}"] = _controller_progress(node_id, view)
    if view.leader_id is None:
        waiting.append("the controller quorum to elect a leader")
    unfenced = 0
    for broker_id in broker_ids:
        phrase = _broker_progress(view.broker_states.get(broker_id), registered.get(broker_id))
        progress[f"broker-{broker_id}"] = phrase
        if phrase == "ready":
            unfenced += 1
        else:
            waiting.append(f"broker-{broker_id} ({phrase})")
    if unfenced < internal_replication_factor:
        waiting.append(
            f"{internal_replication_factor} unfenced brokers for the internal topics' "
            f"replication factor ({unfenced} now)"
        )
    return Readiness(ready=not waiting, progress=progress, waiting_for=tuple(waiting))


def _controller_progress(node_id: int, view: ClusterView) -> str:
    if node_id not in view.controllers_up:
        return "starting"
    if view.leader_id is None:
        return "up, electing a leader"
    return "active controller" if view.leader_id == node_id else "up, following"


def _broker_progress(state: str | None, registered: RegisteredBroker | None) -> str:
    if state is None:
        return "starting"
    if registered is None:
        return f"{state}, not registered yet"
    if registered.in_controlled_shutdown:
        return f"{state}, in controlled shutdown"
    if registered.fenced:
        return f"{state}, registered, fenced (catching up with the metadata log)"
    if state != RUNNING:
        return f"{state}, unfenced"
    return "ready"


def progress_lines(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """``pykraft dev: NAME PHRASE`` for each process whose phrase changed, in ``after``'s order."""
    return [
        f"pykraft dev: {name} {phrase}"
        for name, phrase in after.items()
        if before.get(name) != phrase
    ]


def internal_replication_factor(broker_properties: Mapping[str, str]) -> int:
    """The largest replication factor an internal topic will be created with."""
    keys = ("offsets.topic.replication.factor", "transaction.state.log.replication.factor")
    values = [broker_properties.get(key, "3") for key in keys]
    try:
        return max(1, *(int(value) for value in values))
    except ValueError:
        return 3  # the broker refuses a bad value itself; Kafka's default meanwhile
