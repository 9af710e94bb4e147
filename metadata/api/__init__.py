"""The controller's HTTP API, defined once: every route's request and answer types and their JSON.

Why here: ``quorum/`` serves these routes and ``broker/`` (and ``pykraft topics``) calls them; the
import rules (``tests/test_architecture.py``) let both import ``metadata`` and neither import the
other, so the contract lives where both can reach it. Pure: no aiohttp, no I/O — bytes and
JSON objects in, typed values (or a typed ``JsonBodyError``) out, round-trip tested.

``routes`` names every route (method, path, idempotence); ``errors`` the error body, the HTTP
status of each Kafka error and the NOT_CONTROLLER redirect; ``json_fields`` the bounded body
parser and the field reader every decoder uses; ``brokers`` (KIP-631 lifecycle, AlterPartition,
KIP-730 producer ids), ``admin`` (cluster, topics, partitions, configs, elections) and
``records`` (the metadata log and snapshots for brokers) the types and their codecs. The pure
``quorum.controller`` takes the request types defined here as its inputs.
"""
