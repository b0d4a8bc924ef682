"""Certificates made on the fly (the ``cryptography`` package): a CA of a test's own
and the leaf certificates it issues — what cert-manager's CA issuer or an outside
PKI gives a cluster. The fixed files of tests/support/tls serve 127.0.0.1 only; these
carry whatever names a test needs (a chart's DNS names, its common names)."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertificateAuthority", "IssuedCertificate"]

_VALIDITY = datetime.timedelta(days=2)


@dataclass(frozen=True)
class IssuedCertificate:
    """A leaf certificate and its key, PEM, and its CA's certificate: the three keys
    of a kubernetes.io/tls Secret as cert-manager writes it."""

    cert_pem: bytes
    key_pem: bytes
    ca_pem: bytes

    def secret_data(self) -> dict[str, bytes]:
        return {"tls.crt": self.cert_pem, "tls.key": self.key_pem, "ca.crt": self.ca_pem}


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


class CertificateAuthority:
    """A self-signed CA (P-256, valid two days) issuing leaf certificates."""

    def __init__(self, common_name: str = "Strand test CA") -> None:
        self._key = _key()
        now = datetime.datetime.now(datetime.UTC)
        self._name = _name(common_name)
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(self._name).issuer_name(self._name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=False, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .sign(self._key, hashes.SHA256()))
        self.pem = self.certificate.public_bytes(serialization.Encoding.PEM)

    def issue(self, common_name: str, dns_names: Sequence[str] = (),
              ip_addresses: Sequence[str] = (), *, server: bool = True,
              client: bool = True) -> IssuedCertificate:
        """A leaf certificate for ``common_name`` with these subject alternative names,
        for server authentication, client authentication or both."""
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + \
            ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
        if not usages:
            raise ValueError("a certificate for neither server nor client authentication")
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name)).issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=False,
                crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
        names: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
        names += [x509.IPAddress(ipaddress.ip_address(a)) for a in ip_addresses]
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        return IssuedCertificate(certificate.public_bytes(serialization.Encoding.PEM),
                                 _pem(key), self.pem)
