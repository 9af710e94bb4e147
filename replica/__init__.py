"""The replica layer: every partition this broker hosts, as synchronous, clock-free cores.

Leader and follower state, the high watermark and the ISR (``partition_state``, ``isr``), the
waiters' bookkeeping (``waiters``) and the per-partition core that turns inputs into a ``Ready``
of effects (``partition_core``, ``ready``). Nothing here does I/O or reads a clock: the asyncio
shell in ``broker/`` (``Partition``, ``ReplicaManager``) carries the effects out, and
``tests/sim/`` drives the same code on simulated time (DESIGN.md §2, STYLE.md §1).
"""
