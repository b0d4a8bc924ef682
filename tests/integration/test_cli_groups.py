"""``strand group describe`` and ``strand group reset-offsets`` against real processes
(issue 11 points 12-14): describe shows whole member ids with their host and client;
a reset of an active group says GROUP_NOT_EMPTY; reset specs are exclusive, targets
are clamped to each partition's range, and --dry-run, --to-datetime, --shift-by and
--all-topics do what Kafka's tool does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner, Result

from strand import Admin, Consumer, NewTopic, Producer
from strand.cli.main import cli
from tests.support.waiting import poll_until

if TYPE_CHECKING:
    from tests.support.cluster import SdkCluster

TOPIC = "ledger"
OTHER = "audit"
BASE_MS = 1_700_000_000_000  # record i of a partition has timestamp BASE_MS + i s


def strand(cluster: SdkCluster, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--bootstrap", cluster.bootstrap, *args])


def plan(result: Result) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def offsets(cluster: SdkCluster, group: str) -> dict[tuple[str, int], int]:
    with Admin(cluster.bootstrap) as admin:
        return {(tp.topic, tp.partition): o
                for tp, o in admin.list_group_offsets(group).items()}


@pytest.fixture(scope="module")
def cluster(group_cluster: SdkCluster) -> Iterator[SdkCluster]:
    """Two topics: ledger (2 partitions, 10 timestamped records each), audit (1, 4).
    Kept forever: BASE_MS is years past the default retention, and a maintenance
    round would otherwise delete the records while the tests run."""
    forever = {"retention.ms": "-1"}
    with Admin(group_cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 2, 1, config=forever),
                             NewTopic(OTHER, 1, 1, config=forever)])
    with Producer(group_cluster.bootstrap, acks="all") as producer:
        for p in range(2):
            for i in range(10):
                producer.send(TOPIC, f"{p}-{i}".encode(), partition=p,
                              timestamp_ms=BASE_MS + i * 1000)
        for _ in range(4):
            producer.send(OTHER, b"a", partition=0)
        producer.flush(timeout=30)
    yield group_cluster


def test_describe_shows_whole_member_ids_with_host_and_client_and_an_active_group_is_not_reset(
        cluster: SdkCluster) -> None:
    client = "nightly-settlement-reporting-service"
    with Consumer(cluster.bootstrap, group_id="settlement", client_id=client,
                  session_timeout_ms=6000, heartbeat_interval_ms=500) as member:
        member.subscribe([TOPIC])
        poll_until(member, lambda: len(member.assignment()) == 2, 60, "the assignment")
        with Admin(cluster.bootstrap) as admin:
            (described,) = admin.describe_group("settlement").members
        assert len(described.member_id) > 40 and described.client_host == "127.0.0.1"

        table = strand(cluster, "group", "describe", "settlement")
        assert table.exit_code == 0, table.output
        assert described.member_id in table.stdout  # whole, on one line, not cut
        assert "host" in table.stdout and "127.0.0.1" in table.stdout
        assert client in table.stdout
        as_json = json.loads(strand(cluster, "group", "describe", "settlement",
                                    "--json").stdout)
        assert as_json["consumers"] == [{
            "member": described.member_id, "instance": None, "host": "127.0.0.1",
            "client": client, "partitions": [[TOPIC, 0], [TOPIC, 1]]}]
        assert {r["host"] for r in as_json["partitions"]} == {"127.0.0.1"}

        busy = strand(cluster, "group", "reset-offsets", "settlement", "--topic", TOPIC,
                      "--to-earliest")
        assert busy.exit_code == 1
        assert "GROUP_NOT_EMPTY" in busy.output and "active members" in busy.output
        assert "UNKNOWN_MEMBER_ID" not in busy.output
        dry = strand(cluster, "group", "reset-offsets", "settlement", "--topic", TOPIC,
                     "--to-earliest", "--dry-run")
        assert dry.exit_code == 0 and "1 active member" in dry.output


def test_reset_specs_are_exclusive_and_targets_are_clamped_to_the_partition(
        cluster: SdkCluster) -> None:
    for both in (("--to-earliest", "--to-latest"), ("--to-offset", "3", "--shift-by", "1")):
        refused = strand(cluster, "group", "reset-offsets", "clamped", "--topic", TOPIC, *both)
        assert refused.exit_code == 2 and "give exactly one of" in refused.output
        assert " and ".join(a for a in both if a.startswith("--")) in refused.output
    assert strand(cluster, "group", "reset-offsets", "clamped", "--topic", TOPIC,
                  "--dry-run", "--execute", "--to-latest").exit_code == 2
    assert offsets(cluster, "clamped") == {}

    past = plan(strand(cluster, "group", "reset-offsets", "clamped", "--topic", TOPIC,
                       "--to-offset", "99999", "--json"))
    assert [(r["partition"], r["new"]) for r in past] == [(0, 10), (1, 10)]
    assert "past the end" in past[0]["note"]
    assert offsets(cluster, "clamped") == {(TOPIC, 0): 10, (TOPIC, 1): 10}
    rows = json.loads(strand(cluster, "group", "describe", "clamped", "--json").stdout)
    assert [r["lag"] for r in rows["partitions"]] == [0, 0]  # never negative

    missing = strand(cluster, "group", "reset-offsets", "clamped", "--topic", f"{TOPIC}:5",
                     "--to-earliest")
    assert missing.exit_code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.output


def test_dry_run_shift_by_to_datetime_and_all_topics(cluster: SdkCluster) -> None:
    group = "replayers"
    assert plan(strand(cluster, "group", "reset-offsets", group, "--topic", TOPIC,
                       "--topic", OTHER, "--to-latest", "--json"))
    assert offsets(cluster, group) == {(TOPIC, 0): 10, (TOPIC, 1): 10, (OTHER, 0): 4}

    dry = plan(strand(cluster, "group", "reset-offsets", group, "--topic", f"{TOPIC}:1",
                      "--shift-by", "-3", "--dry-run", "--json"))
    assert [(r["partition"], r["current"], r["new"]) for r in dry] == [(1, 10, 7)]
    assert offsets(cluster, group)[(TOPIC, 1)] == 10  # a dry run changes nothing

    plan(strand(cluster, "group", "reset-offsets", group, "--topic", f"{TOPIC}:1",
                "--shift-by", "-3", "--json"))
    back = plan(strand(cluster, "group", "reset-offsets", group, "--topic", f"{TOPIC}:1",
                       "--shift-by", "-100", "--json"))
    assert back[0]["new"] == 0 and "before the log start" in back[0]["note"]

    # Record 4 of each partition is the first at or after BASE_MS + 3.5 s (UTC given).
    moment = "2023-11-14T22:13:23.500Z"  # BASE_MS + 3.5 s
    timed = plan(strand(cluster, "group", "reset-offsets", group, "--topic", TOPIC,
                        "--to-datetime", moment, "--json"))
    assert [r["new"] for r in timed] == [4, 4]
    later = plan(strand(cluster, "group", "reset-offsets", group, "--topic", TOPIC,
                        "--to-datetime", "2030-01-01T00:00:00+00:00", "--json"))
    assert [r["new"] for r in later] == [10, 10]  # no record that late: the end
    bad = strand(cluster, "group", "reset-offsets", group, "--topic", TOPIC,
                 "--to-datetime", "yesterday")
    assert bad.exit_code == 2 and "not a date-time" in bad.output

    everything = plan(strand(cluster, "group", "reset-offsets", group, "--all-topics",
                             "--to-earliest", "--json"))
    assert {(r["topic"], r["partition"]) for r in everything} == {
        (TOPIC, 0), (TOPIC, 1), (OTHER, 0)}
    assert set(offsets(cluster, group).values()) == {0}
    nothing = strand(cluster, "group", "reset-offsets", "never-committed", "--all-topics",
                     "--to-earliest")
    assert nothing.exit_code == 2 and "no committed offsets" in nothing.output
