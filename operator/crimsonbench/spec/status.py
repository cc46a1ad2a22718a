"""status of a BenchmarkRun, written by the operator (and mirrored by local mode): the
one place that says everything the operator remembers of a run.

What it shows (phase, progress, steps, peaks, conditions, where the run runs) is at the
top; what it only remembers to carry on after a restart is in `record` (RunBookkeeping:
retries, OSD incarnations, when each bounded wait began, how far the restore got). The
operator loads the whole status once per tick as these models and writes back what
changed (controller/record.py). Fields marked "before the record" are read once from a
run an older operator started, then removed.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import ConfigDict, Field

from crimsonbench.spec.base import SpecModel


# The operator changes a status field by field while a tick runs (each assignment
# checked), and reads what the API server returns (a whole number for a float, keys of
# other versions: ignored).
class StatusModel(SpecModel):
    """A part of a BenchmarkRun's status."""

    # a field's docstring is its description in the CRD
    model_config = ConfigDict(frozen=False, validate_assignment=True, extra="ignore",
                              strict=False, use_attribute_docstrings=True)  # fmt: skip


class Phase(StrEnum):
    PENDING = "Pending"  # accepted, waiting (e.g. for another run on the same cluster)
    PREPARING = "Preparing"  # preflight, planning, patching the cluster, images, prefill
    RUNNING = "Running"  # sweeping
    RESTORING = "Restoring"  # putting the cluster back as it was found
    COMPLETED = "Completed"
    FAILED = "Failed"


class Condition(StatusModel):
    """The standard Kubernetes condition shape (metav1.Condition)."""

    type: str = Field(max_length=316)
    status: str = Field(pattern="^(True|False|Unknown)$")
    reason: str = Field(default="", max_length=1024)
    message: str = Field(default="", max_length=32768)
    last_transition_time: str = ""
    observed_generation: int | None = None


class StepSummary(StatusModel):
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


class StepSample(StatusModel):
    t: float
    osd_cpu: float
    osd_mem_mib: float
    fio_cpu: float


class WorkloadPeak(StatusModel):
    workload: str
    iodepth: int
    iops: float
    bw_mib_s: float
    clat_ms: float


class ResultsRef(StatusModel):
    kind: str = Field(default="ConfigMap")
    name: str
    path: str | None = Field(default=None, description="Results directory (local mode).")


class OsdsRestarted(StatusModel):
    """Crimson: the planned OSDs restarted after `config rm`."""

    since: float
    """When their pods were deleted (epoch s)."""
    uids: list[str] = Field(default_factory=list)
    """The pods deleted."""


# A restarted operator goes on where the restore stopped, and never runs its cleanup Job
# twice: controller/restore_steps.py decides from these.
class RestoreMarks(StatusModel):
    """How far the restore got."""

    started: float | None = None
    """The restoring patch (epoch s)."""
    config_cleaned: str | None = None
    """The `config rm` Job's outcome: "done" or "failed: <the commands to run by hand>"."""
    osds_restarted: OsdsRestarted | None = None
    over: str | None = None
    """The restore is over (configCleaned's value then)."""


class Waits(StatusModel):
    """When each bounded wait began (epoch s): a wait gives up rolloutTimeoutSeconds later."""

    rollout: float | None = None
    """For Rook to roll the OSDs out."""
    pool: float | None = None
    """For Rook to create the run's pool."""
    removal: float | None = None
    """For Rook to remove the run's pool and cephx user."""


class RunBookkeeping(StatusModel):
    """What the operator remembers of a run only to carry on after a restart."""

    step_retries: dict[str, list[str]] = Field(default_factory=dict)
    """Step -> why each of its attempts was dropped."""
    osd_incarnations: dict[str, str] | None = None
    """Crimson: each planned OSD's pod uid/restarts when the run patched it."""
    waits: Waits = Field(default_factory=Waits)
    restore: RestoreMarks = Field(default_factory=RestoreMarks)
    images_removed: str = ""
    """The run's RBD images removed: "done", or "failed" (left to remove by hand)."""
    planned_spec: str = ""
    """The spec as planned (JSON): one changing what its steps measure later stops the run."""
    step_keys: str = Field(default="content", pattern="^(content|position)$")
    """How the fio driver keys steps: position for a run an older operator started."""


class BenchmarkRunStatus(StatusModel):
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
    # The operator's state machine lives here, not in memory, so a restarted operator
    # resumes exactly where the last one stopped.
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
    patched_generation: int = Field(default=0, description="CephCluster generation we patched.")
    metrics_source: str = Field(default="", description="metrics.k8s.io, or none.")
    step_samples: list[StepSample] = Field(
        default_factory=list, max_length=720, description="Samples of the running step."
    )
    record: RunBookkeeping | None = Field(
        default=None, description="What the operator remembers to carry on after a restart."
    )
    # before the record (read once from a run an older operator started, then removed)
    images_removed: bool | None = Field(default=None, description="Before the record.")
    rollout_since: float | None = Field(default=None, description="Before the record.")
