"""Fault-injection harness (issue 4): a real local cluster, a workload, faults, checks.

Run it with ``python -m tests.chaos`` (see README.md in this folder)."""
