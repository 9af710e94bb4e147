"""The layout of a ``pykraft dev`` cluster: node ids, ports and each process's properties.

No processes and no files (``dev_secure``'s material is handed in): ``plan_layout`` places
controllers 1..C and brokers 10..10+N-1 (KRaft node ids are unique across roles) on ports from
``--base-port`` or on free ports handed in; ``node_properties`` writes the Kafka properties that
wire them together (``--secure``'s from ``dev_secure``), and ``check_overrides`` refuses a
``--controller-property`` / ``--broker-property`` that would rewire them. Out of ``dev.py`` so
the process supervisor there holds no decisions.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import attrs

from pykraft import dev_secure

MAX_NODES_PER_ROLE = 10
FIRST_BROKER_ID = 10


def internal_topic_properties(brokers: int) -> dict[str, str]:
    """The coordinators' internal topics sized to a cluster of ``brokers``: Kafka's defaults
    (replication factor 3, ``transaction.state.log.min.isr`` 2) lowered to what the cluster
    can hold, as Kafka's single-node ``config/kraft/server.properties`` sets them to 1. Kafka
    never auto-creates an internal topic with fewer alive brokers than its replication factor
    (``AutoTopicCreationManager.hasEnoughLiveBrokers``)."""
    return {
        "offsets.topic.replication.factor": str(min(3, brokers)),
        "transaction.state.log.replication.factor": str(min(3, brokers)),
        "transaction.state.log.min.isr": str(min(2, brokers)),
    }


# node_properties() defaults a user may override; every other key it writes wires the layout.
OVERRIDABLE_PROPERTIES = frozenset(internal_topic_properties(1))


class DevClusterError(Exception):
    """The cluster could not be set up or did not become ready."""


@attrs.frozen(kw_only=True)
class Node:
    role: str  # "controller" or "broker"
    node_id: int
    port: int  # Kafka listener (broker) or Raft (controller)
    http_port: int  # broker HTTP API or controller admin API
    # --secure: a broker's inter-broker SSL listener (0: none); a controller's API on https.
    inter_broker_port: int = 0
    secure: bool = False

    @property
    def name(self) -> str:
        return f"{self.role}-{self.node_id}"

    @property
    def http_url(self) -> str:
        scheme = "https" if self.secure and self.role == "controller" else "http"
        return f"{scheme}://127.0.0.1:{self.http_port}"


@attrs.frozen(kw_only=True)
class ClusterLayout:
    controllers: tuple[Node, ...]
    brokers: tuple[Node, ...]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers)

    @property
    def admin_url(self) -> str:
        return self.controllers[0].http_url

    @property
    def secure(self) -> bool:
        return self.controllers[0].secure


def secured(layout: ClusterLayout, inter_broker_ports: list[int]) -> ClusterLayout:
    """``layout`` with ``--secure``: controllers on https, one inter-broker port per broker."""
    assert len(inter_broker_ports) == len(layout.brokers)
    return ClusterLayout(
        controllers=tuple(attrs.evolve(c, secure=True) for c in layout.controllers),
        brokers=tuple(
            attrs.evolve(b, secure=True, inter_broker_port=port)
            for b, port in zip(layout.brokers, inter_broker_ports, strict=True)
        ),
    )


def plan_layout(
    controllers: int, brokers: int, base_port: int, free_ports: list[int] | None = None
) -> ClusterLayout:
    """Node ids and ports; ``free_ports`` (2 per node) replaces the ``base_port`` scheme."""
    if not 1 <= controllers <= MAX_NODES_PER_ROLE or not 1 <= brokers <= MAX_NODES_PER_ROLE:
        raise DevClusterError(
            f"--controllers and --brokers must be between 1 and {MAX_NODES_PER_ROLE}"
        )
    if free_ports is None:
        if not 1024 <= base_port <= 65535 - 50:
            raise DevClusterError("--base-port must be between 1024 and 65485 (or 0)")
        free_ports = [
            *(base_port + 20 + i for i in range(controllers)),
            *(base_port + 10 + i for i in range(controllers)),
            *(base_port + i for i in range(brokers)),
            *(base_port + 30 + i for i in range(brokers)),
        ]
    assert len(free_ports) == 2 * (controllers + brokers)
    raft, admin = free_ports[:controllers], free_ports[controllers : 2 * controllers]
    kafka, http = free_ports[2 * controllers :][:brokers], free_ports[2 * controllers + brokers :]
    return ClusterLayout(
        controllers=tuple(
            Node(role="controller", node_id=i + 1, port=raft[i], http_port=admin[i])
            for i in range(controllers)
        ),
        brokers=tuple(
            Node(role="broker", node_id=FIRST_BROKER_ID + i, port=kafka[i], http_port=http[i])
            for i in range(brokers)
        ),
    )


def node_properties(
    node: Node,
    layout: ClusterLayout,
    data_dir: Path,
    cluster_id: str,
    material: dev_secure.SecureMaterial | None = None,
) -> dict[str, str]:
    """A node's properties; with ``material`` (``--secure``) its TLS, SASL and ACL ones too."""
    plain = _plain_properties(node, layout, data_dir, cluster_id)
    if material is None:
        return plain
    broker_ids = tuple(b.node_id for b in layout.brokers)
    if node.role == "controller":
        return plain | dev_secure.controller_properties(material, node.node_id, broker_ids)
    return plain | dev_secure.broker_properties(
        material, node.node_id, node.port, node.inter_broker_port, broker_ids
    )


def _plain_properties(
    node: Node, layout: ClusterLayout, data_dir: Path, cluster_id: str
) -> dict[str, str]:
    http_voters = ",".join(f"{c.node_id}@127.0.0.1:{c.http_port}" for c in layout.controllers)
    if node.role == "controller":
        return {
            "node.id": str(node.node_id),
            "process.roles": "controller",
            "controller.quorum.voters": ",".join(
                f"{c.node_id}@127.0.0.1:{c.port}" for c in layout.controllers
            ),
            "controller.quorum.http.voters": http_voters,
            "listeners": f"CONTROLLER://127.0.0.1:{node.http_port}",
            "metadata.log.dir": str(data_dir / node.name),
            "controller.quorum.password.file": str(data_dir / "quorum.password"),
            # Salts the Raft transport's key (quorum/raft_transport.cluster_key).
            "cluster.id": cluster_id,
        }
    return {
        "node.id": str(node.node_id),
        "process.roles": "broker",
        "cluster.id": cluster_id,
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
        "log.dirs": str(data_dir / node.name),
        "controller.quorum.bootstrap.servers": ",".join(
            f"127.0.0.1:{c.http_port}" for c in layout.controllers
        ),
        "http.listener": f"127.0.0.1:{node.http_port}",
        **internal_topic_properties(len(layout.brokers)),
    }


def parse_property(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of ``--controller-property`` / ``--broker-property``."""
    key, separator, value = text.partition("=")
    if not separator or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def check_overrides(
    layout: ClusterLayout, role: str, pairs: list[tuple[str, str]]
) -> dict[str, str]:
    """The extra properties of every ``role`` node; refuses the keys that wire the layout."""
    node = layout.controllers[0] if role == "controller" else layout.brokers[0]
    managed = set(node_properties(node, layout, Path("."), "-")) - OVERRIDABLE_PROPERTIES
    for key, _ in pairs:
        if key in managed:
            raise DevClusterError(
                f"--{role}-property {key}: pykraft dev sets {key} itself "
                f"(from the layout and --data-dir)"
            )
    return dict(pairs)  # a key given twice: the last one wins, as in a .properties file
