"""kopf wiring only (the one module of the package that knows kopf): each handler loads
the run's record, builds a RunContext and hands off to the stages; what the tick changed
goes back as one status patch. Shared state (settings, the API client, the metrics view,
the plan cache) lives in kopf's memo, made by the startup handler; nothing is read at
import.

Run with `kopf run -m crimsonbench.controller.main` (or `crimsonbench operator`).
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

import kopf
from kubernetes import client, config
from prometheus_client import start_http_server

from crimsonbench.controller import bounded, stages
from crimsonbench.controller.decisions.stuck import error_text
from crimsonbench.controller.kube import Kube
from crimsonbench.controller.metrics_view import RECONCILES, RunsView
from crimsonbench.controller.plan_cache import PlanCache
from crimsonbench.controller.record import RunRecord
from crimsonbench.controller.run_context import RunBase, RunContext
from crimsonbench.controller.settings import Settings
from crimsonbench.controller.step_index import StepIndex
from crimsonbench.controller.study import tick_study
from crimsonbench.errors import ExecutionError, InvalidSpec, ParseError
from crimsonbench.metrics import RunCollector, new_registry
from crimsonbench.plan.meaning import effective_spec
from crimsonbench.spec.api import GROUP, PLURAL, STUDY_PLURAL, VERSION
from crimsonbench.spec.names import validate_name
from crimsonbench.spec.status import Phase

RECORD_LOST = (
    "the run's status.record was not kept: the BenchmarkRun CRD in the cluster is older "
    "than this operator (helm does not upgrade CRDs); apply crds/benchmarkrun.yaml of this "
    "version (then restart the operator). Nothing is done for the run until its record is kept"
)


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """In-cluster service account first, else the kubeconfig named by KUBECONFIG now
    (the kubernetes library reads KUBECONFIG once, at import).

    In-cluster goes through the kubernetes client, which honours KUBERNETES_SERVICE_HOST
    and _PORT; kopf's own service-account login always dials kubernetes.default.svc, a
    name a hostNetwork pod cannot resolve (found by the real-node e2e)."""
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return kopf.login_via_client(**kwargs)
    return kopf.login_with_kubeconfig(**kwargs)


def _load_client_config() -> None:
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))


@kopf.on.startup()
def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    ours = Settings()  # fails fast on a bad CRIMSONBENCH_* value
    _load_client_config()
    memo.settings = ours
    memo.kube = Kube(client.ApiClient())
    memo.view = RunsView(ours.finished_run_ttl_seconds)
    memo.plans = PlanCache()
    memo.steps = StepIndex()  # each run's stored steps, read from the API once
    memo.recorded = set()  # runs whose record this operator has written
    registry = new_registry(RunCollector(memo.view.states), RECONCILES)
    memo.metrics_server, _thread = start_http_server(
        ours.metrics_port, addr=ours.metrics_address, registry=registry
    )
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
    settings.posting.level = logging.INFO
    settings.watching.server_timeout = 300
    _register_reconcile(ours.tick_seconds)


@functools.cache
def _register_reconcile(tick_seconds: float) -> None:
    """The reconcile timer, at the interval the settings say (read at startup, when kopf
    has not begun watching; kopf fixes a timer's interval when it is registered). Once per
    process: the registry is the process's."""
    kopf.timer(GROUP, VERSION, PLURAL, interval=tick_seconds, initial_delay=0.5, idle=0)(reconcile)
    kopf.timer(GROUP, VERSION, STUDY_PLURAL, interval=tick_seconds, initial_delay=0.5,
               idle=0)(reconcile_study)  # fmt: skip


def _context(
    memo: kopf.Memo, meta: Any, spec: Any, status: Any, logger: Any
) -> tuple[RunContext | RunBase, InvalidSpec | None]:
    """The run as this tick works with it, and why an edit of its spec is refused (None:
    it is not). After planning the spec is frozen but for the sweep's axes
    (plan.meaning.effective_spec): a refused edit never stops the restore, which reads
    only the run's undo record (a RunBase, when no spec can be had at all)."""
    name, namespace, uid = meta["name"], meta.get("namespace") or "default", meta["uid"]
    # the CRD's CEL rule refuses such names at admission; an object that predates the rule
    # (or a server without it) is refused here, before any name is made from it
    name = validate_name(name)
    record = RunRecord.load(status)
    model, refused = effective_spec(dict(spec), record.book.planned_spec)
    base = (name, namespace, uid, record, memo.kube, memo.settings, logger)
    if model is None:
        return RunBase(*base), refused
    return RunContext(*base, spec=model, plans=memo.plans, steps=memo.steps), refused


def _apply(ctx: RunBase, before: Phase, patch: kopf.Patch, body: Any, logger: Any) -> None:
    """What the tick changed, as one status patch; an event per phase change and per
    refusal."""
    record = ctx.record
    for key, value in record.status_patch().items():
        patch.status[key] = value
    after = record.status.phase
    if after != before:
        message = f"phase {before.value} -> {after.value}: {record.status.message}"
        logger.info("%s", message)
        # An Event per phase change, for `kubectl describe` (timer logs are not posted).
        event = kopf.warn if after == Phase.FAILED else kopf.info
        event(body, reason=after.value, message=message[:1000])
    for reason, text in record.events:  # refusals: what was not done, and why
        kopf.warn(body, reason=reason, message=text[:1000])


@RECONCILES.instrument
def reconcile(
    body: Any, meta: Any, spec: Any, status: Any, patch: kopf.Patch, logger: Any,
    memo: kopf.Memo, **_: Any,
) -> None:  # fmt: skip
    if (status or {}).get("phase") in (Phase.COMPLETED.value, Phase.FAILED.value):
        memo.steps.forget(meta["uid"])  # its results are read from the API from now on
        return
    try:
        ctx, refused = _context(memo, meta, spec, status, logger)
    except InvalidSpec as exc:  # the CRD let through what only Python checks (e.g. overlap)
        patch.status.update(phase=Phase.FAILED.value, message=str(exc), stage="done")
        raise kopf.PermanentError(str(exc)) from exc
    uid = meta["uid"]
    if ctx.record.migrated and uid in memo.recorded and (status or {}).get("stage"):
        # written by this operator, gone now: the API server prunes it (an older CRD).
        # Nothing is done: the record is written again (kept once the CRD is applied) and
        # a condition says why.
        ctx.record.condition("RecordKept", False, "CrdTooOld", RECORD_LOST)
        lost = ctx.record.status_patch()
        patch.status.update({k: lost[k] for k in ("record", "conditions") if k in lost})
        kopf.warn(body, reason="CrdTooOld", message=RECORD_LOST)
        return
    memo.recorded.add(uid)
    if "RecordKept" in ctx.record.conditions():  # said before the CRD was applied
        ctx.record.condition("RecordKept", True, "CrdApplied", "the run's record is kept")
    before = ctx.record.status.phase
    try:
        if refused is not None:
            stages.refuse_edit(ctx, refused)
        if isinstance(ctx, RunContext):
            stages.tick(ctx)
        else:
            stages.tick_base(ctx)
    except (InvalidSpec, ExecutionError, ParseError) as exc:
        _apply(ctx, before, patch, body, logger)
        raise kopf.PermanentError(str(exc)) from exc
    except Exception as exc:
        # Kept in the run's record by the tick (controller/decisions/stuck.py): retried at the next
        # tick, until it has lasted errorTimeoutSeconds and the run fails (and restores).
        _apply(ctx, before, patch, body, logger)
        delay = memo.settings.tick_seconds
        raise kopf.TemporaryError(error_text(exc), delay=delay) from exc
    finally:
        try:
            if isinstance(ctx, RunContext):
                memo.view.observe(ctx)
        except Exception:  # metrics must never break reconciling
            logger.exception("could not update the metrics view")
    _apply(ctx, before, patch, body, logger)


def reconcile_study(
    body: Any, meta: Any, spec: Any, status: Any, patch: kopf.Patch, memo: kopf.Memo, **_: Any
) -> None:
    """A study's tick (controller/study.py): its next run created, its status written."""
    if (status or {}).get("phase") in (Phase.COMPLETED.value, Phase.FAILED.value):
        return
    tick = tick_study(memo.kube, meta["name"], meta.get("namespace") or "default",
                      meta["uid"], dict(spec), dict(status or {}),
                      int(meta.get("generation") or 0))  # fmt: skip
    patch.status.update(tick.status.model_dump(mode="json", by_alias=True, exclude_none=True))
    for reason, text in tick.events:
        event = kopf.warn if reason in ("Failed", "EditRefused") else kopf.info
        event(body, reason=reason, message=text[:1000])


@kopf.on.cleanup()
def shutdown(memo: kopf.Memo, **_: Any) -> None:
    server = memo.pop("metrics_server", None)
    if server is not None:
        server.shutdown()
        server.server_close()  # the port is free for the next operator in this process


@kopf.on.probe(id="reconciled_runs")
def reconciled_runs(memo: kopf.Memo, **_: Any) -> int:
    """For the liveness endpoint (`kopf run --liveness`): runs currently known."""
    view = memo.get("view")
    return len(view.states()) if view else 0


# Restoring waits for Rook to roll the OSDs back and to remove the pool: minutes, not the
# 100 s that 20 retries of 5 s would allow. The finalizer stays until this handler is done
# or its timeout passes (then kopf gives up and the cluster keeps what could not be undone).
DELETE_TIMEOUT_S = 2 * 3600


@kopf.on.delete(GROUP, VERSION, PLURAL, backoff=5, timeout=DELETE_TIMEOUT_S)
def delete(
    body: Any, meta: Any, spec: Any, status: Any, patch: kopf.Patch, logger: Any,
    memo: kopf.Memo, **_: Any,
) -> None:  # fmt: skip
    """Stop fio, restore the cluster, release the lease; the finalizer waits for this.
    What it got done is written to the record like a tick's (a retry goes on from there)."""
    try:
        ctx, _refused = _context(memo, meta, spec, status, logger)
    except InvalidSpec:
        return  # an invalid name: nothing was ever made from it
    before = ctx.record.status.phase
    try:
        stages.cleanup(ctx)
    except Exception as exc:  # noqa: BLE001 - bounded like any restore, whatever it is
        # as a tick's restore: retried until restoreTimeoutSeconds, then the finalizer
        # goes and the status names what is left to do by hand (the lease released)
        waited = bounded.restore_overdue(ctx)
        if waited is None:
            _apply(ctx, before, patch, body, logger)
            raise kopf.TemporaryError(f"cleanup not finished: {exc}", delay=5) from exc
        bounded.end_restore(ctx, waited, error_text(exc))
        _apply(ctx, before, patch, body, logger)
        logger.warning("run deleted; its cleanup gave up: %s", ctx.record.status.message)
    memo.view.forget(ctx.namespace, ctx.name)
    memo.steps.forget(ctx.uid)
    logger.info("run deleted; cluster restored and children removed")


def run_here(namespaces: list[str], liveness: str | None) -> None:
    """The operator in this process (`crimsonbench operator`, for development)."""
    kopf.run(clusterwide=not namespaces, namespaces=namespaces, liveness_endpoint=liveness,
             standalone=True)  # fmt: skip
