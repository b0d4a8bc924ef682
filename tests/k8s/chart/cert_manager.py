"""What cert-manager does with the chart's Certificates, for the local pods: each one
issued by a test CA into its Secret (tls.crt, tls.key, ca.crt), with the common name,
DNS names and usages the Certificate asks for — so a wrong name in the chart fails
the services' own checks (--tls-service-names, hostname verification).

One addition: the local pods reach each other at 127.0.0.1 (local_pods.py maps every
Service and pod name there), so every server certificate also names IP 127.0.0.1,
where in a cluster its DNS names resolve to the pods."""

from __future__ import annotations

from collections.abc import Sequence

from tests.k8s.chart.local_pods import LOCALHOST, Manifest
from tests.support.certificates import CertificateAuthority

__all__ = ["issue_certificates"]

SecretData = dict[str, bytes]


def issue_certificates(manifests: Sequence[Manifest],
                       ca: CertificateAuthority) -> dict[str, SecretData]:
    """Secret name -> data for every Certificate of ``manifests`` but the CA's own (the
    self-signed root ``ca`` stands for). Each must name an Issuer of the chart."""
    issuers = {m["metadata"]["name"] for m in manifests
               if (m["apiVersion"], m["kind"]) == ("cert-manager.io/v1", "Issuer")}
    secrets: dict[str, SecretData] = {}
    for certificate in manifests:
        if (certificate["apiVersion"], certificate["kind"]) != ("cert-manager.io/v1",
                                                                "Certificate"):
            continue
        spec = certificate["spec"]
        name = certificate["metadata"]["name"]
        issuer = spec["issuerRef"]
        if issuer.get("kind", "Issuer") == "Issuer" and issuer["name"] not in issuers:
            raise AssertionError(f"Certificate {name}: its issuer {issuer['name']} is no "
                                 f"Issuer of the chart ({sorted(issuers)})")
        if spec.get("isCA"):
            continue
        usages = set(spec.get("usages", ["digital signature", "key encipherment"]))
        server = "server auth" in usages
        addresses = dict.fromkeys([*spec.get("ipAddresses", []),
                                   *([LOCALHOST] if server else [])])
        issued = ca.issue(spec["commonName"], spec.get("dnsNames", []), list(addresses),
                          server=server, client="client auth" in usages)
        secrets[spec["secretName"]] = issued.secret_data()
    return secrets
