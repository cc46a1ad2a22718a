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
from crimsonbench.manifests.naming import LABEL_RUN, child_name, label_value, owner_tag
from crimsonbench.manifests.targets import KubeTarget, kube_target, target_refusal
from crimsonbench.plan.types import RunPlan
from crimsonbench.spec.api import API_VERSION, KIND
from crimsonbench.spec.models import BenchmarkRunSpec


def lease_name(identity: str) -> str:
    """The Lease that gives one run a Ceph cluster at a time, named after the cluster's
    identity (a CephCluster's uid, an external cluster's fsid): one cluster, one name, however
    its target is spelled."""
    return "crimsonbench-" + hashlib.sha256(identity.encode()).hexdigest()[:12]


@dataclass
class RunBase:
    """A run as its cleanup knows it: who it is and what it recorded (the undo record),
    without its spec, which cleanup never reads (it may be edited, or no longer valid)."""

    name: str
    namespace: str
    uid: str
    record: RunRecord
    kube: Kube
    settings: Settings
    logger: logging.Logger

    @property
    def holder(self) -> str:
        return f"{self.namespace}/{self.name}/{self.uid}"

    @property
    def owner(self) -> str:
        """The run's tag in the names of what it creates (manifests.naming.owner_tag)."""
        return owner_tag(self.uid)

    @property
    def child(self) -> str:
        """The name every Job, pool, cephx user and image of the run is made from, and the
        run label they carry: the run's name and its owner tag (a run of the same name in
        another namespace, or before this one, never shares it)."""
        return child_name(self.name, self.uid)

    @property
    def selector(self) -> str:
        return f"{LABEL_RUN}={label_value(self.child)}"

    @property
    def lease(self) -> tuple[str, str]:
        """The Lease the run holds or waits for: (namespace, name), as recorded when it
        asked (the undo record); ("", "") before that."""
        held = self.record.book.undo.lease
        return (held[0], held[1]) if len(held) == 2 else ("", "")

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


@dataclass
class RunContext(RunBase):
    """A run with its spec: every stage before cleanup."""

    spec: BenchmarkRunSpec = field(kw_only=True)
    plans: PlanCache = field(default_factory=PlanCache, kw_only=True)
    steps: StepIndex = field(default_factory=StepIndex, kw_only=True)  # stored, in memory
    plan: RunPlan | None = field(default=None, kw_only=True)  # made once per tick
    target: KubeTarget = field(init=False)

    def __post_init__(self) -> None:
        # Where the run acts (namespaces, the CephCluster): executors read this, never
        # spec.target.
        self.target = kube_target(self.spec, self.namespace)

    @property
    def refusal(self) -> InvalidSpec | None:
        """Why this run may not act on its target (the chart's targets), or None."""
        return target_refusal(self.target, self.namespace, self.settings.target_policy())
