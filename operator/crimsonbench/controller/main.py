"""kopf wiring only: each handler builds a RunContext and hands off to the stages.

Run with `kopf run -m crimsonbench.controller.main` (or `crimsonbench operator`).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import kopf
from kubernetes import client, config
from prometheus_client import start_http_server

from crimsonbench.controller import stages
from crimsonbench.controller.kube import Kube
from crimsonbench.controller.metrics_view import RECONCILES, RunsView
from crimsonbench.controller.run_context import RunContext
from crimsonbench.controller.settings import Settings
from crimsonbench.errors import CrimsonBenchError, ExecutionError, InvalidSpec, ParseError
from crimsonbench.metrics import RunCollector, new_registry
from crimsonbench.spec.api import GROUP, PLURAL, VERSION
from crimsonbench.spec.models import validate_spec
from crimsonbench.spec.names import validate_name
from crimsonbench.spec.status import Phase

# kopf fixes a timer's interval when the decorator runs, so this setting is read at import.
TICK_SECONDS = Settings().tick_seconds
_state: dict[str, Any] = {}


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
def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
    ours = Settings()  # fails fast on a bad CRIMSONBENCH_* value
    _state["settings"] = ours
    _load_client_config()
    _state["kube"] = Kube(client.ApiClient())
    view = RunsView(ours.finished_run_ttl_seconds)
    _state["view"] = view
    registry = new_registry(RunCollector(view.states), RECONCILES)
    server, _thread = start_http_server(ours.metrics_port, registry=registry)
    _state["metrics_server"] = server
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
    settings.posting.level = logging.INFO
    settings.watching.server_timeout = 300


def _context(
    name: str,
    namespace: str | None,
    uid: str,
    spec: Any,
    status: Any,
    logger: Any,
    annotations: Any = None,
) -> RunContext:
    return RunContext(
        # the CRD's CEL rule refuses such names at admission; an object that predates the
        # rule (or a server without it) is refused here, before any name is made from it
        name=validate_name(name),
        namespace=namespace or "default",
        uid=uid,
        spec=validate_spec(dict(spec)),
        status=dict(status or {}),
        kube=_state["kube"],
        settings=_state["settings"],
        logger=logger,
        annotations={str(k): str(v) for k, v in dict(annotations or {}).items()},
    )


def _apply(ctx: RunContext, patch: kopf.Patch, body: Any, logger: Any) -> None:
    before = ctx.status.get("phase")
    for key, value in ctx.changes.items():
        patch.status[key] = value
    for key, text in ctx.annotation_changes.items():
        patch.metadata.annotations[key] = text
    after = ctx.changes.get("phase", before)
    if after != before:
        message = f"phase {before or 'new'} -> {after}: {ctx.get('message', '')}"
        logger.info("%s", message)
        # An Event per phase change, for `kubectl describe` (timer logs are not posted).
        event = kopf.warn if after == Phase.FAILED.value else kopf.info
        event(body, reason=str(after), message=message[:1000])
    for reason, text in ctx.events:  # refusals: what was not done, and why
        kopf.warn(body, reason=reason, message=text[:1000])


@kopf.timer(GROUP, VERSION, PLURAL, interval=TICK_SECONDS, initial_delay=0.5, idle=0)
@RECONCILES.instrument
def reconcile(
    body: Any,
    name: str,
    namespace: str | None,
    uid: str,
    spec: Any,
    status: Any,
    patch: kopf.Patch,
    logger: Any,
    annotations: Any,
    **_: Any,
) -> None:
    if (status or {}).get("phase") in (Phase.COMPLETED.value, Phase.FAILED.value):
        return
    try:
        ctx = _context(name, namespace, uid, spec, status, logger, annotations)
    except InvalidSpec as exc:  # the CRD let through what only Python checks (e.g. overlap)
        patch.status.update(phase=Phase.FAILED.value, message=str(exc), stage="done")
        raise kopf.PermanentError(str(exc)) from exc
    try:
        stages.tick(ctx)
    except (InvalidSpec, ExecutionError, ParseError) as exc:
        _apply(ctx, patch, body, logger)
        raise kopf.PermanentError(str(exc)) from exc
    finally:
        try:
            _state["view"].observe(ctx)
        except Exception:  # metrics must never break reconciling
            logger.exception("could not update the metrics view")
    _apply(ctx, patch, body, logger)


@kopf.on.cleanup()
def shutdown(**_: Any) -> None:
    server = _state.pop("metrics_server", None)
    if server is not None:
        server.shutdown()


@kopf.on.probe(id="reconciled_runs")
def reconciled_runs(**_: Any) -> int:
    """For the liveness endpoint (`kopf run --liveness`): runs currently known."""
    view = _state.get("view")
    return len(view.states()) if view else 0


# Restoring waits for Rook to roll the OSDs back and to remove the pool: minutes, not the
# 100 s that 20 retries of 5 s would allow. The finalizer stays until this handler is done
# or its timeout passes (then kopf gives up and the cluster keeps what could not be undone).
DELETE_TIMEOUT_S = 2 * 3600


@kopf.on.delete(GROUP, VERSION, PLURAL, backoff=5, timeout=DELETE_TIMEOUT_S)
def delete(
    name: str, namespace: str | None, uid: str, spec: Any, status: Any, logger: Any, **_: Any
) -> None:
    """Stop fio, restore the cluster, release the lease; the finalizer waits for this."""
    try:
        ctx = _context(name, namespace, uid, spec, status, logger)
    except InvalidSpec:
        return  # never started anything
    try:
        stages.cleanup(ctx)
    except CrimsonBenchError as exc:
        raise kopf.TemporaryError(f"cleanup not finished: {exc}", delay=5) from exc
    _state["view"].forget(namespace, name)
    logger.info("run deleted; cluster restored and children removed")
