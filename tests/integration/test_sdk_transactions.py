"""Issue 12, point 6: the SDK's transactional Producer in a real cluster (3 storage
nodes, RF 3, a group and a transaction coordinator).

- A transaction over 3 partitions of 2 topics commits: a read_committed Consumer sees
  all of it; an aborted one it never sees (read_uncommitted sees both).
- Zombie fencing (acceptance 2): producers in another process, each inside a
  transaction with records written, are SIGSTOPped; new instances with the same
  transactional ids call init_transactions(); resumed, the zombies can neither write,
  add a partition nor commit (ProducerFencedError), and none of their records become
  visible to read_committed. The same for a producer whose transaction timed out.
- Calls in the wrong state are refused with typed errors and change nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Literal

import pytest

from strand import Admin, Consumer, ConsumerGroupMetadata, NewTopic, Producer, TopicPartition
from strand.errors import (
    IllegalGenerationError,
    InvalidGroupIdError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    ProducerFencedError,
    RecordTooLargeError,
    UnknownMemberIdError,
)
from strand.producer.errors import TransactionAbortableError
from tests.integration.test_transactions_service import Gateway
from tests.support.cluster import SdkCluster, placement, unique
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(txn_cluster: SdkCluster) -> SdkCluster:
    return txn_cluster


def topics(cluster: SdkCluster, prefix: str) -> list[TopicPartition]:
    """Two topics, 3 partitions in all, RF 3: ``prefix``-…-a (2) and ``prefix``-…-b (1)
    (unique names)."""
    prefix = unique(prefix)  # the cluster is the session's (conftest.txn_cluster)
    a, b = f"{prefix}-a", f"{prefix}-b"
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(a, 2, 3, config={"min.insync.replicas": "2"}),
                             NewTopic(b, 1, 3, config={"min.insync.replicas": "2"})])
    wait_until(lambda: all(len(isr) == 3 for t in (a, b)
                           for _, isr in placement(cluster, t).values()),
               30, "all replicas in sync")
    return [TopicPartition(a, 0), TopicPartition(a, 1), TopicPartition(b, 0)]


def read(cluster: SdkCluster, isolation: Literal["read_committed", "read_uncommitted"],
         partitions: list[TopicPartition], expect: int = 0, settle_s: float = 1.5
         ) -> list[str]:
    """Every value a consumer of that isolation level hands out: at least ``expect``
    of them (up to 30 s: the markers that move the LSO are written after EndTxn is
    answered), then until it has been quiet for ``settle_s``."""
    got: list[str] = []
    with Consumer(cluster.bootstrap, isolation_level=isolation, auto_offset_reset="earliest",
                  fetch_max_wait_ms=100) as consumer:
        consumer.assign(partitions)
        quiet_since = time.monotonic()
        deadline = quiet_since + 30
        while time.monotonic() < deadline and (
                len(got) < expect or time.monotonic() - quiet_since < settle_s):
            polled = consumer.poll(timeout_ms=200)
            for records in polled.values():
                got.extend(r.value.decode() for r in records if r.value is not None)
            if polled:
                quiet_since = time.monotonic()
    return got


def send_all(producer: Producer, partitions: list[TopicPartition], label: str) -> set[str]:
    values = {f"{label}-{tp.topic}-{tp.partition}-{i}" for tp in partitions for i in range(3)}
    for tp in partitions:
        for i in range(3):
            producer.send(tp.topic, f"{label}-{tp.topic}-{tp.partition}-{i}",
                          partition=tp.partition)
    return values


def test_commit_is_seen_whole_and_abort_never_by_read_committed(cluster: SdkCluster) -> None:
    partitions = topics(cluster, "ca")
    with Producer(cluster.bootstrap, transactional_id=unique("sdk-commit-abort"),
                  linger_ms=50) as producer:
        producer.init_transactions(30)
        producer.begin_transaction()
        committed = send_all(producer, partitions, "c")
        producer.commit_transaction(30)

        producer.begin_transaction()
        aborted = send_all(producer, partitions, "x")
        producer.flush(30)  # written to the logs, then aborted
        producer.abort_transaction(30)

        producer.begin_transaction()  # the producer goes on after an abort
        after = send_all(producer, partitions[:1], "after")
        producer.commit_transaction(30)

    assert sorted(read(cluster, "read_committed", partitions, len(committed | after))) == sorted(
        committed | after)
    everything = committed | aborted | after
    assert sorted(read(cluster, "read_uncommitted", partitions, len(everything))) == sorted(
        everything)


def test_abort_fails_the_unsent_records(cluster: SdkCluster) -> None:
    partitions = topics(cluster, "unsent")
    with Producer(cluster.bootstrap, transactional_id=unique("sdk-unsent"),
                  linger_ms=60_000, batch_size=1 << 20) as producer:
        producer.init_transactions(30)
        producer.begin_transaction()
        futures = [producer.send(tp.topic, b"never", partition=tp.partition)
                   for tp in partitions]
        producer.abort_transaction(30)
        for future in futures:
            with pytest.raises(TransactionAbortableError):
                future.result(5)
        producer.begin_transaction()
        producer.send(partitions[0].topic, b"kept", partition=0)
        producer.commit_transaction(30)
    assert read(cluster, "read_uncommitted", partitions, 1) == ["kept"]


def test_close_inside_a_transaction_aborts_it(cluster: SdkCluster) -> None:
    """As Kafka's client: a producer closed (here by an exception leaving its ``with``)
    with a transaction open aborts it. Its written records never become visible, its
    queued ones fail, and read_committed readers are not held back until the
    coordinator's timeout (60 s here, the default) aborts it: the records committed
    after it are readable at once."""
    partitions = topics(cluster, "close")
    with pytest.raises(RuntimeError, match="the application fails"), \
            Producer(cluster.bootstrap, transactional_id=unique("sdk-close")) as producer:
        producer.init_transactions(30)
        producer.begin_transaction()
        written = send_all(producer, partitions, "open")
        producer.flush(30)
        with Producer(cluster.bootstrap, transactional_id=unique("sdk-queued"),
                      linger_ms=60_000, batch_size=1 << 20) as queued:
            queued.init_transactions(30)
            queued.begin_transaction()
            never = queued.send(partitions[0].topic, b"queued", partition=0)
        with pytest.raises(TransactionAbortableError):
            never.result(5)
        raise RuntimeError("the application fails inside its transaction")
    with Producer(cluster.bootstrap, transactional_id=unique("sdk-after-close")) as after:
        after.init_transactions(30)
        after.begin_transaction()
        committed = send_all(after, partitions, "after")
        after.commit_transaction(30)
    assert sorted(read(cluster, "read_committed", partitions, len(committed))) == sorted(
        committed)
    everything = written | committed
    assert sorted(read(cluster, "read_uncommitted", partitions, len(everything))) == sorted(
        everything)


def test_a_failed_send_aborts_and_the_coordinator_gives_the_next_epoch(
        cluster: SdkCluster) -> None:
    """A batch refused for good leaves a sequence gap: the transaction can only abort,
    and the abort takes the next epoch from the coordinator (EndTxn's answer), not a
    local bump the coordinator would not know."""
    topic = unique("abortable")
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 3, config={"max.message.bytes": "2000"})])
    gateway = Gateway(cluster.bootstrap)
    tid = unique("sdk-abortable")
    with Producer(cluster.bootstrap, transactional_id=tid, linger_ms=5) as producer:
        producer.init_transactions(30)
        epoch = gateway.describe(tid).producer_epoch
        producer.begin_transaction()
        producer.send(topic, b"small", partition=0).result(30)
        too_large = producer.send(topic, b"x" * 5000, partition=0)
        with pytest.raises(RecordTooLargeError):
            too_large.result(30)
        with pytest.raises(TransactionAbortableError) as info:
            producer.commit_transaction(30)
        assert isinstance(info.value.cause, RecordTooLargeError)
        with pytest.raises(TransactionAbortableError):  # only an abort is allowed now
            producer.send(topic, b"more", partition=0)
        producer.abort_transaction(30)
        described = gateway.describe(tid)
        assert described.transaction_state in ("PrepareAbort", "CompleteAbort"), described
        assert described.producer_epoch == epoch + 1, described
        producer.begin_transaction()  # under the new epoch, from sequence 0
        producer.send(topic, b"after", partition=0)
        producer.commit_transaction(30)
    gateway.channel.close()
    assert read(cluster, "read_committed", [TopicPartition(topic, 0)], 1) == ["after"]
    assert read(cluster, "read_uncommitted", [TopicPartition(topic, 0)], 2) == [
        "small", "after"]


ZOMBIE = r"""
import json, sys
from strand import Producer
from strand.errors import StrandError

bootstrap, spec = sys.argv[1], json.loads(sys.argv[2])
producers = {}
for tid in spec["tids"]:
    p = Producer(bootstrap, transactional_id=tid, linger_ms=5, request_timeout_ms=5000,
                 delivery_timeout_ms=15000)
    p.init_transactions(30)
    p.begin_transaction()
    for topic, partition in spec["partitions"]:
        p.send(topic, f"zombie-{tid}-{topic}-{partition}", partition=partition)
    p.flush(30)
    producers[tid] = p
print("sent", flush=True)
sys.stdin.readline()  # SIGSTOPped here, resumed after the new instances took over
results = {}

def outcome(call):
    try:
        call()
    except StrandError as exc:
        return type(exc).__name__
    return "ok"

write, add, commit = spec["tids"]
topic, partition = spec["partitions"][0]
new_topic, new_partition = spec["new"]
future = producers[write].send(topic, "zombie-late-write", partition=partition)
results["write"] = outcome(lambda: future.result(20))
results["write_then_commit"] = outcome(lambda: producers[write].commit_transaction(20))
results["add"] = outcome(lambda: producers[add].send(new_topic, "zombie-new-partition",
                                                     partition=new_partition).result(20))
results["add_then_commit"] = outcome(lambda: producers[add].commit_transaction(20))
results["commit"] = outcome(lambda: producers[commit].commit_transaction(20))
results["commit_again"] = outcome(lambda: producers[commit].begin_transaction())
print(json.dumps(results), flush=True)
for p in producers.values():
    p.close(5)
"""


def test_a_resumed_zombie_can_neither_write_add_nor_commit(cluster: SdkCluster) -> None:
    partitions = topics(cluster, "zombie")
    spare = TopicPartition(unique("zombie-spare"), 0)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(spare.topic, 1, 3)])
    tids = [unique(f"zombie-{role}") for role in ("write", "add", "commit")]
    spec = {"tids": tids, "partitions": [list(tp) for tp in partitions], "new": list(spare)}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", ZOMBIE, cluster.bootstrap, json.dumps(spec)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "sent"
        os.kill(child.pid, signal.SIGSTOP)
        # New instances take over: their init fences the zombies and aborts their
        # open transactions; each new instance then commits records of its own.
        for tid in tids:
            with Producer(cluster.bootstrap, transactional_id=tid) as fresh:
                fresh.init_transactions(60)
                fresh.begin_transaction()
                for tp in partitions:
                    fresh.send(tp.topic, f"fresh-{tid}-{tp.topic}-{tp.partition}",
                               partition=tp.partition)
                fresh.commit_transaction(30)
        os.kill(child.pid, signal.SIGCONT)
        child.stdin.write("go\n")
        child.stdin.flush()
        results = json.loads(child.stdout.readline())
        assert child.wait(60) == 0
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
            child.wait()
    fenced = {ProducerFencedError.__name__, InvalidProducerEpochError.__name__}
    assert results["write"] in fenced, results  # storage: an older epoch
    assert results["write_then_commit"] == ProducerFencedError.__name__, results
    assert results["add"] == ProducerFencedError.__name__, results  # the coordinator
    assert results["add_then_commit"] == ProducerFencedError.__name__, results
    assert results["commit"] == ProducerFencedError.__name__, results
    assert results["commit_again"] == ProducerFencedError.__name__, results

    visible = read(cluster, "read_committed", [*partitions, spare], len(tids) * len(partitions))
    assert not [v for v in visible if v.startswith("zombie")], visible
    assert sorted(visible) == sorted(f"fresh-{tid}-{tp.topic}-{tp.partition}"
                                     for tid in tids for tp in partitions)
    # The zombies' records are in the logs, aborted.
    unfiltered = read(cluster, "read_uncommitted", partitions, 6 * len(partitions))
    assert len([v for v in unfiltered if v.startswith("zombie-")]) >= 3 * len(partitions)


def test_a_producer_whose_transaction_timed_out_is_fenced(cluster: SdkCluster) -> None:
    partitions = topics(cluster, "timeout")
    gateway = Gateway(cluster.bootstrap)
    tid = unique("sdk-timed-out")
    with Producer(cluster.bootstrap, transactional_id=tid, transaction_timeout_ms=1000,
                  linger_ms=5) as producer:
        producer.init_transactions(30)
        # Read before the transaction opens: on a loaded machine the 1 s timeout can
        # pass (and the epoch be bumped) before the sends below are flushed.
        epoch = gateway.describe(tid).producer_epoch
        producer.begin_transaction()
        send_all(producer, partitions, "late")
        producer.flush(30)
        # The coordinator aborts it under a bumped epoch (timed-out transactions are
        # looked for every 200 ms in the test clusters).
        wait_until(lambda: (gateway.describe(tid).transaction_state == "CompleteAbort"
                            and gateway.describe(tid).producer_epoch == epoch + 1),
                   30, "the coordinator to abort the timed-out transaction")
        with pytest.raises(ProducerFencedError):
            producer.commit_transaction(20)
        with pytest.raises(ProducerFencedError):  # fatal: every later call
            producer.begin_transaction()
        with pytest.raises(ProducerFencedError):
            producer.send(partitions[0].topic, b"more", partition=0)
    assert read(cluster, "read_committed", partitions) == []
    gateway.channel.close()


def test_calls_in_the_wrong_state_are_refused_and_change_nothing(cluster: SdkCluster) -> None:
    partitions = topics(cluster, "wrong")
    tp = partitions[0]
    with Producer(cluster.bootstrap, transactional_id=unique("sdk-wrong-state")) as producer:
        with pytest.raises(InvalidTxnStateError, match="init_transactions"):
            producer.begin_transaction()
        producer.init_transactions(30)
        with pytest.raises(InvalidTxnStateError, match="already called"):
            producer.init_transactions(30)
        with pytest.raises(InvalidTxnStateError, match="begin_transaction"):
            producer.commit_transaction(10)
        with pytest.raises(InvalidTxnStateError, match="begin_transaction"):
            producer.abort_transaction(10)
        with pytest.raises(InvalidTxnStateError, match="begin_transaction"):
            producer.send(tp.topic, b"outside", partition=tp.partition)
        with pytest.raises(InvalidTxnStateError, match="begin_transaction"):
            producer.send_offsets_to_transaction(
                {tp: 1}, ConsumerGroupMetadata("g", -1, "", None), 10)
        producer.begin_transaction()
        with pytest.raises(InvalidTxnStateError, match="already open"):
            producer.begin_transaction()
        with pytest.raises(InvalidGroupIdError):
            producer.send_offsets_to_transaction(
                {tp: 1}, ConsumerGroupMetadata("", -1, "", None), 10)
        with pytest.raises(ValueError, match="offset"):
            producer.send_offsets_to_transaction(
                {tp: -1}, ConsumerGroupMetadata("g", -1, "", None), 10)
        # None of that changed the transaction: it goes on and commits.
        producer.send(tp.topic, b"inside", partition=tp.partition)
        producer.commit_transaction(30)
    assert read(cluster, "read_committed", partitions, 1) == ["inside"]


def test_offsets_commit_with_the_transaction_and_vanish_with_its_abort(
        cluster: SdkCluster) -> None:
    """send_offsets_to_transaction: the group's offsets become committed with the
    transaction, not before, and never when it aborts; a consumer's group metadata of
    another generation, or of no member, is refused (KIP-447) and the transaction can
    only abort, leaving the committed offsets as they were."""
    partitions = topics(cluster, "offsets")
    a, b = partitions[0].topic, partitions[-1].topic
    source = [tp for tp in partitions if tp.topic == a]
    group = unique("offsets-group")
    with Producer(cluster.bootstrap) as plain:
        for tp in source:
            for i in range(4):
                plain.send(tp.topic, f"in-{tp.partition}-{i}", partition=tp.partition)
    gateway = Gateway(cluster.bootstrap)
    tid = unique("sdk-offsets")

    def ended() -> bool:
        return gateway.describe(tid).transaction_state in ("CompleteCommit", "CompleteAbort")

    with Consumer(cluster.bootstrap, group_id=group, enable_auto_commit=False,
                  isolation_level="read_committed") as consumer, \
            Producer(cluster.bootstrap, transactional_id=tid) as producer:
        consumer.subscribe([a])
        wait_until(lambda: consumer.poll(timeout_ms=200) is not None
                   and len(consumer.assignment()) == len(source), 30, "the group's assignment")
        member = consumer.group_metadata()
        assert member.generation_id >= 0 and member.member_id
        producer.init_transactions(30)

        producer.begin_transaction()
        producer.send(b, b"aborted", partition=0)
        producer.send_offsets_to_transaction({tp: 1 for tp in source}, member, 30)
        producer.abort_transaction(30)
        wait_until(ended, 30, "the abort to complete")
        assert [consumer.committed(tp) for tp in source] == [None] * len(source)

        producer.begin_transaction()
        producer.send(b, b"committed", partition=0)
        producer.send_offsets_to_transaction({tp: 2 for tp in source}, member, 30)
        producer.commit_transaction(30)
        wait_until(lambda: [consumer.committed(tp) for tp in source] == [2] * len(source),
                   30, "the offsets to commit with the transaction")

        stale = ConsumerGroupMetadata(group, member.generation_id + 7,
                                      member.member_id, None)
        unknown = ConsumerGroupMetadata(group, -1, "no-such-member", None)
        for wrong, cause in ((stale, IllegalGenerationError),
                             (unknown, UnknownMemberIdError)):
            producer.begin_transaction()
            with pytest.raises(TransactionAbortableError) as info:
                producer.send_offsets_to_transaction({tp: 3 for tp in source}, wrong, 30)
            assert isinstance(info.value.cause, cause), info.value
            with pytest.raises(TransactionAbortableError):
                producer.commit_transaction(30)
            producer.abort_transaction(30)
            wait_until(ended, 30, "the abort to complete")
            assert [consumer.committed(tp) for tp in source] == [2] * len(source)
    gateway.channel.close()
    assert read(cluster, "read_committed", [TopicPartition(b, 0)], 1) == [
        "committed"]


def test_the_next_transaction_adds_the_last_ones_partitions_at_once(
        cluster: SdkCluster) -> None:
    """After a commit, begin_transaction() adds the partitions the last transaction
    had, in one AddPartitionsToTxn, while the markers of that transaction may still
    be being written (it runs under the next epoch). A partition so added ahead
    whose topic is gone since is dropped, not a failure of the transaction."""
    partitions = topics(cluster, "ahead")
    gone = unique("ahead-gone")
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(gone, 1, 3)])
    gateway = Gateway(cluster.bootstrap)
    tid = unique("sdk-ahead")

    def described() -> tuple[str, int, set[tuple[str, int]]]:
        answer = gateway.describe(tid)
        return (answer.transaction_state, answer.producer_epoch,
                {(t.topic, p) for t in answer.topics for p in t.partitions})

    with Producer(cluster.bootstrap, transactional_id=tid, linger_ms=5) as producer:
        producer.init_transactions(30)
        first_epoch = described()[1]
        producer.begin_transaction()
        committed = send_all(producer, [*partitions[:2], TopicPartition(gone, 0)], "one")
        producer.commit_transaction(30)
        producer.begin_transaction()  # nothing sent yet: the partitions go in at once
        wait_until(lambda: described() == (
            "Ongoing", first_epoch + 1, {*map(tuple, partitions[:2]), (gone, 0)}), 30,
            "the last transaction's partitions to be added to the next one")
        committed |= send_all(producer, partitions[2:], "two")
        producer.commit_transaction(30)
        with Admin(cluster.bootstrap) as admin:
            admin.delete_topics([gone])
        producer.begin_transaction()  # adds the deleted topic's partition ahead, too
        committed |= send_all(producer, partitions[:1], "three")
        producer.commit_transaction(30)
        assert described()[1] == first_epoch + 3  # an epoch per transaction
    committed = {v for v in committed if gone not in v}
    assert sorted(read(cluster, "read_committed", partitions, len(committed))) == sorted(
        committed)


def test_a_commit_in_a_loop_opens_the_next_transaction(cluster: SdkCluster) -> None:
    """A producer that begins its next transaction soon after each commit gets it
    opened by the commit itself, with the partitions it wrote (one coordinator write
    for the end and the begin; no AddPartitionsToTxn). Left unused, the opened
    transaction is ended without fencing the producer (an abort of nothing); and
    ``close()`` ends it too. Every committed record is read back, once."""
    partitions = topics(cluster, "opens")
    gateway = Gateway(cluster.bootstrap)
    tid = unique("sdk-opens")

    def described() -> tuple[str, int, set[tuple[str, int]]]:
        answer = gateway.describe(tid)
        return (answer.transaction_state, answer.producer_epoch,
                {(t.topic, p) for t in answer.topics for p in t.partitions})

    # transaction_timeout_ms 2 s: an opened transaction unused for 0.5 s is ended.
    with Producer(cluster.bootstrap, transactional_id=tid, linger_ms=5,
                  transaction_timeout_ms=2000) as producer:
        producer.init_transactions(30)
        epoch = described()[1]
        producer.begin_transaction()
        committed = send_all(producer, partitions, "one")
        producer.commit_transaction(30)
        # not yet seen committing in a loop: nothing opened
        assert described()[0] in ("PrepareCommit", "CompleteCommit")
        producer.begin_transaction()
        committed |= send_all(producer, partitions, "two")
        producer.commit_transaction(30)
        # begun right after the last commit: open already, under the next epoch
        assert described() == ("Ongoing", epoch + 2, set(map(tuple, partitions)))
        producer.begin_transaction()
        committed |= send_all(producer, partitions[:1], "three")
        producer.commit_transaction(30)
        # only the partition written to goes on into the next one
        assert described() == ("Ongoing", epoch + 3, {tuple(partitions[0])})
        # unused: ended after 0.5 s, under its own epoch; no fence
        wait_until(lambda: described()[0] == "CompleteAbort", 30,
                   "the unused opened transaction to be ended")
        assert described()[1] == epoch + 4
        producer.begin_transaction()
        committed |= send_all(producer, partitions[1:], "four")
        producer.commit_transaction(30)
        # begun long after the last commit: this one opens nothing
        assert described()[0] in ("PrepareCommit", "CompleteCommit")
        producer.begin_transaction()
        committed |= send_all(producer, partitions[1:], "five")
        producer.commit_transaction(30)
        assert described()[0] == "Ongoing"
    # close() ended the one the last commit opened
    assert described()[0] in ("PrepareAbort", "CompleteAbort")
    assert sorted(read(cluster, "read_committed", partitions, len(committed))) == sorted(
        committed)
    gateway.channel.close()
