"""The gateway's Kafka-protocol listener: Kafka's binary protocol over TCP, mapped onto
the same calls the gRPC API serves (record batches pass through as bytes)."""
