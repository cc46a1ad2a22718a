"""Everything one reconcile tick knows about a run, and the status changes it makes."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import Any

from crimsonbench.controller.kube import Kube
from crimsonbench.controller.settings import Settings
from crimsonbench.errors import InvalidSpec
from crimsonbench.manifests.naming import LABEL_RUN, label_value
from crimsonbench.plan.target import KubeTarget, kube_target, target_refusal
from crimsonbench.plan.types import RunPlan
from crimsonbench.spec.api import API_VERSION, KIND
from crimsonbench.spec.models import BenchmarkRunSpec


def now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


@dataclass
class RunContext:
    name: str
    namespace: str
    uid: str
    spec: BenchmarkRunSpec
    status: dict[str, Any]  # as read at the start of the tick
    kube: Kube
    settings: Settings
    logger: logging.Logger
    changes: dict[str, Any] = field(default_factory=dict)  # merged into .status
    # The run's own annotations: bookkeeping the status schema has no field for (step
    # retries); changes are patched into metadata.annotations with the status.
    annotations: dict[str, str] = field(default_factory=dict)
    annotation_changes: dict[str, str] = field(default_factory=dict)
    plan: RunPlan | None = None  # made once per tick (it reads the topology cache and Rook)
    # Warning events to post on the run with the status: (reason, message)
    events: list[tuple[str, str]] = field(default_factory=list)

    @property
    def target(self) -> KubeTarget:
        """Where the run acts (namespaces, the CephCluster, the lease): executors read this,
        never spec.target."""
        return kube_target(self.spec, self.namespace)

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

    def get(self, key: str, default: Any = None) -> Any:
        return self.changes.get(key, self.status.get(key, default))

    def set(self, **values: Any) -> None:
        self.changes.update(values)

    def annotation(self, key: str) -> str | None:
        return self.annotation_changes.get(key, self.annotations.get(key))

    def annotate(self, key: str, value: str) -> None:
        self.annotation_changes[key] = value

    def warn(self, reason: str, message: str) -> None:
        """A Warning event on the run (posted with the status; logged here too, which the
        delete handler's kopf posts as an event itself)."""
        self.events.append((reason, message))
        self.logger.warning("%s: %s", reason, message)

    def condition(self, type_: str, ok: bool, reason: str, message: str) -> None:
        """Set a standard condition; lastTransitionTime changes only when status flips."""
        current = {c["type"]: c for c in self.get("conditions", []) or []}
        old = current.get(type_)
        status = "True" if ok else "False"
        same = old is not None and old.get("status") == status
        current[type_] = {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message[:32000],
            "lastTransitionTime": old["lastTransitionTime"] if same and old else now(),
        }
        self.set(conditions=list(current.values()))
