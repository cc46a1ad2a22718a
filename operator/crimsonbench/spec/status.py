"""status of a BenchmarkRun, written by the operator (and mirrored by local mode)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from crimsonbench.spec.base import SpecModel


class Phase(StrEnum):
    PENDING = "Pending"  # accepted, waiting (e.g. for another run on the same cluster)
    PREPARING = "Preparing"  # preflight, planning, patching the cluster, images, prefill
    RUNNING = "Running"  # sweeping
    RESTORING = "Restoring"  # putting the cluster back as it was found
    COMPLETED = "Completed"
    FAILED = "Failed"


class Condition(SpecModel):
    """The standard Kubernetes condition shape (metav1.Condition)."""

    type: str = Field(max_length=316)
    status: str = Field(pattern="^(True|False|Unknown)$")
    reason: str = Field(default="", max_length=1024)
    message: str = Field(default="", max_length=32768)
    last_transition_time: str = ""
    observed_generation: int | None = None


class StepSummary(SpecModel):
    id: str
    workload: str
    iodepth: int
    repeat: int = 1
    iops: float = 0.0
    bw_mib_s: float = 0.0
    clat_ms: float = 0.0
    clat_stdev_ms: float = 0.0
    clat_p99_ms: float = 0.0
    osd_cpu: float = 0.0
    fio_cpu: float = 0.0
    clients: int = Field(default=1, description="fio clients combined in this step.")
    start_skew_ms: float | None = Field(
        default=None, description="Latest minus earliest client start (fio's own logs)."
    )
    slowest_client: str = Field(default="", description="The client with the fewest IOPS.")
    stopped_early: str = Field(default="", description="Why the sweep stopped after this step.")


class StepSample(SpecModel):
    t: float
    osd_cpu: float
    osd_mem_mib: float
    fio_cpu: float


class WorkloadPeak(SpecModel):
    workload: str
    iodepth: int
    iops: float
    bw_mib_s: float
    clat_ms: float


class ResultsRef(SpecModel):
    kind: str = Field(default="ConfigMap")
    name: str
    path: str | None = Field(default=None, description="Results directory (local mode).")


class BenchmarkRunStatus(SpecModel):
    phase: Phase = Field(default=Phase.PENDING, strict=False)
    message: str = ""
    observed_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list, max_length=32)
    current_step: str = ""
    steps_done: int = 0
    steps_total: int = 0
    progress: str = Field(default="", description="steps done / total, for kubectl get.")
    steps: list[StepSummary] = Field(default_factory=list, max_length=4096)
    peaks: list[WorkloadPeak] = Field(default_factory=list, max_length=32)
    peak_iops: int = Field(default=0, description="Highest IOPS over all workloads.")
    results: ResultsRef | None = None
    started_at: str = ""
    finished_at: str = ""
    # The operator's bookkeeping: the state machine lives here, not in memory, so a
    # restarted operator resumes exactly where the last one stopped.
    stage: str = Field(default="", description="Reconcile stage (lease, topology, patch, ...).")
    failure: str = Field(default="", description="Why the run fails once the cluster is restored.")
    prefilled: bool = False
    images_created: bool = False
    osd_placement: dict[str, str] = Field(
        default_factory=dict,
        description="OSD id -> node, as found before the patch (OSDs never move).",
    )
    client_nodes: list[str] = Field(
        default_factory=list, description="The nodes fio runs on, in client order."
    )
    option_family: str = Field(
        default="", description="Crimson option names the cluster knows: legacy or current."
    )
    fio_servers: dict[str, str] = Field(
        default_factory=dict, description="fio client -> its fio server's address:port."
    )
    images_removed: bool = Field(default=False, description="External cluster: images removed.")
    patched_generation: int = Field(default=0, description="CephCluster generation we patched.")
    rollout_since: float = Field(default=0.0, description="When the rollout wait began (epoch s).")
    metrics_source: str = Field(default="", description="metrics.k8s.io, or none.")
    step_samples: list[StepSample] = Field(
        default_factory=list, max_length=720, description="Samples of the running step."
    )
