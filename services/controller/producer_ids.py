"""Producer-id blocks (Kafka's ProducerIdControlManager, KIP-730).

The transaction coordinators hand out producer ids from blocks the active controller
grants. The next block lives in etcd (``pid-block``); each grant is one fenced
transaction (:meth:`MetadataWriter.allocate_producer_ids`), so a new controller
continues from the stored value and no id is ever granted twice.

Who may ask: a coordinator instance, named by its registration
``txn-coordinators/<id>`` and the id of the lease it lives under (its epoch, as a
storage node's broker epoch is its registration's lease, KIP-380). An instance that
lost its lease and registered again holds a new epoch; requests with the old one,
or from an id nobody registered, are refused with STALE_BROKER_EPOCH.
"""

from __future__ import annotations

import asyncio
import logging

from services.controller.writer import MetadataWriter
from strand.cluster.model import PRODUCER_ID_BLOCK_SIZE, ProducerIdsBlock
from strand.errors import InvalidRequestError

log = logging.getLogger(__name__)

MAX_COORDINATOR_ID_LENGTH = 255


def check_caller(coordinator_id: str, coordinator_epoch: int) -> None:
    """Refuse a request that cannot name a registration (INVALID_REQUEST)."""
    if not coordinator_id or "/" in coordinator_id \
            or len(coordinator_id) > MAX_COORDINATOR_ID_LENGTH:
        raise InvalidRequestError(
            f"coordinator id {coordinator_id[:MAX_COORDINATOR_ID_LENGTH]!r} is not an "
            f"instance id (1 to {MAX_COORDINATOR_ID_LENGTH} characters, no '/'): give the "
            "id the coordinator registered under txn-coordinators/<id>")
    if coordinator_epoch <= 0:
        raise InvalidRequestError(
            f"coordinator epoch {coordinator_epoch} is not a lease id: give the id of the "
            f"lease coordinator {coordinator_id!r} registered under")


class ProducerIdControl:
    def __init__(self, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> None:
        self.block_size = block_size
        # One grant at a time: concurrent ones would only lose compare-and-swaps.
        self._lock = asyncio.Lock()

    async def allocate(self, writer: MetadataWriter, coordinator_id: str,
                       coordinator_epoch: int) -> ProducerIdsBlock:
        check_caller(coordinator_id, coordinator_epoch)
        async with self._lock:
            block = await writer.allocate_producer_ids(coordinator_id, coordinator_epoch,
                                                       self.block_size)
        log.info("granted producer ids", extra={
            "coordinator": coordinator_id, "first": block.first, "last": block.last})
        return block
