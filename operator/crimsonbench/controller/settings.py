"""Operator settings from CRIMSONBENCH_* environment variables, read and checked once by
the startup handler (main.startup), kept in kopf's memo."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from crimsonbench.manifests.fio import BARRIER_PORT, FIO_PORT
from crimsonbench.manifests.pods import PodOptions
from crimsonbench.manifests.targets import DEFAULT_ROOK_TARGETS, RookGrant, TargetPolicy
from crimsonbench.plan.build import DEFAULT_GRACE_S


class RookTargetValue(BaseModel):
    """One entry of the chart's targets.rook, as the chart passes it (JSON)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    cephCluster: str  # noqa: N815 (the chart's spelling)
    allowedNamespaces: list[str] = Field(default_factory=list)  # noqa: N815

    def grant(self) -> RookGrant:
        return RookGrant.parse(self.cephCluster, self.allowedNamespaces)


_DEFAULT_TARGETS = [
    RookTargetValue(cephCluster=g.ref, allowedNamespaces=list(g.allowed_namespaces))
    for g in DEFAULT_ROOK_TARGETS
]


class Settings(BaseSettings):
    """Read once, by the operator's startup handler (never at import); each field's
    docstring says what it sets."""

    model_config = SettingsConfigDict(
        env_prefix="CRIMSONBENCH_", frozen=True, use_attribute_docstrings=True
    )

    fio_image: str = f"crimsonbench-fio:{version('crimsonbench')}"  # as the chart's default
    """Image with fio (rbd engine), lscpu, rbd (any image with them and sh works), by a
    fixed tag or a digest (repo@sha256:...): never `latest` or no tag, which would let
    each node run whatever it last pulled under that name."""
    image_pull_policy: str = Field(default="IfNotPresent", pattern="^(Always|IfNotPresent|Never)$")
    host_network: bool = False
    """Jobs (probe, prefill, fio, ceph commands) use the node's network: for Ceph clusters
    only the host reaches, and nodes without a pod network."""
    job_tolerations: list[dict[str, Any]] = Field(default_factory=list)
    """Tolerations (JSON list) for the prefill, fio and ceph Jobs, e.g. for tainted storage
    nodes. The topology probe tolerates every taint anyway."""
    namespace: str | None = None
    """Watch only this namespace (default: all)."""
    operator_namespace: str = "crimsonbench"
    """Where node topology caches, leases and saved originals are kept."""
    tick_seconds: float = Field(default=2.0, gt=0, le=300)
    """Reconcile interval: how soon a finished step is noticed (one poll per run per tick)."""
    step_grace_seconds: int = Field(default=DEFAULT_GRACE_S, ge=10)
    """Beyond runtime + ramp before a step fails."""
    fio_port: int = Field(default=FIO_PORT, ge=1024, le=65535)
    """Port of the fio servers (on the node's address with hostNetwork)."""
    barrier_port: int = Field(default=BARRIER_PORT, ge=1024, le=65535)
    """Port of a step's start barrier in the run's fio driver pod, where the jobs of a
    step with several clients meet before they start."""
    rollout_timeout_seconds: int = Field(default=1800, ge=60)
    """How long a bounded wait for Rook (rollout, pool, cephx user, removal, restore) lasts."""
    error_timeout_seconds: int = Field(default=600, ge=1)
    """How long an unexpected error (the API refusing or failing a call, a quota, the
    CephCluster gone...) may go on before the run fails; a run that changed the cluster is
    restored first. Any tick without an error starts the count again."""
    restore_timeout_seconds: int = Field(default=7200, ge=1)
    """How long the restore may take: past it the run ends Failed, its ClusterRestored
    condition naming what is left to put back by hand, and the cluster's lease is released
    (the CephCluster keeps the run's marks, so no other run patches it meanwhile)."""
    metrics_port: int = Field(default=9464, ge=0, le=65535)
    metrics_address: str = Field(default="127.0.0.1", min_length=1, max_length=253)
    """Address the metrics are served on: the chart sets the pod's IP (what its Service
    reaches); 0.0.0.0 would serve them on every interface (the node's, with hostNetwork)."""
    finished_run_ttl_seconds: int = Field(default=86400, ge=60)
    """Drop a finished run's metric series after this."""

    rook_targets: list[RookTargetValue] = Field(default_factory=lambda: list(_DEFAULT_TARGETS))
    """JSON list of {cephCluster: namespace/name, allowedNamespaces: [...]}: the Rook
    clusters the operator may act on and which namespaces' runs may target each (the
    cluster's own always may). The chart's targets.rook."""
    external_namespaces: list[str] = Field(default_factory=list)
    """JSON list: namespaces whose runs may target external clusters. The chart's
    targets.externalNamespaces."""

    @field_validator("fio_image")
    @classmethod
    def _fixed_image(cls, ref: str) -> str:
        name = ref.split("@", 1)[0]
        tag = name.rsplit("/", 1)[-1].partition(":")[2]
        if "@sha256:" not in ref and tag in ("", "latest"):
            raise ValueError(
                f"CRIMSONBENCH_FIO_IMAGE {ref!r} names no fixed version (a mutable tag): "
                "give a version tag (crimsonbench-fio:0.1.0) or a digest (repo@sha256:...)"
            )
        return ref

    @model_validator(mode="after")
    def _policy_is_valid(self) -> Settings:
        self.target_policy()  # ValueError (names the entry) at startup, not at the first run
        return self

    def target_policy(self) -> TargetPolicy:
        return TargetPolicy(
            rook=tuple(t.grant() for t in self.rook_targets),
            external_namespaces=tuple(self.external_namespaces),
        )

    def pod_options(self) -> PodOptions:
        """What every Job builder takes from the operator's settings."""
        return PodOptions(
            image=self.fio_image,
            image_pull_policy=self.image_pull_policy,
            host_network=self.host_network,
            tolerations=tuple(self.job_tolerations),
        )
