"""Whether the run's fio servers (one per client node, manifests/fio.py) are up where the
plan put them, and where to reach them."""

from __future__ import annotations

from collections.abc import Mapping

from crimsonbench.controller.decisions.observed import PodState
from crimsonbench.errors import ExecutionError, NotReady
from crimsonbench.plan.types import RunPlan


def server_addresses(
    plan: RunPlan, pods: Mapping[str, PodState], port: int
) -> dict[str, str] | NotReady | ExecutionError:
    """client -> "ip:port" once every client's fio server is Ready on its node; else what
    is being waited for (NotReady). A server that ended (failed, evicted) or runs on
    another node fails the run (ExecutionError)."""
    waiting = []
    out: dict[str, str] = {}
    for client in plan.clients:
        pod = pods.get(client.name, PodState("Missing"))
        if pod.phase in ("Failed", "Succeeded"):
            return ExecutionError(
                f"the fio server of {client.name} ended ({pod.phase}: {pod.reason or '?'})"
            )
        if pod.node is not None and pod.node != client.node:
            return ExecutionError(f"fio server of {client.name} runs on {pod.node}")
        if not pod.ready or pod.ip is None:
            waiting.append(f"{client.name} ({pod.phase})")
            continue
        out[client.name] = f"{pod.ip}:{port}"
    if waiting:
        return NotReady("waiting for fio servers: " + ", ".join(waiting))
    return out
