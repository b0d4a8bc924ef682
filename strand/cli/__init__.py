"""The ``strand`` command line: dev cluster, topics, produce, consume, bench."""
