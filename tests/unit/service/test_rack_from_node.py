"""``strand-service rack-from-node`` (the storage pod's init step) run as the init
container runs it, a process, against kmock's Kubernetes emulator serving Node objects:
the zone label written, an empty file without it, clear errors and a non-zero exit
when the node is missing, the service account is forbidden or the API unreachable.
The in-cluster path (KUBERNETES_SERVICE_HOST/PORT, HTTPS with the service account's CA)
goes through a TLS terminator in front of the emulator (kmock serves plain HTTP)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import kmock as km
import pytest
import pytest_asyncio

from strand.launcher import free_port
from strand.service.rack_from_node import (
    RackFromNode,
    RackLookupError,
    api_configuration,
    parse_args,
)

STRAND_SERVICE = str(Path(sys.executable).parent / "strand-service")
ZONE = "topology.kubernetes.io/zone"
TOKEN = "service-account-token-1"


@dataclass(frozen=True)
class Run:
    returncode: int
    error: str  # the error log's message ("" when none)


def node(name: str, labels: dict[str, str]) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


async def rack_from_node(*args: str, env: dict[str, str] | None = None) -> Run:
    """Run the console script; its stderr is JSON log lines."""
    proc = await asyncio.create_subprocess_exec(
        STRAND_SERVICE, "rack-from-node", *args, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
    _, stderr = await asyncio.wait_for(proc.communicate(), 30)
    errors = [json.loads(line)["msg"] for line in stderr.decode().splitlines()
              if line.startswith("{") and json.loads(line)["level"] == "error"]
    assert proc.returncode is not None
    return Run(proc.returncode, "\n".join(errors) or stderr.decode())


@pytest.fixture
def token(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


def api_args(kmock: km.KubernetesEmulator, token: Path, name: str, output: Path) -> list[str]:
    return ["--node", name, "--output", str(output), "--api-server", str(kmock.url),
            "--token-file", str(token)]


@pytest.mark.asyncio
async def test_writes_the_nodes_zone_with_the_service_account_token(
        kmock: km.KubernetesEmulator, token: Path, tmp_path: Path) -> None:
    kmock.objects["v1/nodes", None, "worker-1"] = node(
        "worker-1", {ZONE: "eu-west-1b", "kubernetes.io/hostname": "worker-1"})
    output = tmp_path / "rack"
    output.write_text("stale-zone-from-before")

    run = await rack_from_node(*api_args(kmock, token, "worker-1", output))

    assert run.returncode == 0, run.error
    assert output.read_text() == "eu-west-1b"
    requests = list(kmock)
    assert [str(r.url.path) for r in requests] == ["/api/v1/nodes/worker-1"]
    assert requests[0].headers["Authorization"] == f"Bearer {TOKEN}"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".rack")] == []


@pytest.mark.asyncio
async def test_another_label_and_an_empty_file_when_the_node_has_none(
        kmock: km.KubernetesEmulator, token: Path, tmp_path: Path) -> None:
    kmock.objects["v1/nodes", None, "worker-2"] = node("worker-2", {"rack": "r7"})
    zone, rack = tmp_path / "zone", tmp_path / "rack"

    assert (await rack_from_node(*api_args(kmock, token, "worker-2", zone))).returncode == 0
    assert zone.read_text() == ""
    custom = await rack_from_node(*api_args(kmock, token, "worker-2", rack), "--label", "rack")
    assert custom.returncode == 0
    assert rack.read_text() == "r7"


@pytest.mark.asyncio
async def test_a_missing_node_fails_naming_it(
        kmock: km.KubernetesEmulator, token: Path, tmp_path: Path) -> None:
    kmock.objects["v1/nodes", None, "worker-1"] = node("worker-1", {ZONE: "a"})
    output = tmp_path / "rack"

    run = await rack_from_node(*api_args(kmock, token, "worker-9", output))

    assert run.returncode == 1
    assert "node 'worker-9' not found" in run.error
    assert "spec.nodeName" in run.error
    assert not output.exists()


@pytest.mark.asyncio
async def test_forbidden_says_which_rbac_it_needs(
        kmock: km.KubernetesEmulator, token: Path, tmp_path: Path) -> None:
    kmock["get /api/v1/nodes/worker-1"] << 403 << {
        "apiVersion": "v1", "kind": "Status", "status": "Failure", "reason": "Forbidden",
        "code": 403, "message": 'nodes "worker-1" is forbidden: User '
        '"system:serviceaccount:strand:storage" cannot get resource "nodes"'}

    run = await rack_from_node(*api_args(kmock, token, "worker-1", tmp_path / "rack"))

    assert run.returncode == 1
    assert "403 Forbidden" in run.error
    assert 'cannot get resource "nodes"' in run.error  # the API's own words
    assert "RBAC `get` on `nodes`" in run.error
    assert "ClusterRole" in run.error


@pytest.mark.asyncio
async def test_an_unreachable_api_fails_naming_it(token: Path, tmp_path: Path) -> None:
    server = f"http://127.0.0.1:{free_port()}"  # nothing listens there

    run = await rack_from_node("--node", "worker-1", "--output", str(tmp_path / "rack"),
                               "--api-server", server, "--token-file", str(token),
                               "--timeout", "5")

    assert run.returncode == 1
    assert f"cannot reach the Kubernetes API at {server}" in run.error


@pytest.mark.asyncio
async def test_outside_a_pod_without_api_server_it_says_so(token: Path, tmp_path: Path) -> None:
    env = {k: "" for k in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")}
    run = await rack_from_node("--node", "w", "--output", str(tmp_path / "rack"),
                               "--token-file", str(token), env=env)
    assert run.returncode == 1
    assert "not running in a Kubernetes pod" in run.error


# ------------------------------------------------- in-cluster: HTTPS and the pod's CA

@dataclass(frozen=True)
class Tls:
    ca_file: Path  # a self-signed certificate for 127.0.0.1: its own CA
    port: int


def self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                    "/CN=kubernetes", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


@pytest_asyncio.fixture
async def tls_api(kmock: km.KubernetesEmulator, tmp_path: Path) -> AsyncIterator[Tls]:
    """HTTPS on a port of its own, forwarded to the emulator."""
    cert, key = self_signed(tmp_path, "apiserver")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    target = kmock.url

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(target.host, target.port)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(forward, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield Tls(cert, port)


@pytest.mark.asyncio
async def test_in_cluster_over_https_trusting_the_service_account_ca(
        kmock: km.KubernetesEmulator, tls_api: Tls, token: Path, tmp_path: Path) -> None:
    kmock.objects["v1/nodes", None, "worker-3"] = node("worker-3", {ZONE: "zone-c"})
    in_pod = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(tls_api.port)}
    output = tmp_path / "rack"
    common = ["--node", "worker-3", "--output", str(output), "--token-file", str(token)]

    run = await rack_from_node(*common, "--ca-file", str(tls_api.ca_file), env=in_pod)

    assert run.returncode == 0, run.error
    assert output.read_text() == "zone-c"

    # A CA that did not sign the server's certificate: refused, and said why.
    other_ca, _ = self_signed(tmp_path, "other")
    refused = await rack_from_node(*common, "--ca-file", str(other_ca), env=in_pod)
    assert refused.returncode == 1
    assert "CERTIFICATE_VERIFY_FAILED" in refused.error
    assert f"is {other_ca} the API server's CA?" in refused.error


@pytest.mark.asyncio
async def test_an_output_directory_that_does_not_exist_fails_naming_it(
        kmock: km.KubernetesEmulator, token: Path, tmp_path: Path) -> None:
    kmock.objects["v1/nodes", None, "worker-1"] = node("worker-1", {ZONE: "a"})
    output = tmp_path / "not-mounted" / "rack"

    run = await rack_from_node(*api_args(kmock, token, "worker-1", output))

    assert run.returncode == 1
    assert f"the directory {output.parent} does not exist" in run.error


def in_pod_settings(token: Path, ca_file: Path, tmp_path: Path) -> RackFromNode:
    return RackFromNode(node="w", output=tmp_path / "rack", label=ZONE, api_server=None,
                        token_file=token, ca_file=ca_file, timeout_s=1.0)


@pytest.mark.parametrize(("host", "url"), [
    ("10.96.0.1", "https://10.96.0.1:443"), ("fd00:10:96::1", "https://[fd00:10:96::1]:443")])
def test_the_in_cluster_api_from_the_pods_variables_and_service_account(
        host: str, url: str, token: Path, tmp_path: Path) -> None:
    ca_file, _ = self_signed(tmp_path, "ca")
    env = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": "443"}

    configuration = api_configuration(in_pod_settings(token, ca_file, tmp_path), env)

    assert configuration.host == url
    assert configuration.ssl_ca_cert == str(ca_file)
    # The token file's trailing newline is no part of the header.
    assert configuration.get_api_key_with_prefix("BearerToken") == f"Bearer {TOKEN}"


def test_in_a_pod_without_the_service_accounts_ca_it_says_what_to_mount(
        token: Path, tmp_path: Path) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    missing = tmp_path / "ca.crt"
    with pytest.raises(RackLookupError, match="cannot use the pod's service account") as err:
        api_configuration(in_pod_settings(token, missing, tmp_path), env)
    assert str(missing) in str(err.value)
    assert "--ca-file" in str(err.value)


def test_an_api_server_that_is_no_url_is_a_usage_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse_args(["--node", "w", "--output", "rack", "--api-server", "10.96.0.1:443"])
    assert exit_.value.code == 2
    assert "--api-server must be an https:// (or http://) URL" in capsys.readouterr().err
