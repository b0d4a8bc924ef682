"""The states of a transactional id and Kafka's table of valid transitions
(``TransactionState.validPreviousStates``).

    Empty ──AddPartitions──▶ Ongoing ──EndTxn(commit)──▶ PrepareCommit ──markers──▶ CompleteCommit
      ▲                        │   └──EndTxn(abort)───▶ PrepareAbort  ──markers──▶ CompleteAbort
      └─InitProducerId─────────┤                            ▲
                               └──InitProducerId / timeout──▶ PrepareEpochFence ─┘

Complete* and Empty lead back to Empty (InitProducerId) or Ongoing (the next
transaction). Where Strand differs: a client's PrepareCommit / PrepareAbort also
leads to Ongoing, the next transaction beginning while the markers are written
(services.transactions.txn_metadata: an epoch per transaction). Empty and
Complete* lead to Dead when the id expires. Prepare* and Complete* are the states
written to ``__transaction_state`` around the markers; PrepareEpochFence is never
written: it is the pending state of a fence, which goes on to PrepareAbort with
the bumped epoch.
"""

from __future__ import annotations

import enum

__all__ = ["VALID_PREVIOUS", "TxnState", "can_transition"]


class TxnState(enum.IntEnum):
    """Kafka's state ids (the byte in the log record) and names (what
    DescribeTransactions and ListTransactions show)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        """The state Kafka calls ``name`` ("Ongoing", "PrepareCommit", ...); None if
        there is none (ListTransactions reports such filters as unknown)."""
        return _BY_NAME.get(name)

    @property
    def expiration_allowed(self) -> bool:
        """May the transactional id expire in this state (no transaction open)?"""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def pending_transaction(self) -> bool:
        """Is a transaction open or completing (Kafka's ``hasPendingTransaction``)?"""
        return self in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def completing(self) -> bool:
        """Prepare*: the outcome is decided and its markers must be written."""
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

_S = TxnState
# For each state, the states it may be entered from.
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT,
                           _S.PREPARE_COMMIT, _S.PREPARE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


def can_transition(current: TxnState, target: TxnState) -> bool:
    return current in VALID_PREVIOUS[target]
