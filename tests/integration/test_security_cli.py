"""``strand user`` and ``strand acl`` against a cluster that requires SCRAM-SHA-512 and
enforces ACLs: the super user adds a user and Kafka's --producer ACLs with the CLI,
the user can then produce (and nothing more), a password change takes effect, and
removing the ACLs and the user undoes it all; refusals are one line, exit status 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from strand import Admin, NewTopic, Producer
from strand.cli.main import cli
from strand.errors import AuthorizationError
from strand.launcher import Cluster
from tests.support.cluster import cluster_spec, unique
from tests.support.security import SUPERUSER, as_user

pytestmark = pytest.mark.slow

ADMIN = SUPERUSER


@pytest.fixture
def cluster(secured_cluster: Cluster) -> Cluster:
    return secured_cluster


def strand(cluster: Cluster, tmp_path: Path, user: tuple[str, str], *args: str) -> Result:
    secret = tmp_path / f"{user[0]}.cli-password"
    secret.write_text(user[1] + "\n")
    return CliRunner().invoke(cli, ["--bootstrap", cluster.bootstrap, "--user", user[0],
                                    "--password-file", str(secret), *args])


def test_users_and_acls_from_the_cli(cluster: Cluster, tmp_path: Path) -> None:
    name, topic = unique("alice"), unique("cli-orders")
    with Admin(cluster.bootstrap, **as_user(*ADMIN)) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    password = tmp_path / "new-user"
    password.write_text(f"{name}-one\n")

    added = strand(cluster, tmp_path, ADMIN, "user", "add", name, "--password-file",
                   str(password))
    assert added.exit_code == 0, added.output
    users = json.loads(strand(cluster, tmp_path, ADMIN, "user", "list", "--json").stdout)
    assert {"name": name, "mechanism": "SCRAM-SHA-512", "iterations": 4096} in users

    # No ACL yet: authenticated, and refused.
    refused = strand(cluster, tmp_path, (name, f"{name}-one"), "acl", "list")
    assert refused.exit_code == 1
    assert refused.stderr.startswith("Error: CLUSTER_AUTHORIZATION_FAILED: ")
    assert refused.stderr.count("\n") == 1
    with Producer(cluster.bootstrap, **as_user(name, f"{name}-one")) as producer, \
            pytest.raises(AuthorizationError):
        producer.send(topic, b"refused", partition=0).result(30)

    acls = strand(cluster, tmp_path, ADMIN, "acl", "add", "--allow-principal",
                  f"User:{name}", "--producer", "--topic", topic)
    assert acls.exit_code == 0, acls.output
    listed = json.loads(strand(cluster, tmp_path, ADMIN, "acl", "list", "--json",
                               "--principal", f"User:{name}").stdout)
    assert sorted((a["resource_type"], a["operation"]) for a in listed) == [
        ("CLUSTER", "IDEMPOTENT_WRITE"), ("TOPIC", "CREATE"), ("TOPIC", "DESCRIBE"),
        ("TOPIC", "WRITE")]
    with Producer(cluster.bootstrap, **as_user(name, f"{name}-one")) as producer:
        assert producer.send(topic, b"allowed", partition=0).result(30).offset == 0

    # A new password: the old one stops working.
    password.write_text(f"{name}-two\n")
    changed = strand(cluster, tmp_path, ADMIN, "user", "add", name, "--password-file",
                     str(password), "--iterations", "8192")
    assert changed.exit_code == 0, changed.output
    old = strand(cluster, tmp_path, (name, f"{name}-one"), "user", "list")
    assert old.exit_code == 1 and old.stderr.startswith("Error: SASL_AUTHENTICATION_FAILED")
    new = strand(cluster, tmp_path, (name, f"{name}-two"), "user", "list")
    assert new.exit_code == 1 and "CLUSTER_AUTHORIZATION_FAILED" in new.stderr

    removed = strand(cluster, tmp_path, ADMIN, "acl", "remove", "--principal", f"User:{name}",
                     "--yes")
    assert removed.exit_code == 0 and "removed 4 ACLs" in removed.stdout
    assert json.loads(strand(cluster, tmp_path, ADMIN, "acl", "list", "--json", "--principal",
                             f"User:{name}").stdout) == []
    gone = strand(cluster, tmp_path, ADMIN, "user", "remove", name, "--yes")
    assert gone.exit_code == 0, gone.output
    again = strand(cluster, tmp_path, ADMIN, "user", "remove", name, "--yes")
    assert again.exit_code == 1 and again.stderr.startswith("Error: RESOURCE_NOT_FOUND: ")
    users = json.loads(strand(cluster, tmp_path, ADMIN, "user", "list", "--json").stdout)
    assert name not in {u["name"] for u in users}


def test_acls_on_a_cluster_without_an_authorizer_say_so(tmp_path: Path) -> None:
    plain = Cluster(cluster_spec(tmp_path, "plain-cli", storage_nodes=1)).start()
    try:
        result = CliRunner().invoke(cli, ["--bootstrap", plain.bootstrap, "acl", "list"])
    finally:
        plain.stop()
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: SECURITY_DISABLED: ")
    assert result.stderr.count("\n") == 1
