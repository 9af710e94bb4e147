"""KRaft cluster metadata: records, their JSON codec, images, deltas, local changes, snapshots.

- ``records``: the record types (Kafka's metadata schemas) as frozen attrs classes.
- ``codec``: one flat JSON object per record, one record per line; Raft batch helpers.
- ``image``: ``MetadataImage``, immutable and structurally shared (HAMT maps).
- ``delta`` / ``topics_delta``: replay records onto an image with Kafka's rules.
- ``local_changes``: what a delta asks of one broker (lead, follow, delete).
- ``snapshot``: checksummed snapshot files (the only module here that touches the disk).

Everything except ``snapshot`` is a pure core: no I/O, clock or randomness.
"""
