"""How a coordinator's writes to its shard are fenced when the shard changes owner.

A coordinator instance that stalls (a long GC pause, SIGSTOP, a slow disk) can lose
its shard's etcd lease while one of its writes is still on its way; a new owner takes
the shard over and loads it. Kafka avoids the late write because a coordinator *is*
its partition's leader; Strand's coordinators are clients of the log, so the log
itself must refuse the old owner (Kafka's own tool for that: producer epochs).

Every shard has its own producer id, reserved at the top of the int64 range (the
controller never grants those), and every take-over of the shard its own epoch, the
shard epoch from etcd (``shard-epochs/<kind>/<k>``, incremented by each take-over).
The owner writes idempotent batches under that id and epoch, and its first write
after taking the shard, before it loads, is a fence record: from then on the
partition refuses the previous owner's batches (``INVALID_PRODUCER_EPOCH``), and any
of them that landed before the fence is below it, so the load sees it.

Producer epochs are int16: a shard's epochs 1..32767 use its first producer id, the
next 32767 take-overs the next id, and so on (``generation``). A new generation's
owner first fences the previous generation's id at its largest epoch, which no owner
used, so an owner from just before the switch is refused too.
"""

from __future__ import annotations

from dataclasses import dataclass

from strand.cluster.model import FIRST_RESERVED_PRODUCER_ID, MAX_PRODUCER_ID

__all__ = [
    "FENCE_KEY",
    "FIRST_INTERNAL_PRODUCER_ID",
    "ShardWriterId",
    "shard_writer_ids",
]

MAX_EPOCH = 32767  # producer epochs are int16
EPOCHS_PER_ID = MAX_EPOCH  # epochs 0..32766 are owners'; 32767 only fences
KINDS = ("groups", "transactions")
MAX_SHARDS = 1 << 20  # per kind, far above any internal topic's partition count
_IDS_PER_GENERATION = len(KINDS) * MAX_SHARDS
# Enough generations for every shard epoch an int32 holds (MAX_SHARD_EPOCH).
_GENERATIONS = (2**31 - 1) // EPOCHS_PER_ID + 1
FIRST_INTERNAL_PRODUCER_ID = MAX_PRODUCER_ID - _GENERATIONS * _IDS_PER_GENERATION + 1
assert FIRST_INTERNAL_PRODUCER_ID >= FIRST_RESERVED_PRODUCER_ID
# The key of the fence record; a coordinator's own keys are JSON, never this.
FENCE_KEY = b"\x00strand:shard-fence"


@dataclass(frozen=True, slots=True)
class ShardWriterId:
    """The producer id and epoch one owner of a shard writes under."""

    producer_id: int
    producer_epoch: int


def _producer_id(kind: str, shard: int, generation: int) -> int:
    if kind not in KINDS:
        raise ValueError(f"unknown coordinator kind {kind!r}; one of {KINDS}")
    if not 0 <= shard < MAX_SHARDS:
        raise ValueError(f"shard {shard} out of range 0..{MAX_SHARDS - 1}")
    return (MAX_PRODUCER_ID - generation * _IDS_PER_GENERATION
            - KINDS.index(kind) * MAX_SHARDS - shard)


def shard_writer_ids(kind: str, shard: int, shard_epoch: int
                     ) -> tuple[ShardWriterId, ShardWriterId | None]:
    """The identity of the owner with ``shard_epoch`` (1, 2, ...), and the previous
    generation's identity to fence first when this owner starts a generation (None
    otherwise)."""
    if shard_epoch < 1:
        raise ValueError(f"shard epoch {shard_epoch}: the shard is not held")
    generation, epoch = divmod(shard_epoch, EPOCHS_PER_ID)
    writer = ShardWriterId(_producer_id(kind, shard, generation), epoch)
    previous = (ShardWriterId(_producer_id(kind, shard, generation - 1), MAX_EPOCH)
                if epoch == 0 and generation > 0 else None)
    return writer, previous
