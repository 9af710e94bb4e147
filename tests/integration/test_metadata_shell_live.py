"""``pykraft metadata-shell --bootstrap-controller`` against one real controller process: the
live image read through the records feed, as a broker reads it."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from pykraft import metadata_shell_cmd
from tests.integration.conftest import Cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = Cluster(Path(tmp_path_factory.mktemp("metadata-shell")), 1)
    try:
        cluster.start()
        cluster.wait_for_leader()
        cluster.register_brokers([1, 2])
        cluster.request(
            "POST",
            "/v1/topics",
            {"name": "pets", "partitions": 2, "replication_factor": 2},
        )
        yield cluster
    finally:
        for controller in cluster.controllers:
            controller.kill()


def test_the_live_image_shows_the_clusters_topics_and_brokers(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    url = cluster.controllers[0].url

    parser = argparse.ArgumentParser()
    metadata_shell_cmd.add_arguments(parser)

    def shell(*command: str) -> str:
        args = parser.parse_args(["--bootstrap-controller", url, *command])
        assert metadata_shell_cmd.run(args) == 0
        return capsys.readouterr().out

    assert shell("ls", "/image/topics/byName") == "pets\n"
    topic = cluster.request("GET", "/v1/topics/pets")
    assert shell("find", "/image/topics/byName").splitlines() == [
        "/image/topics/byName",
        "/image/topics/byName/pets",
        "/image/topics/byName/pets/0",
        "/image/topics/byName/pets/1",
        "/image/topics/byName/pets/id",
        "/image/topics/byName/pets/name",
    ]
    partition = topic["partitions"][0]
    leaf = shell("cat", "/image/topics/byName/pets/0")
    replicas = ", ".join(str(replica) for replica in partition["replicas"])
    assert leaf.startswith(f"PartitionRegistration(replicas=[{replicas}]")
    assert f"leader={partition['leader']}," in leaf
    assert shell("ls", "/image/cluster/brokers") == "1\n2\n"
    assert shell("cat", "/image/topics/byName/pets/id") == topic["topic_id"] + "\n"
