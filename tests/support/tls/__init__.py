"""The TLS test fixtures (certificates made by make_certs.sh) and what the TLS tests
share: the files by name, a copy of a service's files that a test can rotate, and the
certificate a listener presents to a new connection."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
from pathlib import Path

from strand.security.tls import ClientTls, ServiceTls

HERE = Path(__file__).resolve().parent
CA = HERE / "ca.pem"
OTHER_CA = HERE / "other-ca.pem"


def cert(name: str) -> Path:
    return HERE / f"{name}.pem"


def key(name: str) -> Path:
    return HERE / f"{name}-key.pem"


def client_tls(name: str | None = "client", ca: Path = CA) -> ClientTls:
    """A client verifying with ``ca``, presenting ``name``'s certificate (None: none)."""
    if name is None:
        return ClientTls(ca)
    return ClientTls(ca, cert(name), key(name))


def service_files(directory: Path, name: str = "service") -> tuple[Path, Path]:
    """Copies of ``name``'s certificate and key in ``directory`` (service.pem,
    service-key.pem), for a test that rotates them with :func:`rotate`."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cert(name), directory / "service.pem")
    shutil.copyfile(key(name), directory / "service-key.pem")
    return directory / "service.pem", directory / "service-key.pem"


# What the service certificates are named (service.pem and service-rotated.pem).
SERVICE_NAMES = ("strand-service*",)


def service_tls(directory: Path, require_client_cert: bool = False,
                service_names: tuple[str, ...] = ()) -> ServiceTls:
    certificate, private_key = service_files(directory)
    return ServiceTls.from_files(certificate, private_key, CA, require_client_cert,
                                 service_names)


def rotate(directory: Path, name: str = "service-rotated") -> None:
    """Replace the copies by ``name``'s pair, each file atomically (a rename), the
    certificate first: a handshake may see the new certificate with the old key."""
    for source, target in ((cert(name), "service.pem"), (key(name), "service-key.pem")):
        temporary = directory / f".{target}.new"
        shutil.copyfile(source, temporary)
        os.replace(temporary, directory / target)


def presented_name(address: str, client: str | None = "client", timeout: float = 5.0) -> str:
    """The common name of the certificate the listener at ``address`` presents to a
    new TLS connection (ALPN h2, as gRPC)."""
    host, port = address.rsplit(":", 1)
    context = ssl.create_default_context(cafile=CA)
    context.set_alpn_protocols(["h2"])
    if client is not None:
        context.load_cert_chain(cert(client), key(client))
    with socket.create_connection((host, int(port)), timeout=timeout) as raw, \
            context.wrap_socket(raw, server_hostname=host) as tls:
        peer = tls.getpeercert()
    assert peer is not None
    for rdn in peer["subject"]:
        for attribute in rdn:
            if attribute[0] == "commonName":
                return str(attribute[1])
    raise AssertionError(f"no common name in {peer['subject']}")
