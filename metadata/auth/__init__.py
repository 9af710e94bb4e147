"""Who is asking, and may they: Kafka's security vocabulary shared by brokers and controllers."""
