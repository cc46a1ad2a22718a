"""The values the planner produces. Frozen, so executors cannot change the plan."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from crimsonbench.spec.cpuset import format_cpuset
from crimsonbench.spec.models import SweepSpec


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


@dataclass(frozen=True, slots=True)  # slots: the largest plan holds 65,536 of them
class FioJob:
    """One fio job: the I/O of one process on one image, run by one fio client. Its
    section of the client's job file and its IOPS log (<name>_iops.N.log) carry its name."""

    image: str
    client: str  # the ClientPlan.name whose fio runs it
    process: int = 0  # of processesPerImage

    @property
    def name(self) -> str:
        """Unique within a step."""
        return f"{self.image}-p{self.process}"


def jobs_of(jobs: tuple[FioJob, ...], client: str) -> tuple[FioJob, ...]:
    return tuple(j for j in jobs if j.client == client)


@dataclass(frozen=True)
class FioPlan:
    """What every step's job files are made of (plan/fio_jobs.py renders one client's file
    of one step when the step starts). The jobs are the same in every step: one per image
    and process, on the client that owns the image."""

    jobs: tuple[FioJob, ...]
    step_options: Mapping[str, str | int]  # [global] of every step, less the per-step ones
    workloads: Mapping[str, Mapping[str, str | int]]  # workload key -> rw, bs, its options
    prefill_options: Mapping[str, str | int]

    def jobs_of(self, client: str) -> tuple[FioJob, ...]:
        return jobs_of(self.jobs, client)


def step_key(workload: str, iodepth: int, repeat: int) -> str:
    """What a step measures, as a name: its results are kept under it (a results
    directory's steps/<key>, the operator's ConfigMaps), so a finished step is found again
    by what it measured, wherever it stands in a later spec's sweep (plan.meaning says
    which of the spec's other fields a stored step was measured under)."""
    return f"{workload}-qd{iodepth:03d}-r{repeat}"


@dataclass(frozen=True, slots=True)  # slots: the largest plan holds 40,960 of them
class Step:
    """One point of the response curve: one iodepth of one workload (one repeat)."""

    index: int  # 0-based position in the run (the order steps run in, not their key)
    workload: str
    iodepth: int
    repeat: int  # 1-based

    @property
    def id(self) -> str:
        """The step's key (step_key): filesystem-safe, and the same for the same
        measurement whatever the iodepths or workloads around it."""
        return step_key(self.workload, self.iodepth, self.repeat)


@dataclass(frozen=True)
class CephSetup:
    """What must be true of the cluster before the first step."""

    # section ("global", "osd", "osd.3", "client") -> key -> value, for the mon database
    config: dict[str, dict[str, str]] = field(default_factory=dict)
    # ceph CLI argument lists to run once the mons are up (before OSDs boot for crimson)
    commands: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class HostPlan:
    """One machine running planned OSDs (and maybe fio clients): its CPU plan, with the
    OSDs' real ids. node is None for this machine (local mode)."""

    node: str | None
    cpu: CpuPlan

    @property
    def osd_ids(self) -> tuple[int, ...]:
        return tuple(o.osd_id for o in self.cpu.osds)


@dataclass(frozen=True)
class ClientPlan:
    """One fio client: a fio server pinned to `cpus` on `node`, driving `images`."""

    name: str  # "client-0" (local) or the node's name (Kubernetes)
    node: str | None
    cpus: tuple[int, ...]
    images: tuple[str, ...]

    @property
    def cpuset(self) -> str:
        return format_cpuset(self.cpus)


@dataclass(frozen=True)
class StepTiming:
    """How long a step's fio runs, and when an executor gives up on it."""

    runtime_s: int
    ramp_s: int
    grace_s: int  # beyond runtime + ramp: connecting, setting up, writing the output
    # steps with several fio processes: this many jobs meet at a rendezvous before they
    # start (plan/fio_jobs.py start_barrier), none waiting longer than the cap; 0: one fio
    barrier_jobs: int = 0
    start_barrier_cap_s: float = 0.0
    setup_s: float = 0.0  # fio's expected setup of the largest client (connect + open)

    @property
    def fio_s(self) -> float:
        """From the launch to fio's expected end: setup, ramp, runtime."""
        return self.setup_s + self.runtime_s + self.ramp_s

    @property
    def deadline_s(self) -> int:
        """The longest a step may take: the barrier's cap (a client that never came),
        ramp, runtime and the grace."""
        return math.ceil(self.start_barrier_cap_s) + self.runtime_s + self.ramp_s + self.grace_s


@dataclass(frozen=True)
class BarrierAddress:
    """Where the jobs of a step meet before they start (manifests/start_barrier.py): an
    IP address and port the fio clients reach, and the step's token (hex: it travels in
    a job file and a shell command)."""

    host: str
    port: int
    token: str

    def __post_init__(self) -> None:
        ipaddress.ip_address(self.host)  # ValueError: not an address (no names, no text)
        if not (0 < self.port < 65536) or not self.token.isalnum() or not self.token.isascii():
            raise ValueError(f"not a rendezvous: port {self.port}, token {self.token!r}")


@dataclass(frozen=True)
class PoolPlan:
    """The benchmark pool and its images, and the cephx user fio runs as."""

    name: str
    pg_num: int
    user: str
    images: tuple[str, ...]
    image_size_bytes: int
    keep_images: bool


@dataclass(frozen=True)
class PrefillPlan:
    """Writing every image once before the first step (jobs empty: no prefill)."""

    jobs: tuple[FioJob, ...]
    deadline_s: int  # every image written at the slowest acceptable rate, plus grace
    block_size_bytes: int

    def jobs_of(self, client: str) -> tuple[FioJob, ...]:
        return jobs_of(self.jobs, client)


@dataclass(frozen=True)
class OsdResources:
    """Requests == limits of each OSD pod (Guaranteed, whole CPUs), for Rook."""

    cpu: int
    memory: str  # a Kubernetes quantity, e.g. "12Gi"


@dataclass(frozen=True)
class RunPlan:
    """Everything an executor needs, decided before any I/O happens. Executors read this,
    never the spec (the spec's rules for the sweep travel here as `sweep`)."""

    name: str
    flavor: str  # crimson or classic: what runs on the planned OSDs
    hosts: tuple[HostPlan, ...]
    clients: tuple[ClientPlan, ...]
    ceph: CephSetup
    pool: PoolPlan
    prefill: PrefillPlan
    steps: tuple[Step, ...]
    fio: FioPlan
    timing: StepTiming
    sweep: SweepSpec  # early exit, latency target, repeats: applied while the run goes
    sample_interval_s: float
    osd_resources: OsdResources
    client_options: dict[str, str]  # librbd settings of every fio client ([client] section)
    fio_numjobs: int  # jobs fio reports per job file (numjobs): a step's expected job count
    bandwidth_workloads: frozenset[str]  # read as MiB/s (sequential), the others as IOPS

    @property
    def images(self) -> tuple[str, ...]:
        return self.pool.images

    @property
    def osds(self) -> tuple[OsdCpus, ...]:
        return tuple(o for h in self.hosts for o in h.cpu.osds)

    @property
    def local_host(self) -> HostPlan:
        """The one host of a local run (this machine)."""
        if len(self.hosts) != 1 or self.hosts[0].node is not None:
            raise ValueError("a local run plans exactly one host: this machine")
        return self.hosts[0]

    def client(self, name: str) -> ClientPlan:
        return next(c for c in self.clients if c.name == name)
