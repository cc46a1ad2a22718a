"""What the operator observes of the cluster, as the I/O layer (kube.py) returns it: Rook's
OSD pods, nodes, a Job's pod, Kubernetes quantities. Plain data; the decision modules read
it and kube.py makes it, so neither imports the other."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)([a-zA-Z]*)$")
_SCALE = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30,
          "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}  # fmt: skip


def quantity(text: str) -> float:
    """A Kubernetes quantity ("500m", "8Gi", "1") as a number."""
    m = _QUANTITY.match(text.strip())
    if not m or m.group(2) not in _SCALE:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    return float(m.group(1)) * _SCALE[m.group(2)]


@dataclass(frozen=True)
class OsdPod:
    """A Rook OSD pod as the API shows it (label ceph-osd-id, spec.nodeName)."""

    osd_id: int
    node: str | None  # None while unscheduled
    ready: bool
    cpu_limit: str | None = None
    memory_limit: str | None = None
    terminating: bool = False
    uid: str = ""
    restarts: int = 0  # of the osd container
    name: str = ""
    device_class: str = ""  # Rook's device-class label; resources.osd-<class> sizes it

    @property
    def incarnation(self) -> str:
        """Changes whenever the OSD daemon is restarted: a new pod or a container restart."""
        return f"{self.uid}/{self.restarts}"


@dataclass(frozen=True)
class Size:
    """CPU (cores) and memory (bytes), as the scheduler adds requests up on a node."""

    cpu: float = 0.0
    memory: float = 0.0

    def __add__(self, other: Size) -> Size:
        return Size(self.cpu + other.cpu, self.memory + other.memory)

    def __sub__(self, other: Size) -> Size:
        return Size(self.cpu - other.cpu, self.memory - other.memory)

    def most(self, other: Size) -> Size:
        return Size(max(self.cpu, other.cpu), max(self.memory, other.memory))


def total(sizes: Iterable[Size]) -> Size:
    out = Size()
    for size in sizes:
        out += size
    return out


@dataclass(frozen=True)
class PodRequests:
    """What a pod requests of its node: its containers' requests (by name), its init
    containers' (one at a time, before them) and native sidecars' (restartPolicy Always:
    beside them), its runtime overhead."""

    namespace: str
    name: str
    containers: tuple[tuple[str, Size], ...]
    init: tuple[Size, ...] = ()
    sidecars: tuple[Size, ...] = ()
    overhead: Size = Size()
    app: str = ""  # its `app` label (Rook's OSD pods: rook-ceph-osd)

    @property
    def requests(self) -> Size:
        """What the scheduler counts against the node (an upper bound with sidecars: each
        init container is counted beside every sidecar)."""
        beside = total(self.sidecars)
        running = total(size for _, size in self.containers) + beside
        starting = Size()
        for size in self.init:
            starting = starting.most(size + beside)
        return running.most(starting) + self.overhead

    def resized(self, container: str, size: Size) -> PodRequests:
        """The same pod with one container's requests changed (as Rook's rollout does)."""
        containers = tuple((n, size if n == container else s) for n, s in self.containers)
        return replace(self, containers=containers)


@dataclass(frozen=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str]
    allocatable: Size | None = None  # status.allocatable (None: the node says nothing)


@dataclass(frozen=True)
class PodState:
    """The one pod of a Job, as far as the operator cares."""

    phase: str  # Pending, Running, Succeeded, Failed, or Missing
    ready: bool = False
    ip: str | None = None
    node: str | None = None
    reason: str = ""
    name: str = ""
