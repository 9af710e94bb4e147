"""Kafka's on-disk partition log: batches, segments, indexes, checkpoints, recovery."""
