"""The idempotent producer's state: its producer id and epoch, and per partition the
sequence numbers of its batches (the idempotent part of Kafka's TransactionManager).

Rules (KIP-98, KIP-360, as Kafka's client):

- A batch gets its sequence when it is drained for its first send (``assign``); a
  retry resends it with the same producer id, epoch and sequence, so storage
  recognises it (answers with the original offsets) instead of writing it twice.
- At most ``MAX_INFLIGHT_BATCHES`` batches of a partition are sent from its oldest
  unanswered batch on (answered ones after it count too: a call's deadline can pass
  while later calls succeed): storage remembers the last 5 batches per producer,
  so a retry is always within its window.
- A retried batch is sent only when it is the partition's first unanswered batch:
  the batches after it were refused as out of order (or will be) and follow it in
  sequence order, so records keep their order across retries.
- A gap that retries cannot close (a batch failed for good, storage lost the
  producer: ``UNKNOWN_PRODUCER_ID``, or an ``OUT_OF_ORDER_SEQUENCE_NUMBER`` for the
  partition's next expected batch) bumps the epoch once nothing is in flight; every
  partition restarts at sequence 0 and the queued retries get new sequences, in
  their order. An idempotent producer bumps its epoch itself, as Kafka's does
  (KIP-360): storage accepts a new epoch starting at sequence 0; at the largest
  epoch it asks for a new producer id instead.
- Only a batch known not to be written is renumbered by a bump: one storage refused
  by its sequence (``OUT_OF_ORDER_SEQUENCE_NUMBER``, ``UNKNOWN_PRODUCER_ID``; see
  ``attempt_failed``). A
  queued retry whose earlier attempt may have been written (its call timed out, the
  connection dropped, an ambiguous error: ``maybe_written``) would be written a
  second time under the new epoch. So, as in Kafka's client (a partition moves to the
  new epoch only once its in-flight batches are resolved), such a partition keeps
  its old producer id, epoch and sequences after the bump: its first unanswered
  batch alone is retried, where storage recognises it, until an answer resolves it
  (written; or refused by its sequence: the partition then restarts at sequence 0
  of the new epoch) or it fails for good, to the user, with ``OutcomeUnknownError``
  (the sender's). The other partitions move on at once.
- ``INVALID_PRODUCER_EPOCH`` / ``PRODUCER_FENCED`` are fatal: the producer can no
  longer send (``fatal_error``).

Thread-safe: the accumulator calls ``should_stop_drain``/``assign`` under its lock
and ``batch_done`` from whichever thread completes a batch; this never calls back.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from strand.producer.producer_batch import ProducerBatch, TopicPartition

__all__ = ["MAX_EPOCH", "MAX_INFLIGHT_BATCHES", "TransactionManager"]

MAX_INFLIGHT_BATCHES = 5  # storage's dedup window per producer and partition
MAX_EPOCH = 32767  # int16 in the batch header
_NO_SEQUENCE = -1


@dataclass
class _PartitionState:
    producer_id: int  # the id and epoch its sequences belong to
    epoch: int
    next_sequence: int = 0
    last_acked_sequence: int = _NO_SEQUENCE
    # In sequence order, from the oldest batch not answered for good (sent, or queued
    # for a retry) to the newest sent; answered ones stay until all before them are.
    inflight: list[ProducerBatch] = field(default_factory=list)

    def first_unanswered(self) -> ProducerBatch | None:
        return next((b for b in self.inflight if not b.is_done), None)

    def unresolved(self) -> bool:
        """A queued retry may have been written. (In practice only the first
        unanswered batch: storage writes a partition's sequences in order, so a later
        one refused by its sequence shows the earlier were not written either.)"""
        return any(b.maybe_written and not b.is_done for b in self.inflight)

    def renumber(self) -> None:
        """Its queued retries (known not written) get new sequences, in their order,
        when drained again."""
        for batch in self.inflight:
            if not batch.is_done:
                batch.reset_producer_state()


class TransactionManager:
    """Producer id, epoch and per-partition sequences of one idempotent producer."""

    transactional = False  # strand.producer.transactional.TransactionalManager: True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.producer_id = -1
        self.epoch = -1
        self._partitions: dict[TopicPartition, _PartitionState] = {}
        self._bump_needed = False
        self.fatal_error: BaseException | None = None
        self.init_error: BaseException | None = None  # the last InitProducerId failure

    # ---------------------------------------------------------------- identity

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def bump_needed(self) -> bool:
        return self._bump_needed

    @property
    def needs_new_producer_id(self) -> bool:
        """No producer id yet, or a bump past the largest epoch is due."""
        return not self.has_producer_id or (self._bump_needed and self.epoch >= MAX_EPOCH)

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        """A producer id from InitProducerId: every partition starts at sequence 0
        (but one with an unresolved retry, see the module doc)."""
        with self._lock:
            self.producer_id = producer_id
            self.epoch = epoch
            self.init_error = None
            self._reset_sequences()

    def request_bump(self) -> None:
        with self._lock:
            self._bump_needed = True

    def bump_epoch(self) -> bool:
        """Bump the epoch locally if one is due and possible (call only when nothing is
        in flight). False when the epoch is at its largest: a new producer id is due."""
        with self._lock:
            if not self._bump_needed:
                return True
            if self.epoch >= MAX_EPOCH:
                return False
            self.epoch += 1
            self._reset_sequences()
            return True

    def _reset_sequences(self) -> None:
        # Every partition restarts at sequence 0 of the new id/epoch but one with an
        # unresolved retry: it keeps its numbers until resolved (_current_state).
        for tp, state in list(self._partitions.items()):
            if not state.unresolved():
                state.renumber()
                del self._partitions[tp]
        self._bump_needed = False

    def _current_state(self, tp: TopicPartition) -> _PartitionState | None:
        """``tp``'s state; one a bump left on an older id/epoch is dropped (its
        retries renumbered) once nothing in it is unresolved."""
        state = self._partitions.get(tp)
        if state is not None and not self._is_current_state(state) and not state.unresolved():
            state.renumber()
            del self._partitions[tp]
            return None
        return state

    def _is_current_state(self, state: _PartitionState) -> bool:
        return (state.producer_id, state.epoch) == (self.producer_id, self.epoch)

    def set_fatal(self, error: BaseException) -> None:
        with self._lock:
            if self.fatal_error is None:
                self.fatal_error = error

    # ------------------------------------------------------------------ drain

    def should_stop_drain(self, tp: TopicPartition, batch: ProducerBatch) -> bool:
        """Whether ``batch`` (its partition's head) must wait before it is sent."""
        with self._lock:
            if not self.has_producer_id or self._bump_needed or self.fatal_error is not None:
                return True
            state = self._current_state(tp)
            if state is None:
                return False
            if not self._is_current_state(state):
                # Left on its old epoch by a bump: only its unresolved retry goes out,
                # where storage can recognise it; the rest wait for new numbers.
                return not (batch.maybe_written and state.first_unanswered() is batch)
            if batch.has_sequence:
                # A retry goes out only as its partition's first unanswered batch.
                first = state.first_unanswered()
                return first is not None and first is not batch
            return len(state.inflight) >= MAX_INFLIGHT_BATCHES

    def assign(self, tp: TopicPartition, batch: ProducerBatch) -> None:
        """Give a batch drained for its first send the partition's next sequence."""
        with self._lock:
            if batch.has_sequence:
                return
            state = self._partitions.get(tp)
            if state is None:
                state = self._partitions[tp] = _PartitionState(self.producer_id, self.epoch)
            batch.set_producer_state(self.producer_id, self.epoch, state.next_sequence,
                                     self.transactional)
            state.next_sequence += batch.record_count
            state.inflight.append(batch)

    # --------------------------------------------------------------- answers

    def is_next_sequence(self, tp: TopicPartition, batch: ProducerBatch) -> bool:
        """``batch`` is the one storage expects next (all earlier ones acknowledged)."""
        with self._lock:
            state = self._partitions.get(tp)
            last = _NO_SEQUENCE if state is None else state.last_acked_sequence
            return batch.base_sequence == last + 1

    def attempt_failed(self, batch: ProducerBatch, proves_unwritten: bool) -> None:
        """An attempt of ``batch`` got no answer or an error. Only some answers prove
        that no attempt was written (``proves_unwritten``): a refusal by its sequence
        (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID: within the window of 5,
        storage answers a written one as a duplicate) or of its bytes. Any other
        error may follow an append (a timeout, a leader that died after appending:
        the gateway answers NOT_LEADER_OR_FOLLOWER)."""
        with self._lock:
            if batch.has_sequence:
                batch.maybe_written = not proves_unwritten

    def is_current(self, batch: ProducerBatch) -> bool:
        """The batch carries this producer's current id and epoch."""
        return (batch.producer_id, batch.producer_epoch) == (self.producer_id, self.epoch)

    def batch_done(self, batch: ProducerBatch) -> None:
        """A batch completed or failed for good."""
        with self._lock:
            if not batch.has_sequence:
                return
            state = self._partitions.get(batch.topic_partition)
            if state is None or batch not in state.inflight:
                return  # from before a reset
            inflight = state.inflight
            while inflight and inflight[0].is_done:
                inflight.pop(0)
            if batch.succeeded:
                last = batch.base_sequence + batch.record_count - 1
                state.last_acked_sequence = max(state.last_acked_sequence, last)
            elif self._is_current_state(state):
                # Its sequences are a gap storage will never see filled. (A partition
                # left on an older epoch restarts at 0 of the current one anyway.)
                self._bump_needed = True
