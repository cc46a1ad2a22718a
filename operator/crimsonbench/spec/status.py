"""status of a BenchmarkRun, written by the operator (and mirrored by local mode): the
one place that says everything the operator remembers of a run.

What it shows (phase, progress, steps, peaks, conditions, where the run runs) is at the
top; what it only remembers to carry on after a restart is in `record` (RunBookkeeping:
retries, OSD incarnations, when each bounded wait began, how far the restore got). The
operator loads the whole status once per tick as these models and writes back what
changed (controller/record.py).
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
    target: float | None = None
    """For the target CephCluster to exist."""


class SpecChange(StatusModel):
    """One value the run's patch put into the CephCluster's spec."""

    path: list[str] = Field(max_length=8)
    """Where in spec, e.g. [cephConfig, osd.0, crimson_seastar_cpu_cores]."""
    before: str | None = None
    """The value found there (JSON text); unset: the path did not exist."""
    after: str
    """The value the run set (JSON text): put back only while the cluster still has it."""


class MonChange(StatusModel):
    """One option the run's cephConfig makes Rook set in the mon database."""

    who: str
    key: str
    value: str
    """The run's value."""
    before: str | None = None
    """The mon database's value before the run (`ceph config dump`); unset: none."""


class UndoRecord(StatusModel):
    """Everything cleanup and the restore act on, recorded before the run changes anything
    and read instead of the spec (which may be edited, or stop validating, mid-run)."""

    target: str = ""
    """rook or external ("": the run never got as far as recording)."""
    where: str = ""
    """The target as messages name it."""
    rook_namespace: str = ""
    cluster_name: str = ""
    cluster_uid: str = ""
    """The CephCluster's metadata.uid: one recreated under the same name is not ours."""
    fsid: str = ""
    """The Ceph cluster's fsid."""
    mon_host: str = ""
    """External targets: the monitors, as the spec named them when the run began."""
    keyring_secret: list[str] = Field(default_factory=list, max_length=2)
    """External targets: the keyring Secret [name, key] in jobs_namespace."""
    ceph_user: str = ""
    """External targets: the cephx user of that keyring."""
    lease: list[str] = Field(default_factory=list, max_length=2)
    """The Lease held for the cluster: [namespace, name]."""
    jobs_namespace: str = ""
    pool: str = ""
    """The Ceph pool of the run's images."""
    pool_object: str = ""
    """The CephBlockPool the run created (Rook; "": none)."""
    client_object: str = ""
    """The CephClient the run created (Rook; "": none)."""
    user: str = ""
    """The cephx user the images were made and removed as."""
    images: list[str] = Field(default_factory=list, max_length=1024)
    """The RBD images the run creates (each tagged with the run's uid)."""
    keep_images: bool = False
    crimson_osds: list[int] = Field(default_factory=list, max_length=4096)
    """Crimson OSDs to restart after the restore (their layout is read at start only)."""
    spec_changes: list[SpecChange] = Field(default_factory=list, max_length=8192)
    spec_digest: str = ""
    """sha256 of spec_changes, also put on the CephCluster by the patch itself."""
    recorded_generation: int = 0
    """The CephCluster's generation spec_changes were read from: patched only while it
    still has that generation (else recorded again)."""
    mon_changes: list[MonChange] = Field(default_factory=list, max_length=8192)


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
    undo: UndoRecord = Field(default_factory=UndoRecord)
    """What the run changed and created: cleanup and the restore read only this."""


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
