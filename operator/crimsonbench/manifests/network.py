"""Who may connect to a run's fio pods: NetworkPolicies of the run, in the namespace of its
Jobs, made with its fio servers and deleted at cleanup.

Why: `fio --server` takes job files from whoever connects, without authentication, and a
job file runs shell through `exec_prerun` (the start barrier needs it); the servers hold
the Ceph key of the run's user (on external targets: the key the spec names). So only the
run's own fio driver may reach its servers (the fio port), and only the run's servers may
reach the driver's start barrier (the barrier port). Nothing else may connect to either.
Egress stays open: the pods talk to the Ceph mons and OSDs, wherever those are.

Two policies, one per side, so that is exactly what is allowed: rules of one policy are a
union over every pod it selects (one policy for both would also let a server reach
another server's barrier port, and the driver its own fio port).

What it cannot do: host-network pods are outside NetworkPolicy (they share the node's
address; `jobs.hostNetwork`): the run says so in its NetworkIsolated condition. And only a
network plugin that enforces NetworkPolicy makes it more than an object (README, Security).
"""

from __future__ import annotations

from typing import Any

from crimsonbench.manifests.fio import ROLE_SERVER
from crimsonbench.manifests.fio_driver import ROLE_DRIVER
from crimsonbench.manifests.naming import (
    LABEL_ROLE,
    LABEL_RUN,
    dns_name,
    label_value,
    labels,
    metadata,
)

ROLE_POLICY = "fio-network"


def network_policy_names(run: str) -> tuple[str, str]:
    """The names of the run's two policies: its servers', its driver's."""
    return dns_name(run, "fio-server-in"), dns_name(run, "fio-driver-in")


def _only(run: str, role: str) -> dict[str, Any]:
    """A selector of the run's pods of one role."""
    return {"matchLabels": {LABEL_RUN: label_value(run), LABEL_ROLE: role}}


def fio_network_policies(
    run: str, namespace: str, *, fio_port: int, barrier_port: int
) -> list[dict[str, Any]]:
    """The run's fio servers accept only its driver, on fio_port; its driver accepts only
    its servers (their jobs' exec_prerun), on barrier_port. Ingress only: what the pods
    connect to is not restricted."""
    sides = ((ROLE_SERVER, ROLE_DRIVER, fio_port), (ROLE_DRIVER, ROLE_SERVER, barrier_port))
    out = []
    for name, (to, source, port) in zip(network_policy_names(run), sides, strict=True):
        rule = {"from": [{"podSelector": _only(run, source)}],
                "ports": [{"protocol": "TCP", "port": port}]}  # fmt: skip
        out.append({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": metadata(name, namespace, labels(run, ROLE_POLICY), None),
            "spec": {"podSelector": _only(run, to), "policyTypes": ["Ingress"],
                     "ingress": [rule]},
        })  # fmt: skip
    return out
