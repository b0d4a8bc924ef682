"""Strand: a partitioned, replicated, durable commit log (the Kafka model)."""

__version__ = "0.1.0"
