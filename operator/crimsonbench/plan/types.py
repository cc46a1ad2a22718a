"""The values the planner produces. Frozen, so executors cannot change the plan."""

from __future__ import annotations

from dataclasses import dataclass, field

from crimsonbench.spec.cpuset import format_cpuset


@dataclass(frozen=True, order=True)
class Cpu:
    """One logical CPU as lscpu reports it."""

    id: int
    node: int  # NUMA node; equals socket when the machine reports no NUMA
    socket: int
    core: int  # physical core id; hyper-thread siblings share (socket, core)
    online: bool = True

    @property
    def physical_core(self) -> tuple[int, int]:
        return (self.socket, self.core)


@dataclass(frozen=True)
class Topology:
    cpus: tuple[Cpu, ...]

    def online(self) -> tuple[Cpu, ...]:
        return tuple(c for c in self.cpus if c.online)

    def ids(self) -> frozenset[int]:
        return frozenset(c.id for c in self.online())

    def nodes(self) -> tuple[int, ...]:
        return tuple(sorted({c.node for c in self.online()}))

    def by_id(self) -> dict[int, Cpu]:
        return {c.id: c for c in self.cpus}

    def siblings(self, cpu_id: int) -> tuple[int, ...]:
        """All logical CPUs on the same physical core, including cpu_id itself."""
        me = self.by_id()[cpu_id]
        return tuple(sorted(c.id for c in self.cpus if c.physical_core == me.physical_core))


@dataclass(frozen=True)
class OsdCpus:
    """CPUs of one OSD. Crimson: one reactor per entry of `reactors`, in order.
    Classic: `reactors` is the process affinity (no reactors exist)."""

    osd_id: int
    reactors: tuple[int, ...]
    alien: tuple[int, ...] = ()  # crimson bluestore alien (blocking) threads

    @property
    def cpuset(self) -> str:
        return format_cpuset(self.reactors)

    @property
    def alien_cpuset(self) -> str:
        return format_cpuset(self.alien)

    @property
    def all_cpus(self) -> frozenset[int]:
        return frozenset(self.reactors) | frozenset(self.alien)


@dataclass(frozen=True)
class CpuPlan:
    policy: str
    hyper_threads: str
    osds: tuple[OsdCpus, ...]
    client: tuple[int, ...]  # CPUs reserved for fio, disjoint from every OSD's CPUs
    alien_threads: int = 0  # total alien threads per OSD (crimson bluestore), else 0

    @property
    def client_cpuset(self) -> str:
        return format_cpuset(self.client)

    def osd_cpus(self) -> frozenset[int]:
        out: set[int] = set()
        for osd in self.osds:
            out |= osd.all_cpus
        return frozenset(out)


@dataclass(frozen=True)
class FioJob:
    """One fio process: its job file text and the image it drives."""

    name: str  # unique within a step, used for the output file name
    image: str
    job_file: str


@dataclass(frozen=True)
class Step:
    """One point of the response curve: one iodepth of one workload (one repeat)."""

    index: int  # 0-based position in the run
    workload: str
    iodepth: int
    repeat: int  # 1-based
    jobs: tuple[FioJob, ...]

    @property
    def id(self) -> str:
        """Stable, sortable and filesystem-safe; result directories are keyed by it."""
        return f"{self.index:03d}-{self.workload}-qd{self.iodepth:03d}-r{self.repeat}"


@dataclass(frozen=True)
class CephSetup:
    """What must be true of the cluster before the first step."""

    # section ("global", "osd", "osd.3", "client") -> key -> value, for the mon database
    config: dict[str, dict[str, str]] = field(default_factory=dict)
    # ceph CLI argument lists to run once the mons are up (before OSDs boot for crimson)
    commands: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class RunPlan:
    """Everything an executor needs, decided before any I/O happens."""

    name: str
    cpu: CpuPlan
    ceph: CephSetup
    images: tuple[str, ...]
    prefill_jobs: tuple[FioJob, ...]
    steps: tuple[Step, ...]
