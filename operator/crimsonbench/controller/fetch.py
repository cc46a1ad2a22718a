"""`crimsonbench fetch`: a BenchmarkRun's results, read from the API, written as the same
results directory a local run writes, so `report` and `compare` work unchanged.

What is read: the BenchmarkRun (spec, status), its `<run>-run` ConfigMap (RunInfo and
plan) and its results ConfigMaps (manifests/results.py: one per finished step, `<run>-step-
<key>`; only those the run owns). A run still
going, or one that failed, gives what exists; `FetchedRun.note` says so, and names any
step whose ConfigMaps were left half-written (it is not fetched).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from crimsonbench.errors import CrimsonBenchError
from crimsonbench.manifests.results import (
    not_owned,
    owned_by,
    read_run_configmap,
    read_stored,
    results_selector,
    run_configmap_name,
)
from crimsonbench.results.run_status import RunStatus
from crimsonbench.results.store import ResultStore
from crimsonbench.results.types import RunInfo, StepResult
from crimsonbench.spec.api import GROUP, PLURAL, VERSION
from crimsonbench.spec.models import validate_spec
from crimsonbench.spec.status import BenchmarkRunStatus, Phase


class FetchError(CrimsonBenchError):
    """The run or its results cannot be read (the message says which and why)."""


@dataclass(frozen=True)
class FetchedRun:
    name: str
    namespace: str
    spec: dict[str, Any]  # as the API returns it (camelCase, defaults filled in)
    status: dict[str, Any]
    info: RunInfo
    plan: dict[str, Any] | None
    results: list[StepResult]
    unreadable: tuple[str, ...] = ()  # stored steps that could not be read, and why

    @property
    def phase(self) -> str:
        return str(self.status.get("phase") or Phase.PENDING.value)

    @property
    def note(self) -> str:
        """'' for a completed run; else what a reader of partial results must know."""
        total = int(self.status.get("stepsTotal") or 0)
        done = f"{len(self.results)} of {total or '?'} steps"
        if self.unreadable:
            done += (f" ({len(self.unreadable)} stored step(s) left half-written, not "
                     f"fetched: {'; '.join(self.unreadable)[:2000]})")  # fmt: skip
        if self.phase == Phase.COMPLETED.value:
            return f"run {self.name}: {done} fetched" if self.unreadable else ""
        if self.phase == Phase.FAILED.value:
            return f"run {self.name} failed ({self.status.get('message', '')}); {done} fetched"
        return f"run {self.name} is {self.phase}, not finished: {done} fetched so far"


def fetched_run(
    run: Mapping[str, Any],
    run_configmap: Mapping[str, Any] | None,
    results_configmaps: Sequence[Mapping[str, Any]],
) -> FetchedRun:
    """Pure: the API objects of a run -> what the results directory needs."""
    meta = run.get("metadata") or {}
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
    uid = str(meta.get("uid", ""))
    spec = dict(run.get("spec") or {})
    status = dict(run.get("status") or {})
    # found by the run's name: only the run's own are its results (an earlier run of the
    # same name may have left its ConfigMaps behind)
    others = not_owned([*([run_configmap] if run_configmap else []), *results_configmaps], uid)
    plan: dict[str, Any] | None = None
    if run_configmap is not None and owned_by(run_configmap, uid):
        info, plan = read_run_configmap(run_configmap)
    else:  # planned before this operator version, or never planned
        info = RunInfo.from_spec(name, validate_spec(spec), started=status.get("startedAt", ""))
    stored = read_stored([c for c in results_configmaps if owned_by(c, uid)])
    unreadable = list(stored.unreadable)  # what cannot be read is named, not fatal
    if others:
        listed = ", ".join(others[:10])
        unreadable.append(f"{len(others)} ConfigMap(s) labelled with the run's name are not "
                          f"its own (an earlier run of that name?): {listed}")  # fmt: skip
    return FetchedRun(name, namespace, spec, status, info, plan, stored.results,
                      tuple(unreadable))  # fmt: skip


def write_results_dir(run: FetchedRun, store: ResultStore) -> None:
    """The layout of a local run's results directory (results.store), from a fetched run."""
    store.root.mkdir(parents=True, exist_ok=True)
    store.write_spec(run.spec)
    if run.plan is not None:
        store.write_plan(run.plan)
    store.write_run_info(run.info, {"spec": run.spec, "source": f"{run.namespace}/{run.name}"})
    for result in run.results:
        store.write_step(result)
    try:
        operator = BenchmarkRunStatus.model_validate(run.status)
    except ValidationError as exc:  # the status is writable by others: said, not trusted
        operator = BenchmarkRunStatus(message=f"the run's status cannot be read: {exc}"[:500])
    store.write_status(RunStatus.of_operator(operator, len(run.results)))


def fetch_run(api: Any, namespace: str, name: str) -> FetchedRun:
    """Read a run through a kubernetes.client.ApiClient (the kubeconfig's user)."""
    from kubernetes import client

    from crimsonbench.controller.kube_errors import Gone, KubeError, Typed

    custom, core = Typed(client.CustomObjectsApi(api)), Typed(client.CoreV1Api(api))
    try:
        run: dict[str, Any] = custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name
        )
    except Gone as exc:
        raise FetchError(
            f"no BenchmarkRun {name} in namespace {namespace} "
            f"(kubectl get benchmarkruns -n {namespace})"
        ) from exc
    except KubeError as exc:
        raise FetchError(f"cannot read BenchmarkRun {namespace}/{name}: {exc}") from exc
    serialize = api.sanitize_for_serialization
    try:
        run_cm = serialize(core.read_namespaced_config_map(run_configmap_name(name), namespace))
    except Gone:
        run_cm = None
    except KubeError as exc:
        raise FetchError(f"cannot read the run's ConfigMap: {exc}") from exc
    try:
        found = core.list_namespaced_config_map(namespace, label_selector=results_selector(name))
    except KubeError as exc:
        raise FetchError(f"cannot list the run's results ConfigMaps: {exc}") from exc
    return fetched_run(run, run_cm, [serialize(c) for c in found.items])
