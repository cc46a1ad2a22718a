"""What one reconcile tick works with: which run (its identity, spec and target), what the
operator remembers of it (record.RunRecord: read once, written back as a diff), the API
client and settings, and the plan once made."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from typing import Any

from crimsonbench.controller.kube import Kube
from crimsonbench.controller.plan_cache import PlanCache
from crimsonbench.controller.record import RunRecord
from crimsonbench.controller.settings import Settings
from crimsonbench.controller.step_index import StepIndex
from crimsonbench.errors import InvalidSpec
from crimsonbench.manifests.naming import LABEL_RUN, label_value
from crimsonbench.manifests.targets import KubeTarget, kube_target, target_refusal
from crimsonbench.plan.types import RunPlan
from crimsonbench.spec.api import API_VERSION, KIND
from crimsonbench.spec.models import BenchmarkRunSpec


def lease_name(target: KubeTarget) -> str:
    """The Lease that gives one run a Ceph cluster at a time (in the operator's namespace),
    named after the cluster: the names operators have always used, so a run in flight
    across an upgrade keeps its lease and no other run takes the cluster meanwhile."""
    return "crimsonbench-" + hashlib.sha256(target.cluster_id.encode()).hexdigest()[:12]


@dataclass
class RunContext:
    name: str
    namespace: str
    uid: str
    spec: BenchmarkRunSpec
    record: RunRecord
    kube: Kube
    settings: Settings
    logger: logging.Logger
    plans: PlanCache = field(default_factory=PlanCache)
    steps: StepIndex = field(default_factory=StepIndex)  # the stored steps, in memory
    plan: RunPlan | None = None  # made once per tick (it reads the topology cache and Rook)
    target: KubeTarget = field(init=False)

    def __post_init__(self) -> None:
        # Where the run acts (namespaces, the CephCluster): executors read this, never
        # spec.target.
        self.target = kube_target(self.spec, self.namespace)

    @property
    def refusal(self) -> InvalidSpec | None:
        """Why this run may not act on its target (the chart's targets), or None."""
        return target_refusal(self.target, self.namespace, self.settings.target_policy())

    @property
    def holder(self) -> str:
        return f"{self.namespace}/{self.name}/{self.uid}"

    @property
    def selector(self) -> str:
        return f"{LABEL_RUN}={label_value(self.name)}"

    @property
    def lease(self) -> tuple[str, str]:
        """The Lease that gives a run its Ceph cluster alone: (namespace, name)."""
        return self.settings.operator_namespace, lease_name(self.target)

    def owner_reference(self) -> dict[str, Any]:
        """Children in the run's namespace go away with the run (garbage collector)."""
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": False,
        }

    def warn(self, reason: str, message: str) -> None:
        """A Warning event on the run (posted with the status; logged here too, which the
        delete handler's kopf posts as an event itself)."""
        self.record.events.append((reason, message))
        self.logger.warning("%s: %s", reason, message)
