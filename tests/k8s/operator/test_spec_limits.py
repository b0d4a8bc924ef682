"""Resource specs the fuzzer found (fuzz/harnesses/operator_validation.py,
docs/fuzzing.md): numbers beyond what the CRDs allow, which the operator took on
(its checks repeat the schema's, which can be bypassed) and then hung or failed on."""

from __future__ import annotations

import pytest

from strand_operator.topic_spec import (
    MAX_PARTITIONS,
    MAX_REPLICAS,
    InvalidTopicSpec,
    desired_topic,
)
from strand_operator.user_spec import InvalidUserSpec, desired_user


@pytest.mark.parametrize(("field", "value"), [
    ("partitions", MAX_PARTITIONS + 1), ("partitions", 10**12),
    ("replicas", MAX_REPLICAS + 1), ("replicas", 10**30),
])
def test_a_topic_beyond_the_crds_maximum_is_refused(field: str, value: int) -> None:
    """10^12 partitions went on to placement, which ran for ever (the CRD allows at most
    100,000 partitions and 32,767 replicas)."""
    spec = {"partitions": 3, "replicas": 2, field: value}
    with pytest.raises(InvalidTopicSpec, match=f"spec.{field} must be at most") as refused:
        desired_topic("t", spec)
    assert refused.value.reason == "InvalidSpec"


def test_the_crds_maximum_itself_is_accepted() -> None:
    desired = desired_topic("t", {"partitions": MAX_PARTITIONS, "replicas": MAX_REPLICAS})
    assert (desired.partitions, desired.replicas) == (MAX_PARTITIONS, MAX_REPLICAS)


@pytest.mark.parametrize("value", [1 << 63, 10**400])
def test_a_quota_beyond_int64_is_refused(value: int) -> None:
    """10^400 bytes per second reached float() and raised OverflowError."""
    spec = {"authentication": {"type": "tls"}, "quotas": {"producerByteRate": value}}
    with pytest.raises(InvalidUserSpec, match="must be at most") as refused:
        desired_user("app", spec)
    assert refused.value.reason == "InvalidQuota"
