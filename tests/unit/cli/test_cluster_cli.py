"""``strand cluster status`` against a fake Admin and a fake consumer: what it asks
for (configs only of shrunk topics, end offsets only of led partitions, nothing of
the groups with --no-lag), its exit status per verdict, its text and JSON, coordinators
that do not answer, and errors (exit status 3, with what failed)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

import strand.cli.cluster as cluster_cli
from strand.admin import (
    ClusterDescription,
    ConfigValue,
    GroupListing,
    PartitionDescription,
    PartitionReassignment,
    TopicDescription,
)
from strand.cli.cluster import EXIT_UNKNOWN, group_lag
from strand.cli.common import bootstrap
from strand.cli.main import cli
from strand.client.channel import TransportError
from strand.client.metadata import BrokerInfo
from strand.client.structs import TopicPartition
from strand.errors import (
    ClusterAuthorizationFailedError,
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)

TP = TopicPartition


def partition(number: int, leader: int | None, replicas: tuple[int, ...],
              isr: tuple[int, ...] | None = None) -> PartitionDescription:
    return PartitionDescription(number, leader, 3, replicas, replicas if isr is None else isr)


class FakeConsumer:
    def __init__(self, ends: dict[TopicPartition, int], fail: Exception | None) -> None:
        self.ends = ends
        self.fail = fail
        self.asked: list[tuple[list[TopicPartition], float | None]] = []

    def __enter__(self) -> FakeConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def end_offsets(self, partitions: Sequence[TopicPartition],
                    timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        self.asked.append((list(partitions), timeout_ms))
        if self.fail is not None:
            raise self.fail
        return {tp: self.ends[tp] for tp in partitions}


class FakeAdmin:
    """A three-node cluster, healthy until a test changes it; records every call."""

    def __init__(self) -> None:
        self.brokers = [BrokerInfo(n, "127.0.0.1", 9000 + n, f"r{n}") for n in (1, 2, 3)]
        self.controller: str | None = "controller-a"
        self.topics: dict[str, list[PartitionDescription]] = {
            "orders": [partition(0, 1, (1, 2, 3)), partition(1, 2, (2, 3, 1))],
            "__consumer_offsets": [partition(0, 3, (3, 1, 2))]}
        self.configs: dict[str, dict[str, ConfigValue]] = {}
        self.reassignments: list[PartitionReassignment] = []
        self.groups: list[GroupListing] = []
        self.offsets: dict[str, dict[TopicPartition, int] | Exception] = {}
        self.fail: dict[str, Exception] = {}
        self.calls: list[tuple[str, Any]] = []

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def _call(self, name: str, argument: Any = None) -> None:
        self.calls.append((name, argument))
        if name in self.fail:
            raise self.fail.pop(name)

    def called(self, name: str) -> list[Any]:
        return [argument for called, argument in self.calls if called == name]

    def describe_cluster(self) -> ClusterDescription:
        self._call("describe_cluster")
        return ClusterDescription("prod", None, tuple(self.brokers), self.controller)

    def list_topics(self, include_internal: bool = False) -> list[str]:
        self._call("list_topics", include_internal)
        return sorted(self.topics)

    def describe_topics(self, names: Sequence[str]) -> list[TopicDescription]:
        self._call("describe_topics", list(names))
        return [TopicDescription(n, f"id-{n}", n.startswith("__"), tuple(self.topics[n]))
                for n in names]

    def describe_configs(self, topic: str) -> dict[str, ConfigValue]:
        self._call("describe_configs", topic)
        return self.configs.get(topic, {"min.insync.replicas": ConfigValue(
            "min.insync.replicas", "1", True)})

    def list_partition_reassignments(self, topics: Sequence[str] = ()
                                     ) -> list[PartitionReassignment]:
        self._call("list_partition_reassignments")
        return self.reassignments

    def list_groups(self, timeout_ms: int | None = None) -> list[GroupListing]:
        self._call("list_groups", timeout_ms)
        return self.groups

    def list_group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        self._call("list_group_offsets", group_id)
        found = self.offsets.get(group_id, {})
        if isinstance(found, Exception):
            raise found
        return found


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> FakeAdmin:
    fake = FakeAdmin()

    def open_admin(ctx: click.Context) -> FakeAdmin:
        bootstrap(ctx)  # as the real one: the gateway an error message names
        return fake

    monkeypatch.setattr(cluster_cli, "open_admin", open_admin)
    return fake


@pytest.fixture
def consumers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeConsumer]]:
    """Every consumer the command opened; ``ENDS`` answers their end offsets."""
    opened: list[FakeConsumer] = []

    def open_consumer(ctx: click.Context) -> FakeConsumer:
        opened.append(FakeConsumer(ENDS, END_FAILURE[0] if END_FAILURE else None))
        return opened[-1]

    monkeypatch.setattr(cluster_cli, "open_consumer", open_consumer)
    yield opened
    END_FAILURE.clear()


ENDS = {TP("orders", 0): 100, TP("orders", 1): 50, TP("single", 0): 7}
END_FAILURE: list[Exception] = []


def status(*args: str) -> Result:
    return CliRunner().invoke(cli, ["--bootstrap", "127.0.0.1:7070", "cluster", "status",
                                    *args])


def report(*args: str, exit_status: int) -> dict[str, Any]:
    result = status("--json", *args)
    assert result.exit_code == exit_status, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    assert document["exit_status"] == exit_status
    return document


# ----------------------------------------------------------------- verdicts


def test_a_healthy_cluster_exits_0_and_says_so_first(admin: FakeAdmin,
                                                     consumers: list[FakeConsumer]) -> None:
    result = status()
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "HEALTHY"
    text = result.stdout
    assert "3 alive: 1 (rack r1), 2 (rack r2), 3 (rack r3)" in text
    assert "2 (3 partitions)" in text  # internal topics count
    assert "controller-a" in text
    assert "controller" not in result.stderr
    assert admin.called("list_topics") == [True]
    assert admin.called("describe_configs") == []  # every ISR whole: nothing to check
    assert consumers == []  # no group: no end offsets


def test_a_shrunk_isr_is_degraded_exit_1_with_the_partitions_listed(
        admin: FakeAdmin, consumers: list[FakeConsumer]) -> None:
    admin.brokers = admin.brokers[:2]
    admin.topics["__consumer_offsets"] = [partition(0, 1, (3, 1, 2), (1, 2))]
    admin.topics["orders"] = [partition(0, 1, (1, 2, 3), (1, 2)),
                              partition(1, 2, (2, 3, 1), (2, 1))]
    admin.configs["orders"] = {"min.insync.replicas": ConfigValue(
        "min.insync.replicas", "3", False)}
    result = status()
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines()[0] == (
        "DEGRADED: 2 partitions under min.insync.replicas; 3 under-replicated partitions; "
        "1 storage node not alive: 3")
    assert "affected partitions" in result.stdout
    assert "under min ISR, under-replicated" in result.stdout
    assert "not alive but named by replica lists: 3" in result.stdout
    assert admin.called("describe_configs") == ["__consumer_offsets", "orders"]  # shrunk ones


def test_an_offline_partition_is_unavailable_exit_2(admin: FakeAdmin,
                                                   consumers: list[FakeConsumer]) -> None:
    admin.topics["single"] = [partition(0, None, (3,))]
    document = report(exit_status=2)
    assert document["verdict"] == "UNAVAILABLE"
    assert document["offline_partitions"]["partitions"] == [
        {"topic": "single", "partition": 0, "leader": None, "replicas": [3], "isr": [3]}]


def test_no_active_controller_is_unavailable_exit_2(admin: FakeAdmin,
                                                   consumers: list[FakeConsumer]) -> None:
    admin.controller = None  # the election key is empty: nobody won (yet)
    document = report(exit_status=2)
    assert document["verdict"] == "UNAVAILABLE"
    assert document["controller"] == {"id": None, "reported": True}


def test_a_reassignment_in_progress_is_degraded(admin: FakeAdmin,
                                                consumers: list[FakeConsumer]) -> None:
    admin.reassignments = [PartitionReassignment("orders", 0, (1, 2, 3), (3,), (), (1, 2))]
    result = status()
    assert result.exit_code == 1
    assert "reassigning (adding 3, removing -)" in result.stdout


def test_the_limit_bounds_every_list(admin: FakeAdmin, consumers: list[FakeConsumer]) -> None:
    admin.topics["wide"] = [partition(p, 1, (1, 2), (1,)) for p in range(30)]
    document = report("--limit", "3", exit_status=1)
    under = document["under_replicated_partitions"]
    assert (under["count"], under["more"], len(under["partitions"])) == (30, 27, 3)
    text = status("--limit", "2").stdout
    assert "wide-0" in text and "wide-1" in text and "wide-2" not in text
    assert "… and 28 more under-replicated (--limit)" in text


# -------------------------------------------------------------- consumer groups


def test_lag_per_group_asks_end_offsets_once_and_only_of_led_partitions(
        admin: FakeAdmin, consumers: list[FakeConsumer]) -> None:
    admin.topics["single"] = [partition(0, None, (3,))]
    admin.groups = [GroupListing("billing", "Stable", "consumer"),
                    GroupListing("etl", "Empty", "consumer"),
                    GroupListing("fresh", "Empty", "consumer"),
                    GroupListing("gone", "Dead", "consumer")]
    admin.offsets = {"billing": {TP("orders", 0): 90, TP("orders", 1): 50},
                     "etl": {TP("orders", 0): 10, TP("single", 0): 3},
                     "gone": GroupIdNotFoundError("deleted")}
    document = report("--timeout-ms", "1234", exit_status=2)
    (consumer,) = consumers
    assert consumer.asked == [([TP("orders", 0), TP("orders", 1)], 1234)]
    assert admin.called("list_groups") == [1234]
    groups = document["groups"]
    assert groups["count"] == 4 and groups["states"] == {"Dead": 1, "Empty": 2, "Stable": 1}
    assert [(g["group"], g["lag"], g["lag_unknown_partitions"]) for g in groups["groups"]] == [
        ("etl", 90, 1), ("billing", 10, 0), ("fresh", None, 0), ("gone", None, 0)]
    text = status().stdout
    assert "90 (+1 partition(s) unknown)" in text and "most lag first" in text


def test_no_lag_lists_the_groups_without_fetching_offsets(
        admin: FakeAdmin, consumers: list[FakeConsumer]) -> None:
    admin.groups = [GroupListing("billing", "Stable", "consumer")]
    admin.offsets = {"billing": {TP("orders", 0): 90}}
    document = report("--no-lag", exit_status=0)
    assert admin.called("list_group_offsets") == [] and consumers == []
    assert document["groups"]["lag_measured"] is False
    assert document["groups"]["groups"] == [
        {"group": "billing", "state": "Stable", "lag": None, "lag_unknown_partitions": 0}]
    assert "lag not measured (--no-lag)" in status("--no-lag").stdout


def test_coordinators_that_do_not_answer_are_degraded_not_a_failure(
        admin: FakeAdmin, consumers: list[FakeConsumer]) -> None:
    admin.fail["list_groups"] = CoordinatorNotAvailableError("shards 1, 3 have no coordinator")
    document = report(exit_status=1)
    assert document["reasons"] == ["consumer groups unavailable"]
    assert document["groups"]["unavailable"] == (
        "COORDINATOR_NOT_AVAILABLE: shards 1, 3 have no coordinator")


def test_offsets_or_end_offsets_that_do_not_come_leave_the_lag_unknown(
        admin: FakeAdmin, consumers: list[FakeConsumer]) -> None:
    admin.groups = [GroupListing("billing", "Stable", "consumer"),
                    GroupListing("etl", "Empty", "consumer")]
    admin.offsets = {"billing": RequestTimedOutError("OffsetFetch"),
                     "etl": {TP("orders", 0): 10}}
    END_FAILURE.append(RequestTimedOutError("list offsets timed out"))
    document = report(exit_status=0)
    assert [g["lag"] for g in document["groups"]["groups"]] == [None, None]
    assert document["notes"][:2] == [
        "committed offsets not fetched: billing",
        "end offsets not read (REQUEST_TIMED_OUT: list offsets timed out): lag unknown"]


@pytest.mark.parametrize(("committed", "expected"), [
    (None, (None, 0)), ({}, (None, 0)),
    ({TP("a", 0): 5, TP("a", 1): 1}, (9, 0)),
    ({TP("a", 0): 5, TP("b", 0): 1}, (5, 1)),
    ({TP("b", 0): 1}, (None, 1)),
])
def test_group_lag_sums_what_is_known(committed: dict[TopicPartition, int] | None,
                                      expected: tuple[int | None, int]) -> None:
    assert group_lag(committed, {TP("a", 0): 10, TP("a", 1): 5}) == expected


# ----------------------------------------------------------------- failures


def test_a_topic_deleted_while_described_is_described_again(
        admin: FakeAdmin, consumers: list[FakeConsumer]) -> None:
    admin.fail["describe_topics"] = UnknownTopicOrPartitionError("unknown topic 'old'")
    assert status().exit_code == 0
    assert len(admin.called("describe_topics")) == 2


def test_configs_refused_leave_min_isr_unchecked_with_a_note(
        admin: FakeAdmin, consumers: list[FakeConsumer]) -> None:
    admin.topics["orders"][0] = partition(0, 1, (1, 2, 3), (1,))
    admin.fail["describe_configs"] = TopicAuthorizationFailedError("DescribeConfigs")
    document = report(exit_status=1)
    assert document["notes"][0] == (
        "min.insync.replicas not checked (configs not readable): orders")


@pytest.mark.parametrize(("error", "message"), [
    (TransportError("Metadata to gateway 127.0.0.1:7070 failed: UNAVAILABLE refused",
                    status="UNAVAILABLE"),
     "cannot connect to the gateway at 127.0.0.1:7070 (from --bootstrap)"),
    (ClusterAuthorizationFailedError("User:bob may not Describe the cluster"),
     "CLUSTER_AUTHORIZATION_FAILED: User:bob may not Describe the cluster"),
])
def test_a_failure_says_what_failed_and_exits_3(admin: FakeAdmin, consumers: list[FakeConsumer],
                                                error: Exception, message: str) -> None:
    admin.fail["describe_cluster"] = error
    result = status()
    assert result.exit_code == EXIT_UNKNOWN == 3
    assert result.stdout == "" and message in result.stderr


def test_a_wrong_option_exits_3_not_unavailables_2(admin: FakeAdmin) -> None:
    result = status("--limit", "many")
    assert result.exit_code == 3
    assert "Invalid value for '--limit': 'many' is not a valid integer" in result.stderr
    assert admin.calls == []


def test_no_gateway_address_exits_3(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("STRAND_BOOTSTRAP", raising=False)
    result = CliRunner().invoke(cli, ["cluster", "status"])
    assert result.exit_code == 3 and "no gateway address" in result.stderr
