"""Spark data sources and jobs over pykraft's files (DESIGN.md §1, §3.2-3.3).

Reads files only — metadata snapshots, the controller's Raft journal, partition segments and
checkpoints — never a live process; imports ``storage`` and ``metadata``, never ``broker`` or
``quorum``. Pure modules (no pyspark, testable alone):

* ``segment_reader``  one segment file -> record columns (CRC-checked, all four codecs)
* ``log_scan``        log dirs -> partitions, high watermarks, pushdown, one split per segment
* ``isolation``       read_committed (default) / read_uncommitted: what a scan hides
* ``txn_scan``        a partition's files -> its last stable offset and aborted transactions
* ``snapshot_scan``   snapshot files -> verified line-range splits -> record rows
* ``metadata_journal``the retained metadata log: Raft journal -> committed records + offsets
* ``metadata_rows``   records and images as rows (``records``, ``brokers``, ``topics``, …)
* ``manifest``        export-topic's record of exported offset ranges and run states
* ``output_check``    a run's committed output holds exactly the rows it read, or nothing commits
* ``job_args``        the jobs' command-line arguments (spark-submit's options, absolute inputs)
* ``shipping``        the running pykraft package as a zip for the executors
* ``report_charts``, ``report_html``, ``report_content``  the report's PNG charts, its HTML page
  and what they show, from collected rows

Spark side (thin): ``spark_schemas`` (explicit schemas), ``spark_sources`` (the
``pykraft-log`` and ``pykraft-metadata`` data sources, ``register(spark)``), ``session``
(``build_session``: ships pykraft to a cluster), ``output_store`` (the output directory on any
Hadoop filesystem, through Spark's JVM), ``report_job`` and ``export_topic_job`` (also
``spark-submit`` scripts).
"""
