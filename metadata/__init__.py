"""KRaft cluster metadata: records, their JSON codec, images, deltas, local changes, snapshots.

- ``records``: the record types (Kafka's metadata schemas) as frozen attrs classes.
- ``record_schema``: the one field table both codecs read (names, types, Kafka's ranges).
- ``codec``: one flat JSON object per record, one record per line (snapshots, HTTP, Spark).
- ``compact_codec``: positional JSON rows for Raft entries — measured ~3 times faster to encode and
  decode and 4 times smaller than JSON lines (DESIGN.md §3.2 asks for the numbers; they are in its
  docstring).
- ``image``: ``MetadataImage``, immutable and structurally shared (HAMT maps).
- ``delta`` / ``topics_delta``: replay records onto an image with Kafka's rules.
- ``local_changes``: what a delta asks of one broker (lead, follow, delete).
- ``snapshot``: checksummed snapshot files (the only module here that touches the disk).

Everything except ``snapshot`` is a pure core: no I/O, clock or randomness.
"""
