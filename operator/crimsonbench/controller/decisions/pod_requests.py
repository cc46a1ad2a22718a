"""Pods and nodes as the API returns them (the kubernetes client's models), read into what
the capacity check counts (observed.PodRequests, observed.Size): the scheduler's view of
a pod's requests. kube.py's reads use it; nothing here calls the API."""

from __future__ import annotations

from typing import Any

from crimsonbench.controller.decisions.observed import PodRequests, Size, quantity


def size_of(resources: dict[str, Any]) -> Size:
    """cpu and memory of a requests/allocatable map (absent: 0)."""
    cpu, memory = resources.get("cpu"), resources.get("memory")
    return Size(quantity(str(cpu)) if cpu else 0.0, quantity(str(memory)) if memory else 0.0)


def _requests(container: Any) -> Size:
    res = container.resources
    return size_of((res.requests if res else None) or {})


def pod_requests(pod: Any) -> PodRequests:
    init = pod.spec.init_containers or []
    sidecar = [c for c in init if c.restart_policy == "Always"]
    return PodRequests(
        namespace=str(pod.metadata.namespace),
        name=str(pod.metadata.name),
        containers=tuple((c.name, _requests(c)) for c in pod.spec.containers),
        init=tuple(_requests(c) for c in init if c.restart_policy != "Always"),
        sidecars=tuple(_requests(c) for c in sidecar),
        overhead=size_of(pod.spec.overhead or {}),
        app=str((pod.metadata.labels or {}).get("app", "")),
    )


def allocatable_of(node: Any) -> Size | None:
    """What the node offers pods (status.allocatable); None when it says nothing."""
    found = (node.status.allocatable if node.status else None) or {}
    return size_of(found) if found else None
