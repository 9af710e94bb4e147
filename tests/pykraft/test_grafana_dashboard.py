"""``examples/grafana/pykraft.json``: a Grafana dashboard over Kafka's metric names, each of which
a pykraft broker or controller serves (``tests/integration/test_kafka_metrics.py`` scrapes live
ones for the same names)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pykraft.broker.metrics import BrokerMetrics
from pykraft.metadata.image import MetadataImage
from pykraft.quorum.metrics import ControllerMetrics, ControllerSnapshot

DASHBOARD = Path(__file__).resolve().parents[2] / "examples" / "grafana" / "pykraft.json"


def load() -> dict[str, Any]:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return dashboard


def graphed_names() -> set[str]:
    return {
        name
        for panel in load()["panels"]
        for target in panel.get("targets", [])
        for name in re.findall(r"\b(kafka_[a-z_]+)", target["expr"])
    }


def served_names() -> set[str]:
    controller = ControllerMetrics().render(
        ControllerSnapshot(
            image=MetadataImage.EMPTY,
            active=True,
            leader_id=1,
            raft_term=1,
            raft_state="leader",
            committed_offset=-1,
        ),
        now_ms=0,
    )
    text = BrokerMetrics().render() + controller
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def test_every_graphed_metric_is_a_family_pykraft_serves() -> None:
    graphed = graphed_names()
    assert len(graphed) >= 15
    # A summary's or counter's samples carry the family name, so the family covers them.
    assert graphed <= served_names(), sorted(graphed - served_names())


def test_the_panels_cover_throughput_replication_requests_and_the_controller() -> None:
    rows = [panel["title"] for panel in load()["panels"] if panel["type"] == "row"]
    assert rows == [
        "Throughput (BrokerTopicMetrics)",
        "Replication (ReplicaManager)",
        "Requests (RequestMetrics)",
        "Controller (KafkaController, raft-metrics)",
    ]


def test_it_is_well_formed_grafana_json() -> None:
    dashboard = load()
    assert dashboard["uid"] == "pykraft-overview" and dashboard["schemaVersion"] >= 30
    panels = dashboard["panels"]
    assert len({panel["id"] for panel in panels}) == len(panels)
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert variables == {"datasource", "job"}
    for panel in panels:
        assert panel["type"] in ("row", "timeseries", "stat")
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"]
        for target in panel["targets"]:
            assert "$job" in target["expr"]  # every query follows the job selector
            assert target["expr"].count("(") == target["expr"].count(")")
