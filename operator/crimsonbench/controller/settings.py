"""Operator settings from CRIMSONBENCH_* environment variables, checked at startup."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from crimsonbench.manifests.fio import FIO_PORT
from crimsonbench.manifests.pods import PodOptions
from crimsonbench.plan.build import DEFAULT_GRACE_S
from crimsonbench.plan.target import DEFAULT_ROOK_TARGETS, RookGrant, TargetPolicy


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
    model_config = SettingsConfigDict(env_prefix="CRIMSONBENCH_", frozen=True)

    fio_image: str = Field(
        default="crimsonbench-fio:latest", description="Image with fio (rbd engine), lscpu, rbd."
    )
    image_pull_policy: str = Field(default="IfNotPresent", pattern="^(Always|IfNotPresent|Never)$")
    host_network: bool = Field(
        default=False,
        description="Jobs (probe, prefill, fio, ceph commands) use the node's network: for "
        "Ceph clusters only the host reaches, and nodes without a pod network.",
    )
    job_tolerations: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Tolerations (JSON list) for the prefill, fio and ceph Jobs, e.g. for "
        "tainted storage nodes. The topology probe tolerates every taint anyway.",
    )
    namespace: str | None = Field(
        default=None, description="Watch only this namespace (default: all)."
    )
    operator_namespace: str = Field(
        default="crimsonbench", description="Where node topology caches are kept."
    )
    tick_seconds: float = Field(
        default=2.0,
        gt=0,
        le=300,
        description="Reconcile interval: how soon a finished fio Job is noticed (one GET "
        "per run per tick).",
    )
    step_grace_seconds: int = Field(
        default=DEFAULT_GRACE_S, ge=10, description="Beyond runtime + ramp before a step fails."
    )
    fio_port: int = Field(
        default=FIO_PORT,
        ge=1024,
        le=65535,
        description="Port of the fio servers (on the node's address with hostNetwork).",
    )
    rollout_timeout_seconds: int = Field(default=1800, ge=60)
    metrics_port: int = Field(default=9464, ge=0, le=65535)
    finished_run_ttl_seconds: int = Field(
        default=86400, ge=60, description="Drop a finished run's metric series after this."
    )

    rook_targets: list[RookTargetValue] = Field(
        default_factory=lambda: list(_DEFAULT_TARGETS),
        description="JSON list of {cephCluster: namespace/name, allowedNamespaces: [...]}: "
        "the Rook clusters the operator may act on and which namespaces' runs may target "
        "each (the cluster's own always may). The chart's targets.rook.",
    )
    external_namespaces: list[str] = Field(
        default_factory=list,
        description="JSON list: namespaces whose runs may target external clusters. The "
        "chart's targets.externalNamespaces.",
    )

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
