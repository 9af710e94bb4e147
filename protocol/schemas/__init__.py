"""Kafka message schemas kafka-python 3.0 does not ship (Kafka's JSON schema format, loaded by
kafka-python's ``ApiMessage`` through its ``load_json`` class keyword): the delegation token
APIs of KIP-48, at Kafka 3.9's versions (v3 of Create and Describe: KIP-373's owner and
requester). Field names, types and version ranges are Kafka's; see ``protocol.token_messages``.
"""
