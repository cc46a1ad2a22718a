"""The operator's side of the fio driver (manifests/fio_driver.py, fio-driver.sh): a step
(or the prefill) started, polled and ended by exec in the driver pod (fio_setup makes it)."""

from __future__ import annotations

from collections.abc import Sequence

from crimsonbench.controller.kube_errors import Forbidden
from crimsonbench.controller.run_context import RunContext
from crimsonbench.errors import ExecutionError
from crimsonbench.manifests import fio_driver
from crimsonbench.manifests.fio_driver import StartRequest, StepReport

EXEC_TIMEOUT_S = 60  # one exec: start, poll or end (a poll may also wait, see poll)


def _exec(ctx: RunContext, namespace: str, pod: str, argv: list[str], timeout_s: float) -> str:
    try:
        rc, out, err = ctx.kube.exec_in_pod(namespace, pod, argv, timeout_s)
    except Forbidden as exc:
        if exc.by_policy:
            raise ExecutionError(
                f"exec into {namespace}/{pod} was refused by the operator's admission "
                f"policy (the chart's rbac.reachPolicy): {exc.message}"
            ) from None
        raise ExecutionError(
            f"the operator may not exec into pods in namespace {namespace}: the "
            "chart's targets.rook (Rook's namespace) or targets.externalNamespaces "
            f"must name {namespace} (a Role granting pods/exec there)"
        ) from None
    if rc != 0:
        raise ExecutionError(f"exec in fio driver {namespace}/{pod} exited {rc}: {err[-500:]}")
    return out


def _call(ctx: RunContext, namespace: str, pod: str, argv: list[str], timeout_s: float) -> str:
    """One exec of the driver script; a pod whose image has another copy (or none) gets
    this operator's first, once (manifests.fio_driver: which copy runs)."""
    out = _exec(ctx, namespace, pod, argv, timeout_s)
    if fio_driver.parse_reply(out)[0]["state"] == fio_driver.NO_DRIVER:
        _exec(ctx, namespace, pod, fio_driver.install_command(), EXEC_TIMEOUT_S)
        out = _exec(ctx, namespace, pod, argv, timeout_s)
    return out


def start(ctx: RunContext, namespace: str, pod: str, request: StartRequest) -> bool:
    """True: started now; False: the step's directory was there already (started by an
    earlier call, maybe by an operator that died since): poll it."""
    return fio_driver.started(_call(ctx, namespace, pod, request.argv(), EXEC_TIMEOUT_S))


def poll(
    ctx: RunContext, namespace: str, pod: str, argv: Sequence[str], *, wait_s: int = 0
) -> StepReport:
    """The step's state (argv: fio_driver.poll_command); with wait_s, the pod waits up to
    that long for its end first (one exec: the operator sees the end within 0.1 s and the
    next step starts at once)."""
    return fio_driver.parse_report(_call(ctx, namespace, pod, list(argv), EXEC_TIMEOUT_S + wait_s))


def end(ctx: RunContext, namespace: str, pod: str, argv: Sequence[str]) -> None:
    """The attempt ended (argv: fio_driver.end_command): stored, the operator holds the
    result; else it is dropped (killed)."""
    _call(ctx, namespace, pod, list(argv), EXEC_TIMEOUT_S)
