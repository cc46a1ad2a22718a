"""The run's Jobs, named once: a Job that runs to its end (created once; pending, succeeded
with its log, or failed with its reason) and a Job that serves for the run (the fio
servers and driver: created once; its pod, or NotReady until it runs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from crimsonbench.controller.decisions.observed import PodState
from crimsonbench.controller.kube import Kube
from crimsonbench.errors import ExecutionError, NotReady
from crimsonbench.results.ceph_client_errors import explain_ceph_client_error

FAILED_LOG_CHARS = 1 << 20  # of a failed Job's log, read for the hint and the tail


@dataclass(frozen=True)
class JobOutcome:
    """Where a Job that runs to its end is. pending: created now, or running; succeeded:
    `text` is its pod's log; failed: `text` is its log's tail, or why its pod never ran."""

    namespace: str
    name: str
    state: Literal["pending", "succeeded", "failed"]
    text: str = ""

    @property
    def where(self) -> str:
        return f"Job {self.namespace}/{self.name}"


def job_outcome(kube: Kube, body: dict[str, Any]) -> JobOutcome:
    """Create the Job if it is not there (once: its name is the run's), and say where it is."""
    ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
    state = kube.job_state(ns, name)
    if state == "missing":
        kube.ensure_job(ns, body)
        return JobOutcome(ns, name, "pending", "created")
    if state == "running":
        return JobOutcome(ns, name, "pending", "running")
    if state == "failed":
        return JobOutcome(ns, name, "failed", kube.failed_job_text(ns, name, FAILED_LOG_CHARS))
    return JobOutcome(ns, name, "succeeded", kube.job_log(ns, name))


def job_log(kube: Kube, body: dict[str, Any], what: str) -> str:
    """The log of a Job that must succeed: NotReady while it runs, ExecutionError with its
    log's tail (and what a Ceph client error in it means) when it failed."""
    out = job_outcome(kube, body)
    if out.state == "pending":
        raise NotReady(f"{what}: {out.where} {out.text}")
    if out.state == "failed":
        hint = explain_ceph_client_error(out.text)
        hint = f": {hint}" if hint else ""
        raise ExecutionError(f"{what}: {out.where} failed{hint}; log tail:\n{out.text[-1500:]}")
    return out.text


def serving_pod(kube: Kube, body: dict[str, Any], what: str) -> PodState:
    """The pod of a Job that serves for the whole run, created once; ExecutionError once
    the Job ended (what it held is lost, and a new one would start empty)."""
    ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
    state = kube.job_state(ns, name)
    if state == "missing":
        kube.ensure_job(ns, body)
        return PodState("Missing")
    if state != "running":
        raise ExecutionError(f"{what} (Job {ns}/{name}) ended ({state})")
    return kube.job_pod(ns, name)
