"""Kafka's coordinators, each over its own internal topic (``kafka.coordinator.*``).

``group/`` is the classic consumer-group coordinator over ``__consumer_offsets``; the
transaction coordinator over ``__transaction_state`` will be its sibling ``transaction/``, as
in Kafka's ``kafka.coordinator.group`` and ``kafka.coordinator.transaction``. A coordinator is
a pure core plus an asyncio shell that writes through the broker's replica layer, which it is
handed (``group/replicas.py`` names what it needs); it never imports ``broker``.
"""
