"""Where an operator run acts on Kubernetes, resolved once from spec.target, and whether
it may act there. The operator and the manifests read KubeTarget, never the spec's
one-of-three union: each of them re-checking which target it is, and re-deriving
namespaces from it, is how they came to disagree. (Not the planner's: a plan knows
nothing of namespaces; the operator names its leases from KubeTarget.cluster_id.)

The operator's trust boundary (TargetPolicy, from the chart's `targets` values): the Rook
CephClusters it may act on and the namespaces whose runs may target each (a run in the
cluster's own namespace always may), and the namespaces whose runs may target external
clusters. target_refusal decides; the operator asks it before it touches anything, and the
chart's RBAC grants nothing outside the same lists.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from crimsonbench.errors import InvalidSpec
from crimsonbench.spec.models import BenchmarkRunSpec
from crimsonbench.spec.target import ExternalTarget

# apimachinery's IsDNS1123Label (namespaces) and IsDNS1123Subdomain (object names)
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
NAMESPACE_RE = re.compile(rf"^{_LABEL}$")
NAME_RE = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
# the chart's values, named in every refusal
ROOK_VALUE = "targets.rook"
EXTERNAL_VALUE = "targets.externalNamespaces"


@dataclass(frozen=True)
class KubeTarget:
    kind: Literal["rook", "external", "local"]
    # where Jobs that mount the cluster's credentials run: Rook's Secrets can only be
    # mounted in Rook's namespace; an external keyring Secret lives beside the run
    jobs_namespace: str
    rook_namespace: str | None = None  # Rook's: OSD pods, CephCluster, pools, clients
    cluster_name: str | None = None  # the CephCluster
    allow_reprovision: bool = False
    external: ExternalTarget | None = None

    @property
    def cluster_id(self) -> str:
        """The Ceph cluster, as one string (the operator's lease per cluster is named
        after it)."""
        if self.kind == "rook":
            return f"rook/{self.rook_namespace}/{self.cluster_name}"
        if self.external is not None:
            return f"external/{self.external.mon_host}"
        return "local"

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
            rook_namespace=t.rook.namespace,
            cluster_name=t.rook.cluster_name,
            allow_reprovision=t.rook.allow_reprovision,
        )
    if t.external is not None:
        return KubeTarget(
            kind="external",
            jobs_namespace=run_namespace,
            external=t.external,
        )
    return KubeTarget(kind="local", jobs_namespace=run_namespace)


# ---------------------------------------------------------------- the trust boundary


@dataclass(frozen=True)
class RookGrant:
    """One Rook CephCluster the operator may act on, and the namespaces (besides the
    cluster's own) whose runs may target it."""

    namespace: str
    name: str
    allowed_namespaces: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not NAMESPACE_RE.match(self.namespace) or len(self.namespace) > 63:
            raise ValueError(f"cephCluster {self.ref!r}: {self.namespace!r} is not a namespace")
        if not NAME_RE.match(self.name) or len(self.name) > 253:
            raise ValueError(f"cephCluster {self.ref!r}: {self.name!r} is not an object name")
        for ns in self.allowed_namespaces:
            if not NAMESPACE_RE.match(ns) or len(ns) > 63:
                raise ValueError(f"cephCluster {self.ref}: allowedNamespaces: {ns!r} is not a "
                                 "namespace")  # fmt: skip

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def parse(cls, ref: str, allowed_namespaces: Sequence[str] = ()) -> RookGrant:
        """From the chart's form: cephCluster "namespace/name"."""
        namespace, sep, name = ref.partition("/")
        if not sep:
            raise ValueError(f"cephCluster {ref!r}: write it as namespace/name")
        return cls(namespace, name, tuple(allowed_namespaces))

    def admits(self, run_namespace: str) -> bool:
        return run_namespace == self.namespace or run_namespace in self.allowed_namespaces


# The chart's default (values.yaml): Rook's example cluster, for runs in its own namespace.
DEFAULT_ROOK_TARGETS = (RookGrant("rook-ceph", "rook-ceph"),)


@dataclass(frozen=True)
class TargetPolicy:
    rook: tuple[RookGrant, ...] = DEFAULT_ROOK_TARGETS
    external_namespaces: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for ns in self.external_namespaces:
            if not NAMESPACE_RE.match(ns) or len(ns) > 63:
                raise ValueError(f"externalNamespaces: {ns!r} is not a namespace")

    def grant(self, namespace: str, name: str) -> RookGrant | None:
        return next((g for g in self.rook if (g.namespace, g.name) == (namespace, name)), None)

    # What the RBAC is made of (manifests/rbac.py, and the chart from the same lists):
    @property
    def rook_namespaces(self) -> tuple[str, ...]:
        """Where the named CephClusters are: Rook's objects, OSD restarts, Jobs."""
        return tuple(dict.fromkeys(g.namespace for g in self.rook))

    @property
    def job_namespaces(self) -> tuple[str, ...]:
        """Where a run's Jobs run: beside the Rook cluster (its Secrets mount only there),
        or in the run's own namespace for external clusters."""
        return tuple(dict.fromkeys((*self.rook_namespaces, *self.external_namespaces)))

    @property
    def run_namespaces(self) -> tuple[str, ...]:
        """Where runs may live: their record and results ConfigMaps are written there."""
        allowed = (ns for g in self.rook for ns in (g.namespace, *g.allowed_namespaces))
        return tuple(dict.fromkeys((*allowed, *self.external_namespaces)))


def target_refusal(
    target: KubeTarget, run_namespace: str, policy: TargetPolicy
) -> InvalidSpec | None:
    """Why a run in run_namespace may not act on target (None: it may). Local targets are
    not the operator's (refused elsewhere, naming spec.target)."""
    if target.kind == "rook":
        ns, name = target.rook_namespace or "", target.cluster_name or ""
        grant = policy.grant(ns, name)
        listed = ", ".join(g.ref for g in policy.rook) or "none"
        if grant is None:
            return InvalidSpec(
                "spec.target.rook",
                f"the operator may not act on CephCluster {ns}/{name}: it is not one of the "
                f"Rook clusters the chart's {ROOK_VALUE} names ({listed}); an administrator "
                f"adds {{cephCluster: {ns}/{name}, allowedNamespaces: [{run_namespace}]}} "
                f"there, or set spec.target.rook.namespace and clusterName to a listed one",
            )
        if not grant.admits(run_namespace):
            allowed = ", ".join((grant.namespace, *grant.allowed_namespaces))
            return InvalidSpec(
                "spec.target.rook.namespace",
                f"BenchmarkRuns in namespace {run_namespace} may not target CephCluster "
                f"{grant.ref} (allowed: runs in {allowed}); an administrator adds "
                f"{run_namespace} to its allowedNamespaces in the chart's {ROOK_VALUE}, or "
                f"create the run in one of those namespaces",
            )
        return None
    if target.kind == "external" and run_namespace not in policy.external_namespaces:
        allowed = ", ".join(policy.external_namespaces) or "none"
        return InvalidSpec(
            "spec.target.external",
            f"BenchmarkRuns in namespace {run_namespace} may not target external clusters "
            f"(their Jobs run in the run's namespace and mount its keyringSecret; allowed: "
            f"{allowed}); an administrator adds {run_namespace} to the chart's "
            f"{EXTERNAL_VALUE}",
        )
    return None
