"""One chaos cluster (3 controllers, 3 brokers) for the whole chaos suite, always stopped —
package-scoped, so it stops when the suite is done instead of idling through `make test`.

Starting six processes takes a while on two cores, so the cluster is shared; each test gets it
back with every broker resumed, started and RUNNING (``cluster``), and uses topics of its own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.chaos.harness import ChaosCluster


@pytest.fixture(scope="package")
def chaos_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosCluster]:
    cluster = ChaosCluster(tmp_path_factory.mktemp("chaos"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster(chaos_cluster: ChaosCluster) -> ChaosCluster:
    chaos_cluster.ensure_running()
    return chaos_cluster
