"""The control plane's certificates and keys, made with trustme (no openssl, no cfssl)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass(frozen=True)
class Pki:
    """trustme's CAs and leaves, written as files for the components' flags."""

    ca_crt: Path
    ca_key: Path  # kube-controller-manager signs CSRs with it (kubelet certificates)
    apiserver_crt: Path
    apiserver_key: Path
    front_proxy_ca_crt: Path
    front_proxy_client_crt: Path
    front_proxy_client_key: Path
    sa_key: Path  # ECDSA: the API server signs and checks service account tokens with it


def make_pki(d: Path, service_cidr: str) -> Pki:
    d.mkdir(mode=0o700)
    files = "ca.crt ca.key apiserver.crt apiserver.key front-proxy-ca.crt front-proxy-client.crt"
    pki = Pki(*(d / n for n in f"{files} front-proxy-client.key sa.key".split()))
    service_ip = str(next(ipaddress.IPv4Network(service_cidr).hosts()))
    parts = ("kubernetes", "default", "svc", "cluster", "local")
    names = [".".join(parts[:n]) for n in (1, 2, 3, 5)]
    ca, front_proxy_ca = trustme.CA(), trustme.CA()
    ca.cert_pem.write_to_path(str(pki.ca_crt))
    ca.private_key_pem.write_to_path(str(pki.ca_key))
    front_proxy_ca.cert_pem.write_to_path(str(pki.front_proxy_ca_crt))
    leaves = (
        (ca.issue_cert("127.0.0.1", service_ip, "localhost", *names, common_name="kube-apiserver"),
         pki.apiserver_crt, pki.apiserver_key),
        # the API server accepts request headers only from this CN (--requestheader-allowed-names)
        (front_proxy_ca.issue_cert(common_name="front-proxy-client"),
         pki.front_proxy_client_crt, pki.front_proxy_client_key),
    )  # fmt: skip
    for leaf, crt, key in leaves:
        leaf.cert_chain_pems[0].write_to_path(str(crt))
        leaf.private_key_pem.write_to_path(str(key))
    ca.issue_cert(common_name="service-accounts").private_key_pem.write_to_path(str(pki.sa_key))
    return pki
