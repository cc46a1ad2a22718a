"""The run's Jobs, named once, and what their outcome means, said once:

- job_log: a Job that must succeed (NotReady while it runs; ExecutionError with its log's
  tail when it failed: the run stops there);
- job_ended: a Job whose failure the run reports and goes on from (the caller's condition
  names what to do by hand): NotReady while it runs, then its outcome;
- either deletes the Job once read when asked (`delete`: a cache written, a restore done);
- serving_pod: a Job that serves for the whole run (the fio servers and driver).

job_outcome is the one place a Job is created and its state read."""

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


def job_log(kube: Kube, body: dict[str, Any], what: str, *, delete: bool = False) -> str:
    """The log of a Job that must succeed: NotReady while it runs, ExecutionError with its
    log's tail (and what a Ceph client error in it means) when it failed."""
    out = job_ended(kube, body, what, delete=delete)
    if out.state == "failed":
        hint = explain_ceph_client_error(out.text)
        hint = f": {hint}" if hint else ""
        raise ExecutionError(f"{what}: {out.where} failed{hint}; log tail:\n{out.text[-1500:]}")
    return out.text


def job_ended(kube: Kube, body: dict[str, Any], what: str, *, delete: bool = False) -> JobOutcome:
    """A Job's outcome once it ended (succeeded or failed: the caller says what a failure
    means); NotReady while it runs. With `delete`, the Job goes once it is read."""
    out = job_outcome(kube, body)
    if out.state == "pending":
        raise NotReady(f"{what}: {out.where} {out.text}")
    if delete:
        kube.delete_job(out.namespace, out.name)
    return out


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
