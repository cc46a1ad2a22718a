"""Where an operator run acts, resolved once from spec.target. The executors read this,
never the spec's one-of-three union: each of them re-checking which target it is, and
re-deriving namespaces from it, is how they came to disagree."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from crimsonbench.spec.models import BenchmarkRunSpec
from crimsonbench.spec.target import ExternalTarget


@dataclass(frozen=True)
class KubeTarget:
    kind: Literal["rook", "external", "local"]
    # where Jobs that mount the cluster's credentials run: Rook's Secrets can only be
    # mounted in Rook's namespace; an external keyring Secret lives beside the run
    jobs_namespace: str
    lease_name: str  # one run per Ceph cluster (a Lease in the operator's namespace)
    rook_namespace: str | None = None  # Rook's: OSD pods, CephCluster, pools, clients
    cluster_name: str | None = None  # the CephCluster
    allow_reprovision: bool = False
    external: ExternalTarget | None = None

    @property
    def where(self) -> str:
        """The cluster as a user names it in messages."""
        if self.kind == "rook":
            return f"CephCluster {self.rook_namespace}/{self.cluster_name}"
        if self.external is not None:
            return f"the external cluster at {self.external.mon_host}"
        return "the local cluster"


def kube_target(spec: BenchmarkRunSpec, run_namespace: str) -> KubeTarget:
    t = spec.target
    if t.rook is not None:
        return KubeTarget(
            kind="rook",
            jobs_namespace=t.rook.namespace,
            lease_name=_lease_name(f"rook/{t.rook.namespace}/{t.rook.cluster_name}"),
            rook_namespace=t.rook.namespace,
            cluster_name=t.rook.cluster_name,
            allow_reprovision=t.rook.allow_reprovision,
        )
    if t.external is not None:
        return KubeTarget(
            kind="external",
            jobs_namespace=run_namespace,
            lease_name=_lease_name(f"external/{t.external.mon_host}"),
            external=t.external,
        )
    return KubeTarget(kind="local", jobs_namespace=run_namespace, lease_name=_lease_name("local"))


def _lease_name(ident: str) -> str:
    return "crimsonbench-" + hashlib.sha256(ident.encode()).hexdigest()[:12]
