"""The harnesses: each module defines ``test_one_input(data: bytes) -> None``, which
feeds ``data`` to a decoder the way Strand meets outside input, catches the typed
errors that decoder documents, and raises anything else: an untyped error, or a
:class:`fuzz.harnesses.common.Finding` for a broken invariant.

This module only names them (no imports of the code under test), so that the engine
can turn coverage instrumentation on before the harness imports it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HARNESSES", "SCRATCH_ENV", "HarnessSpec"]

# Where a harness process keeps its files (partition directories), set by whoever
# started it and removes them afterwards: libFuzzer ends the process with exit(), so
# Python's own clean-up never runs under it.
SCRATCH_ENV = "STRAND_FUZZ_SCRATCH"


@dataclass(frozen=True, slots=True)
class HarnessSpec:
    module: str
    # Top-level packages whose code is instrumented, so their coverage guides the fuzzer.
    instrument: tuple[str, ...]
    # libFuzzer's -max_len: inputs larger than the decoders' interesting structure
    # only slow each run down.
    max_len: int
    description: str


_STRAND = ("strand", "fuzz")

HARNESSES: dict[str, HarnessSpec] = {
    # The slowest first: with several jobs, the others run beside it.
    "log_recovery": HarnessSpec(
        "fuzz.harnesses.log_recovery", _STRAND, 32768,
        "a partition directory (segments, offset/time/txn indexes, producer snapshots, "
        "checkpoints, a compaction swap) opened by the real loader, then the log "
        "checked, appended to, read back and reopened"),
    "record_batch": HarnessSpec(
        "fuzz.harnesses.record_batch", _STRAND, 8192,
        "record batches: the leader's validation of a producer's batches, the fetch "
        "path's verification and the consumer's decoder, checked against each other"),
    "gateway_requests": HarnessSpec(
        "fuzz.harnesses.gateway_requests", (*_STRAND, "services"), 8192,
        "the Gateway's request messages as bytes, then what the gateway, the storage "
        "node and the controller check and decode of them (ACLs, routing, produce "
        "records, topic admin plans, group protocol payloads)"),
    "gateway_security": HarnessSpec(
        "fuzz.harnesses.gateway_security", (*_STRAND, "services", "scramp"), 4096,
        "SCRAM messages (both sides), session tokens, and the ACL, quota and SCRAM "
        "credential fields of the security calls, with their etcd round trip"),
    # kio's readers are native code (no coverage to see): the seeds hold a valid request
    # of every served API (its lowest, a middle and its highest version), which the
    # mutations start from.
    "kafka_requests": HarnessSpec(
        "fuzz.harnesses.kafka_requests", (*_STRAND, "services"), 8192,
        "a Kafka request frame through the gateway's Kafka listener: header, served "
        "versions, the authentication gate and SASL, the body, each API's handler "
        "against a fake servicer, the response checked as kio reads it"),
    "operator_validation": HarnessSpec(
        "fuzz.harnesses.operator_validation", (*_STRAND, "strand_operator"), 4096,
        "a Topic or StrandUser custom resource as JSON: the Topic reconciled by the "
        "operator against a fake cluster (its spec's checks, the plan, the status it "
        "writes), the StrandUser's spec read"),
}
