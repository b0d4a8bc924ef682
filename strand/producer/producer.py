"""The SDK's Producer: Kafka's producer API over the gateway.

::

    from strand import Producer

    with Producer("127.0.0.1:7070", acks="all", linger_ms=5) as producer:
        future = producer.send("events", b"value", key=b"user-42")
        metadata = future.result()          # RecordMetadata(topic, partition, offset, ...)
        producer.send("events", b"more", on_delivery=lambda md, err: ...)
        producer.flush()

``send()`` is thread-safe and asynchronous: it appends the record to a batch in the
``RecordAccumulator`` and returns a future; a background sender thread
(``strand.producer.sender``) ships batches to the gateway. ``send()`` blocks only
for metadata the first time a topic is used, and when ``buffer_memory`` is full —
both together at most ``max_block_ms``, then it raises (RequestTimedOutError /
UnknownTopicOrPartitionError for metadata, BufferExhaustedError for memory).

Partitioning, as Kafka's default partitioner: an explicit ``partition`` is used as
given; a keyed record goes to ``to_positive(murmur2(key)) % partitions`` (the same
partition a Java client would pick); a record without a key goes to the topic's
sticky partition, which moves to another (random, leader available) partition each
time a batch fills (KIP-480).

An explicit ``partition`` is checked against the topic's partition count when the
producer already has the topic's metadata (waiting up to ``max_block_ms`` for a
refresh if the partition is beyond it). When it has none yet, ``send()`` does not
wait: the record is buffered at once and fails later with
UnknownTopicOrPartitionError if the partition turns out not to exist (at once for a
partition beyond the topic's count; after ``max_block_ms`` for a topic the cluster
does not know, as long as a keyed send would have waited). So records for known
partitions can be buffered while the cluster is still unreachable.

Keys and values are ``bytes`` or None; ``str`` is accepted and encoded as UTF-8
(as confluent-kafka does), ``bytearray``/``memoryview`` are copied; anything else is
a TypeError (serialize it first). Header keys are ``str``, header values ``bytes``,
``str`` (UTF-8) or None; headers may be a list of pairs or a dict.

``on_delivery(metadata, error)`` runs on the sender thread once the record is
acknowledged (``error`` None) or has failed (``metadata`` None); keep it short. The
future resolves right after. With ``acks=0`` records complete as soon as their
request is sent, with offset -1.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from types import TracebackType

from strand.client.bootstrap import resolve_bootstrap
from strand.client.channel import MAX_MESSAGE_BYTES
from strand.client.metadata import MetadataCache, TopicInfo
from strand.client.sasl import SaslCredentials
from strand.client.structs import OffsetAndMetadata, PreparedTransaction, TopicPartition
from strand.errors import (
    ErrorCode,
    InvalidTxnStateError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
    error_for,
)
from strand.errors import RecordTooLargeError as _RecordTooLargeError
from strand.producer.errors import ProducerClosedError
from strand.producer.future import RecordFuture
from strand.producer.partitioner import StickyPartitioner, default_partition
from strand.producer.producer_batch import Callback
from strand.producer.producer_metrics import producer_metrics
from strand.producer.record_accumulator import RecordAccumulator, RecordAppendResult
from strand.producer.sender import Sender, SenderConfig
from strand.producer.transaction_manager import MAX_INFLIGHT_BATCHES, TransactionManager
from strand.producer.transactional import (
    DEFAULT_TRANSACTION_TIMEOUT_MS,
    TransactionalManager,
    Transactions,
    validate_transactional,
)
from strand.producer.txn_calls import GroupMember, TxnCalls
from strand.producer.txn_state import TxnStateMachine
from strand.records import HEADER_SIZE, Compression, record_size
from strand.records.record import Header
from strand.security.tls import ClientTls

__all__ = ["Producer"]

log = logging.getLogger(__name__)

HeaderValue = bytes | str | None
Headers = Sequence[tuple[str, HeaderValue]] | Mapping[str, HeaderValue]
# Bytes a request needs beyond its batches (protobuf framing of topics and partitions).
_REQUEST_OVERHEAD = 64 * 1024
_ids = itertools.count(1)


# What a key or value may be (see the module doc): str is UTF-8 encoded, the others copied.
RecordData = bytes | bytearray | memoryview | str


def _to_bytes(data: object, what: str) -> bytes | None:
    if data is None or type(data) is bytes:
        return data
    if isinstance(data, str):
        return data.encode()
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"{what} must be bytes, str or None, not {type(data).__name__}: "
                    "serialize it first (e.g. json.dumps(obj).encode())")


def _headers(headers: Headers | None) -> list[Header]:
    if not headers:
        return []
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out: list[Header] = []
    for pair in pairs:
        try:
            key, value = pair
        except (TypeError, ValueError):
            raise TypeError(f"a header must be a (str, bytes | None) pair, not {pair!r}") from None
        if not isinstance(key, str):
            raise TypeError(f"header keys must be str, not {type(key).__name__}")
        out.append((key, _to_bytes(value, f"header {key!r}")))
    return out


def _acks(acks: int | str) -> int:
    if acks == "all" or acks == -1:
        return -1
    if acks in (0, 1) and not isinstance(acks, bool):
        return int(acks)
    raise ValueError(f"acks must be 0, 1, 'all' or -1, not {acks!r}")


# On by default, as Kafka >= 3.0 (KIP-679): every Strand cluster (dev, tests, chaos,
# benchmarks) runs a transaction coordinator, which hands out the producer ids.
IDEMPOTENCE_DEFAULT = True


def _idempotence(enable: bool | None, acks: int, retries: int, max_in_flight: int) -> bool:
    """Kafka's rules (ProducerConfig.postProcessAndValidateIdempotenceConfigs):
    explicitly on with conflicting settings is an error; unset, the default yields to
    them (logged, as Kafka does)."""
    conflicts = []
    if acks != -1:
        conflicts.append(f"acks='all' (not {acks})")
    if retries <= 0:
        conflicts.append(f"retries > 0 (not {retries})")
    if max_in_flight > MAX_INFLIGHT_BATCHES:
        conflicts.append(f"max_in_flight_requests <= {MAX_INFLIGHT_BATCHES} "
                         f"(not {max_in_flight})")
    if enable is None:
        if IDEMPOTENCE_DEFAULT and conflicts:
            log.info("idempotence is off: it needs %s (set enable_idempotence=True to "
                     "make this an error)", ", ".join(conflicts))
        return IDEMPOTENCE_DEFAULT and not conflicts
    if enable and conflicts:
        raise ValueError("enable_idempotence=True needs " + ", ".join(conflicts)
                         + ": change them or set enable_idempotence=False")
    return bool(enable)


class Producer:
    """Publishes records to Strand topics; see the module docstring.

    Settings (Kafka's names, snake_case; times in milliseconds):

    - ``acks``: 0 (no acknowledgement), 1 (the leader appended it), ``'all'``/-1 (every
      in-sync replica has it; the default, as Kafka's since 3.0: an acknowledged
      record survives the loss of its leader).
    - ``compression_type``: None, ``'gzip'``, ``'snappy'``, ``'lz4'`` or ``'zstd'``
      (per batch, end to end).
    - ``batch_size``: bytes of records per partition batch; ``linger_ms``: how long a
      batch waits to fill before it is sent.
    - ``buffer_memory``: bytes of records awaiting delivery; ``max_block_ms``: how long
      ``send()`` may block for metadata and memory together.
    - ``retries``, ``retry_backoff_ms``: retriable failures are retried this many
      times, this long apart, within ``delivery_timeout_ms`` from ``send()``.
    - ``request_timeout_ms``: one produce call's deadline.
    - ``max_request_size``: bytes of batches per call (and the largest record).
    - ``max_in_flight_requests``: concurrent produce calls per leader node. Records
      of a partition are appended in send order, but a retry may land after records
      sent later (as in Kafka without idempotence); with 1, order holds across
      retries too, at about half the throughput.
    - ``metadata_max_age_ms``: refresh metadata at least this often.
    - ``enable_idempotence``: each batch carries a producer id, epoch and sequence, so
      that storage writes a retried batch once and keeps records in send order across
      retries (strand.producer.transaction_manager). Needs ``acks='all'``,
      ``retries`` > 0 and ``max_in_flight_requests`` <= 5 (a ValueError when set
      True with other values) and a transaction coordinator in the cluster (it hands
      out producer ids). Unset: on (as Kafka >= 3.0) unless those settings were
      changed to conflicting values (then off, as Kafka's clients).
    """

    def __init__(
        self,
        bootstrap: str | None = None,
        *,
        acks: int | str = "all",
        compression_type: str | None = None,
        batch_size: int = 16384,
        linger_ms: float = 5,
        buffer_memory: int = 32 * 1024 * 1024,
        max_block_ms: float = 60_000,
        retries: int = 2_147_483_647,
        retry_backoff_ms: float = 100,
        delivery_timeout_ms: float = 120_000,
        request_timeout_ms: float = 30_000,
        max_request_size: int = 1_048_576,
        max_in_flight_requests: int = 5,
        metadata_max_age_ms: float = 300_000,
        client_id: str | None = None,
        enable_idempotence: bool | None = None,
        transactional_id: str | None = None,
        transaction_timeout_ms: int | None = None,
        security_protocol: str = "PLAINTEXT",
        ssl_cafile: str | None = None,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
        sasl_mechanism: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
    ) -> None:
        self._acks = _acks(acks)
        tls = ClientTls.from_settings(security_protocol, ssl_cafile, ssl_certfile, ssl_keyfile)
        sasl = SaslCredentials.from_settings(security_protocol, sasl_mechanism,
                                             sasl_plain_username, sasl_plain_password)
        if transactional_id is not None:
            if transaction_timeout_ms is None:
                transaction_timeout_ms = DEFAULT_TRANSACTION_TIMEOUT_MS
            validate_transactional(transactional_id, transaction_timeout_ms)
            if enable_idempotence is False:
                raise ValueError("a transactional producer is idempotent: drop "
                                 "enable_idempotence=False or the transactional_id")
            enable_idempotence = True
        elif transaction_timeout_ms is not None:
            raise ValueError("transaction_timeout_ms needs a transactional_id")
        self.idempotent = _idempotence(enable_idempotence, self._acks, retries,
                                       max_in_flight_requests)
        compression = Compression.parse(compression_type or "none")
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        if request_timeout_ms <= 0:
            raise ValueError(f"request_timeout_ms must be positive, got {request_timeout_ms}")
        if delivery_timeout_ms < linger_ms + request_timeout_ms:
            raise ValueError(
                f"delivery_timeout_ms ({delivery_timeout_ms}) must be at least linger_ms + "
                f"request_timeout_ms ({linger_ms + request_timeout_ms})")
        if not 0 < max_request_size <= MAX_MESSAGE_BYTES - _REQUEST_OVERHEAD:
            raise ValueError(f"max_request_size must be in (0, "
                             f"{MAX_MESSAGE_BYTES - _REQUEST_OVERHEAD}], got {max_request_size}")
        if max_in_flight_requests < 1:
            raise ValueError(f"max_in_flight_requests must be >= 1, got {max_in_flight_requests}")
        self.client_id = client_id or f"strand-producer-{next(_ids)}"
        self.bootstrap = resolve_bootstrap(bootstrap)
        self.max_block_ms = max_block_ms
        self.max_request_size = max_request_size
        self._metadata = MetadataCache(max_age_ms=metadata_max_age_ms,
                                       refresh_backoff_ms=retry_backoff_ms)
        # Validates the remaining settings (sizes, times) and raises ValueError.
        self._accumulator = RecordAccumulator(
            batch_size=batch_size, linger_ms=linger_ms, buffer_memory=buffer_memory,
            max_block_ms=max_block_ms, retry_backoff_ms=retry_backoff_ms,
            compression=compression, wakeup=self._wakeup)
        self.transactional_id = transactional_id
        self._transaction_manager: TransactionManager | None = None
        if transactional_id is not None:
            self._transaction_manager = TransactionalManager(TxnStateMachine(transactional_id))
        elif self.idempotent:
            self._transaction_manager = TransactionManager()
        self._accumulator.transaction_manager = self._transaction_manager
        self._accumulator.metrics = producer_metrics(self.client_id)
        self._partitioner = StickyPartitioner()
        self._sender = Sender(self.bootstrap, self._accumulator, self._metadata, SenderConfig(
            acks=self._acks, retries=retries, retry_backoff_ms=retry_backoff_ms,
            delivery_timeout_ms=delivery_timeout_ms, request_timeout_ms=request_timeout_ms,
            max_request_size=max_request_size, max_in_flight_requests=max_in_flight_requests,
            metadata_wait_ms=max_block_ms, client_id=self.client_id,
            transactional_id=transactional_id or "", tls=tls, sasl=sasl))
        self._transactions: Transactions | None = None
        if isinstance(self._transaction_manager, TransactionalManager):
            assert transactional_id is not None and transaction_timeout_ms is not None
            self._transactions = Transactions(
                self._transaction_manager,
                TxnCalls(transactional_id, transaction_timeout_ms, self.bootstrap,
                         request_timeout_ms, retry_backoff_ms),
                self._sender, self.flush, max_block_ms, delivery_timeout_ms,
                transaction_timeout_ms)
            self._sender.transactions = self._transactions
        self._close_lock = threading.Lock()
        self._closed = False
        self._sender.start()

    def _wakeup(self) -> None:
        self._sender.wakeup()

    # ------------------------------------------------------------------- send

    def send(
        self,
        topic: str,
        value: RecordData | None = None,
        key: RecordData | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        on_delivery: Callback | None = None,
    ) -> RecordFuture:
        """Queue a record for ``topic``; returns the future of its RecordMetadata."""
        if self._closed:
            raise ProducerClosedError("the producer is closed: cannot send")
        tm = self._transaction_manager
        if tm is not None and tm.fatal_error is not None:
            raise tm.fatal_error
        if self._sender.fatal_error is not None:
            raise ProducerClosedError("the producer's sender thread failed") \
                from self._sender.fatal_error
        if type(topic) is not str or not topic:
            raise TypeError(f"topic must be a non-empty str, not {topic!r}")
        key_bytes = _to_bytes(key, "key")
        value_bytes = _to_bytes(value, "value")
        record_headers = _headers(headers)
        if timestamp_ms is not None:
            if type(timestamp_ms) is not int:
                raise TypeError(f"timestamp_ms must be an int, not {timestamp_ms!r}")
            if timestamp_ms < 0:
                raise ValueError(f"timestamp_ms must be >= 0, not {timestamp_ms}")
        self._check_size(key_bytes, value_bytes, record_headers)
        if self._transactions is not None:
            self._transactions.check_send()  # before any wait for metadata
        callback = on_delivery
        start = time.monotonic()
        block_ms: float | None = None
        acc = self._accumulator
        result: RecordAppendResult
        if partition is None:
            info = self._metadata.topic(topic)
            if info is None or info.error != ErrorCode.NONE or not info.partitions:
                info = self._wait_on_metadata(topic, None, start)
                block_ms = self._remaining_ms(start)
            count = len(info.partitions)
            if key_bytes is not None:
                partition = default_partition(key_bytes, count)
                self._before_append(topic, partition)
                result = acc.append(topic, partition, key_bytes, value_bytes, record_headers,
                                    timestamp_ms, callback=callback, max_block_ms=block_ms)
            else:
                sticky = self._partitioner
                partition = sticky.partition(topic, count, info.available)
                self._before_append(topic, partition)
                result = acc.append(topic, partition, None, value_bytes, record_headers,
                                    timestamp_ms, callback=callback, abort_on_new_batch=True,
                                    max_block_ms=block_ms)
                if result.abort_for_new_batch:
                    partition = sticky.on_new_batch(topic, partition, count, info.available)
                    self._before_append(topic, partition)
                    result = acc.append(topic, partition, None, value_bytes, record_headers,
                                        timestamp_ms, callback=callback, max_block_ms=block_ms)
        else:
            if type(partition) is not int or partition < 0:
                raise ValueError(f"partition must be an int >= 0, not {partition!r}")
            count_known = self._metadata.partition_count(topic)
            if count_known is None:
                if self._metadata.add_topics([topic]):
                    self._sender.wakeup()
            elif partition >= count_known:
                self._wait_on_metadata(topic, partition, start)
                block_ms = self._remaining_ms(start)
            self._before_append(topic, partition)
            result = acc.append(topic, partition, key_bytes, value_bytes, record_headers,
                                timestamp_ms, callback=callback, max_block_ms=block_ms)
        future = result.future
        assert future is not None
        if result.new_batch_created:
            self._sender.note_partition((topic, partition))
            self._sender.wakeup()
        elif result.batch_is_full:
            self._sender.wakeup()
        return future

    def _before_append(self, topic: str, partition: int) -> None:
        if self._transactions is not None:  # the partition joins the open transaction
            self._transactions.before_send((topic, partition))

    def _check_size(self, key: bytes | None, value: bytes | None, headers: list[Header]) -> None:
        rough = (len(key) if key else 0) + (len(value) if value else 0)
        if rough + 1024 < self.max_request_size and not headers:
            return
        size = HEADER_SIZE + record_size(0, 0, key, value, headers)
        if size > self.max_request_size:
            raise _RecordTooLargeError(
                f"the record is {size} bytes when serialized, more than max_request_size "
                f"({self.max_request_size})")

    def _remaining_ms(self, start: float) -> float:
        return max(0.0, self.max_block_ms - (time.monotonic() - start) * 1000)

    def _wait_on_metadata(self, topic: str, partition: int | None, start: float) -> TopicInfo:
        """Block until the topic's metadata (with ``partition``) is known, up to max_block_ms."""
        metadata = self._metadata
        deadline = start + self.max_block_ms / 1000
        metadata.add_topics([topic])
        while True:
            version = metadata.version
            info = metadata.topic(topic)
            if (info is not None and info.error == ErrorCode.NONE and info.partitions
                    and (partition is None or partition < len(info.partitions))):
                return info
            if info is not None and info.error == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                raise error_for(info.error, info.error_message)  # waiting will not cure it
            if self._closed:
                raise ProducerClosedError("the producer was closed while waiting for metadata")
            if self._sender.fatal_error is not None or not self._sender.running:
                raise ProducerClosedError("the producer's sender thread is not running")
            metadata.request_update()
            self._sender.wakeup()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            metadata.wait_for_update(version, remaining)
        waited = f"within max_block_ms={self.max_block_ms:g}"
        if info is not None and info.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist ({waited})")
        if info is not None and info.error == ErrorCode.NONE and partition is not None:
            raise UnknownTopicOrPartitionError(
                f"partition {partition} of topic {topic!r} does not exist: the topic has "
                f"{len(info.partitions)} partitions ({waited})")
        cause = metadata.last_error
        raise RequestTimedOutError(
            f"no metadata for topic {topic!r} from gateway {self.bootstrap} {waited}"
            + (f": {cause}" if cause is not None else "")) from cause

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids (blocks up to max_block_ms for metadata)."""
        info = self._metadata.topic(topic)
        if info is None or info.error != ErrorCode.NONE or not info.partitions:
            info = self._wait_on_metadata(topic, None, time.monotonic())
        return [p.partition for p in info.partitions]

    # ----------------------------------------------------------- transactions

    def _txn(self, operation: str) -> Transactions:
        if self._transactions is None:
            raise InvalidTxnStateError(
                f"{operation} needs a transactional producer: create it with "
                "Producer(..., transactional_id=...)")
        if self._closed:
            raise ProducerClosedError(f"the producer is closed: cannot {operation}")
        return self._transactions

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register the transactional id with its coordinator (InitProducerId): older
        instances with the same id are fenced, and their open transaction is aborted
        (or completed, if it was committing). Call once, before the first
        ``begin_transaction()``. ``timeout`` in seconds (None: ``max_block_ms``);
        RequestTimedOutError when it passes: call again to keep waiting."""
        self._txn("init_transactions()").init_transactions(timeout)

    def begin_transaction(self) -> None:
        """Open a transaction (local: the coordinator hears of it with the first send)."""
        self._txn("begin_transaction()").begin_transaction()

    def send_offsets_to_transaction(
            self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
            group_metadata: GroupMember, timeout: float | None = None) -> None:
        """Commit a consumer group's offsets (the NEXT offset to read, per partition)
        with the transaction: they become the group's committed offsets if it commits,
        and vanish if it aborts. ``group_metadata``: the consumer's
        ``group_metadata()``, so that a zombie consumer of an older generation is
        fenced (KIP-447)."""
        self._txn("send_offsets_to_transaction()").send_offsets_to_transaction(
            offsets, group_metadata, timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush, then commit (EndTxn): every record and offset of the transaction
        becomes visible to read_committed consumers. TransactionAbortableError if a send
        of it failed (call ``abort_transaction()``); ProducerFencedError if a newer
        instance exists (close this one)."""
        self._txn("commit_transaction()").commit_transaction(timeout)

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTransaction | None:
        """The first phase of a two-phase commit (Kafka's KIP-939): flush every record
        of the open transaction, then hand its outcome to whoever holds the returned
        PreparedTransaction (``Admin.complete_transaction(prepared, commit=...)``, from
        any process, e.g. a Spark driver committing what its executors wrote). This
        producer can then only be closed, which leaves the transaction open. None when
        the transaction holds nothing. TransactionAbortableError if a send of it failed
        (call ``abort_transaction()``)."""
        return self._txn("prepare_transaction()").prepare_transaction(timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the open transaction: unsent records fail (their futures raise
        TransactionAbortableError), sent ones are never visible to read_committed
        consumers."""
        self._txn("abort_transaction()").abort_transaction(timeout)

    # ----------------------------------------------------------- flush / close

    def flush(self, timeout: float | None = None) -> None:
        """Send every buffered record now and wait until all sent so far are done
        (acknowledged or failed). ``timeout`` in seconds; RequestTimedOutError if it
        passes first. Must not be called from a delivery callback."""
        if threading.current_thread() is self._sender.thread:
            raise RuntimeError("flush() cannot be called from a delivery callback")
        acc = self._accumulator
        acc.flush_begin()
        self._sender.wakeup()
        if not acc.await_flush_completion(timeout):
            raise RequestTimedOutError(f"flush did not complete within {timeout} s")

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is buffered, then stop. ``timeout`` (seconds, None: no limit)
        bounds the wait; records still undelivered then fail with
        ProducerClosedError. ``close(0)`` fails them at once. Idempotent.
        A transactional producer closed inside a transaction aborts it first (its
        queued records fail with TransactionAbortableError); one closed while a commit
        or abort is under way waits for it."""
        with self._close_lock:
            already = self._closed
            self._closed = True
        sender = self._sender
        on_sender = threading.current_thread() is sender.thread
        if (not already and not on_sender and self._transactions is not None
                and (timeout is None or timeout > 0)):
            began = time.monotonic()
            try:
                self._transactions.end_on_close(timeout)
            except Exception as exc:  # the coordinator aborts it after its timeout
                log.warning("producer %s: the open transaction could not be ended on "
                            "close: %s", self.client_id, exc)
            if timeout is not None:
                timeout = max(0.001, timeout - (time.monotonic() - began))
        self._accumulator.close()
        if on_sender:
            sender.force_close()  # from a callback: waiting would deadlock
            return
        if already and not sender.thread.is_alive():
            return
        if timeout is not None and timeout <= 0:
            sender.force_close()
        else:
            sender.initiate_close()
            if not sender.join(timeout):
                log.warning("producer %s: close timed out after %s s with records undelivered",
                            self.client_id, timeout)
                sender.force_close()
        if not sender.join(10):
            log.error("producer %s: the sender thread did not stop", self.client_id)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Producer(client_id={self.client_id!r}, bootstrap={self.bootstrap!r}, "
                f"acks={self._acks}, closed={self._closed})")
