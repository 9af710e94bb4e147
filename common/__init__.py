"""Kafka's shared vocabulary, below every other package (Kafka's ``org.apache.kafka.common``).

What more than one package must spell the same way lives here once: Kafka's error codes
(``errors.py``), the name of a partition (``topic_partition.py``) and Java's ``int`` hashing as
Kafka uses it (``java_hash.py``). It imports nothing of ours.
"""
