"""The SparkSession every pykraft Spark job and test uses.

Local runs (``local[*]``, the default) need the machine's quirks handled before the JVM starts:
the driver binds to 127.0.0.1 (``SPARK_LOCAL_IP``), Python workers run this interpreter
(``PYSPARK_PYTHON``), whose environment has pykraft installed so workers import the data
sources, and the web UI stays off. On a real cluster (``--master spark://…``, ``yarn``) those
are the cluster's business and are left alone. ``master=None`` keeps whatever ``spark-submit``
chose. Filter pushdown for Python data sources is opt-in in Spark 4; it is switched on here so
``pykraft-log`` can prune segments (``register`` also works on a plain ``SparkSession``).

On a cluster the executors may lack pykraft: the session ships it (``export.shipping``) with the
user's ``--py-files`` before the sources are registered; ``--archives`` become
``spark.archives``, ``--conf`` pairs are set last, so they win. ``progress`` keeps Spark's
console progress bar on (stage progress on stderr while a job runs).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from pyspark.sql import SparkSession

from pykraft.export.shipping import ship
from pykraft.export.spark_sources import register

DEFAULT_MASTER = "local[*]"
# Small jobs on small machines: Spark's default of 200 shuffle partitions is mostly overhead.
SHUFFLE_PARTITIONS = 8


def is_local(master: str | None) -> bool:
    return master is None or master.startswith("local")


def build_session(
    master: str | None = DEFAULT_MASTER,
    app_name: str = "pykraft",
    extra_conf: dict[str, str] | None = None,
    log_level: str = "ERROR",
    *,
    py_files: Sequence[str] = (),
    archives: Sequence[str] = (),
    progress: bool = False,
) -> SparkSession:
    """A session with both pykraft data sources registered, pykraft shipped to a cluster.

    ``log_level`` is Spark's (``OFF`` for the CLI, which prints its own one-line errors
    instead of the executors' stack traces).
    """
    if master is not None and is_local(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "true" if progress else "false",
        "spark.sql.python.filterPushdown.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(SHUFFLE_PARTITIONS),
        **({"spark.archives": ",".join(archives)} if archives else {}),
        **(extra_conf or {}),
    }
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    if py_files or not is_local(spark.sparkContext.master):
        ship(spark, py_files)
    register(spark)
    return spark
