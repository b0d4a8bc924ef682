"""Key hashing is Kafka's: murmur2 known values, kafka-python cross-check, partition spread."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from strand.producer import partitioner as partitioner_module
from strand.producer.partitioner import default_partition, murmur2, to_positive


def _int32(unsigned: int) -> int:
    return unsigned - (1 << 32) if unsigned & 0x80000000 else unsigned


# Expected values from Apache Kafka's own test of the Java implementation:
# apache/kafka clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java,
# UtilsTest.testMurmur2 (signed Java ints).
KAFKA_UTILS_TEST = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]

# Expected values from librdkafka's unit test, labelled as Java client results:
# confluentinc/librdkafka src/rdmurmur2.c, unittest_murmur2(), java_murmur2_results[]
# (int32 written in hex). Covers every tail length 0-3 and unaligned starts.
LIBRDKAFKA_JAVA_RESULTS = [
    (b"kafka", 0xD067CF64),
    (b"giberish123456789", 0x8F552B0C),
    (b"1234", 0x9FC97B14),
    (b"234", 0xE7C009CA),
    (b"34", 0x873930DA),
    (b"4", 0x5A4B5CA1),
    (b"PreAmbleWillBeRemoved,ThePrePartThatIs", 0x78424F1C),
    (b"reAmbleWillBeRemoved,ThePrePartThatIs", 0x4A62B377),
    (b"eAmbleWillBeRemoved,ThePrePartThatIs", 0xE0E4E09E),
    (b"AmbleWillBeRemoved,ThePrePartThatIs", 0x62B8B43F),
    (b"", 0x106E08D9),
]

# Partitions out of 1000, "compare with output from Kafka's
# org.apache.kafka.clients.producer.Partitioner": kafka-python test/test_partitioner.py,
# test_murmur2_java_compatibility.
KAFKA_PYTHON_JAVA_PARTITIONS = [
    (b"", 681),
    (b"a", 524),
    (b"ab", 434),
    (b"abc", 107),
    (b"123456789", 566),
    (b"\x00 ", 742),
]


@pytest.mark.parametrize(("key", "expected"), KAFKA_UTILS_TEST)
def test_murmur2_matches_kafka_utils_test(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@pytest.mark.parametrize(("key", "expected"), LIBRDKAFKA_JAVA_RESULTS)
def test_murmur2_matches_librdkafka_java_results(key: bytes, expected: int) -> None:
    assert murmur2(key) == _int32(expected)


@pytest.mark.parametrize(("key", "expected"), KAFKA_PYTHON_JAVA_PARTITIONS)
def test_default_partition_matches_java_partitioner(key: bytes, expected: int) -> None:
    assert default_partition(key, 1000) == expected


def test_murmur2_agrees_with_kafka_python_on_random_keys() -> None:
    rng = random.Random(20240611)
    for _ in range(5000):
        key = rng.randbytes(rng.randrange(0, 130))
        expected = kafka_python_murmur2(key)  # unsigned: the Java int's bit pattern
        assert murmur2(key) & 0xFFFFFFFF == expected, key
        assert default_partition(key, 97) == (expected & 0x7FFFFFFF) % 97


def test_murmur2_is_a_signed_32_bit_int() -> None:
    rng = random.Random(7)
    values = [murmur2(rng.randbytes(16)) for _ in range(2000)]
    assert all(-(1 << 31) <= v < (1 << 31) for v in values)
    assert any(v < 0 for v in values) and any(v > 0 for v in values)


def test_to_positive_clears_the_sign_bit_like_kafka() -> None:
    assert to_positive(0) == 0
    assert to_positive(12345) == 12345
    assert to_positive(-1) == 0x7FFFFFFF  # not abs(): Kafka's Utils.toPositive
    assert to_positive(-(1 << 31)) == 0
    assert to_positive(-973932308) == -973932308 & 0x7FFFFFFF


def test_default_partition_is_stable_and_in_range() -> None:
    rng = random.Random(3)
    for n in (1, 2, 3, 7, 100, 1024):
        for _ in range(200):
            key = rng.randbytes(rng.randrange(0, 40))
            p = default_partition(key, n)
            assert 0 <= p < n
            assert default_partition(key, n) == p


def test_default_partition_spreads_keys_evenly() -> None:
    rng = random.Random(11)
    n = 10
    counts = Counter(default_partition(rng.randbytes(16), n) for _ in range(20000))
    assert set(counts) == set(range(n))
    mean = 20000 / n
    # Binomial sd ~ 42 here: 5 sd either side is a generous, deterministic bound.
    assert all(abs(c - mean) < 210 for c in counts.values()), counts


def test_default_partition_accepts_other_byte_buffers() -> None:
    key = b"customer-42"
    expected = default_partition(key, 12)
    assert default_partition(bytearray(key), 12) == expected
    assert default_partition(memoryview(key), 12) == expected


def test_default_partition_memo_stays_bounded_and_correct() -> None:
    rng = random.Random(5)
    keys = [rng.randbytes(8) for _ in range(partitioner_module._MEMO_MAX_ENTRIES + 500)]
    for key in keys:
        default_partition(key, 31)
    assert len(partitioner_module._memo) <= partitioner_module._MEMO_MAX_ENTRIES
    for key in keys:  # hits, misses, after a clear: always the real hash
        assert default_partition(key, 31) == (kafka_python_murmur2(key) & 0x7FFFFFFF) % 31
    big = rng.randbytes(partitioner_module._MEMO_MAX_KEY + 1)
    default_partition(big, 31)
    assert big not in partitioner_module._memo


def test_default_partition_rejects_no_partitions() -> None:
    with pytest.raises(ValueError):
        default_partition(b"k", 0)
