"""status of a BenchmarkRun, written by the operator (and mirrored by local mode): the
one place that says everything the operator remembers of a run.

What it shows (phase, progress, steps, peaks, conditions, where the run runs) is at the
top; what it only remembers to carry on after a restart is in `record` (RunBookkeeping:
retries, OSD incarnations, when each bounded wait began, how far the restore got). The
operator loads the whole status once per tick as these models and writes back what
changed (controller/record.py).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, Field

from crimsonbench.spec.base import SpecModel

# Every field is bounded (maxLength, maxItems, maxProperties in the CRD, cut to fit when
# the operator writes it): a run's object must stay far below etcd's 1.5 MiB however long
# it runs, or every later status patch is refused and the run can never end. Texts made
# from what the operator saw (errors, logs) are cut; lists that grow with time keep their
# newest entries; what the spec bounds (nodes, OSDs) gets the spec's own bounds.
CUT = "..."


def _cut(limit: int) -> Callable[[Any], Any]:
    def cut(value: Any) -> Any:
        if isinstance(value, str) and len(value) > limit:
            return value[: limit - len(CUT)] + CUT
        return value

    return cut


def _newest(limit: int) -> Callable[[Any], Any]:
    def newest(value: Any) -> Any:
        if isinstance(value, list) and len(value) > limit:
            return value[-limit:]
        if isinstance(value, dict) and len(value) > limit:
            return dict(list(value.items())[-limit:])
        return value

    return newest


MESSAGE_CHARS = 8192  # a status message, a condition's message, a failure
ERROR_CHARS = 2000  # an error as the record keeps it
# steps whose dropped attempts the record keeps (the newest; the running step's decide)
RETRIED_STEPS = 32
# reasons kept per step: MAX_STEP_RETRIES + 1 for OSD restarts, and sweep.rerunSuspect's
# 5 suspect attempts (step_decide counts them here: none may be forgotten)
RETRY_REASONS = 8
MAX_NODES = 1024  # spec.client.nodes, spec.target.rook.osdNodes
MAX_OSDS = 4096  # spec.target.rook.osdIds
PLANNED_SPEC_CHARS = 1 << 20  # never cut (it is JSON): the spec's own bounds keep it below

STATUS_STEP_SUMMARIES = 256  # steps summarized in .status (results/status_summary writes 200)

# Strings cut to their maxLength
Short = Annotated[str, Field(max_length=64), BeforeValidator(_cut(64))]
Name = Annotated[str, Field(max_length=253), BeforeValidator(_cut(253))]
Reason = Annotated[str, Field(max_length=1024), BeforeValidator(_cut(1024))]
ErrorText = Annotated[str, Field(max_length=ERROR_CHARS), BeforeValidator(_cut(ERROR_CHARS))]
Message = Annotated[str, Field(max_length=MESSAGE_CHARS), BeforeValidator(_cut(MESSAGE_CHARS))]
# What the undo record keeps is never cut (the restore puts it back): bounded far beyond any
# value a run or a CephCluster holds; one over it fails the run (stuck.py), never its status.
Kept64 = Annotated[str, Field(max_length=64)]
Kept253 = Annotated[str, Field(max_length=253)]
Kept4096 = Annotated[str, Field(max_length=4096)]
KeptJson = Annotated[str, Field(max_length=65536)]
# What a restore leaves to do by hand: every command of it, so cut only far beyond them
Commands = Annotated[str, Field(max_length=65536), BeforeValidator(_cut(65536))]


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
    reason: Reason = ""
    message: Message = ""
    last_transition_time: Short = ""
    observed_generation: int | None = None


class StepSummary(StatusModel):
    id: Reason
    workload: Name
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
    slowest_client: Name = Field(default="", description="The client with the fewest IOPS.")
    stopped_early: Reason = Field(default="", description="Why the sweep stopped after this step.")
    verdict: Short = Field(default="", description="valid or suspect (README: validity).")
    suspect_reasons: Reason = Field(default="", description="Why suspect: reason codes.")


StepSummaries = Annotated[
    list[StepSummary],
    Field(max_length=STATUS_STEP_SUMMARIES),
    BeforeValidator(_newest(STATUS_STEP_SUMMARIES)),
]


class StepSample(StatusModel):
    """One sample while fio runs, in both executors (local: results/<step>/samples.json;
    Kubernetes: status.stepSamples of the running step). CPU as % of one core, memory as
    RSS in MiB."""

    t: float
    """When: epoch seconds (Kubernetes), seconds since the step started (local)."""
    osd_cpu: float
    """Summed over the planned OSDs' processes."""
    osd_mem_mib: float
    fio_cpu: float
    """Summed over every fio process."""
    reactor_util: float | None = None
    """Crimson: Seastar's reactor_utilization %, mean over every reactor."""
    reactor_util_max: float | None = None
    """Crimson: the busiest reactor's."""
    reactor_util_osd: dict[Name, float] | None = Field(default=None, max_length=MAX_OSDS)
    """Crimson: osd.N -> the mean over its reactors."""


class WorkloadPeak(StatusModel):
    workload: Name
    iodepth: int
    iops: float
    bw_mib_s: float
    clat_ms: float


class ResultsRef(StatusModel):
    kind: Short = Field(default="ConfigMap")
    name: Name
    path: Annotated[str, Field(max_length=4096)] | None = Field(
        default=None, description="Results directory (local mode)."
    )
    selector: Reason = Field(
        default="", description="Label selector of every ConfigMap holding the run's results."
    )


class OsdsRestarted(StatusModel):
    """Crimson: the planned OSDs restarted after `config rm`."""

    since: float
    """When their pods were deleted (epoch s)."""
    uids: list[Name] = Field(default_factory=list, max_length=MAX_OSDS)
    """The pods deleted."""


# A restarted operator goes on where the restore stopped, and never runs its cleanup Job
# twice: controller/decisions/restore_steps.py decides from these.
class RestoreMarks(StatusModel):
    """How far the restore got."""

    started: float | None = None
    """The restoring patch (epoch s)."""
    config_cleaned: Commands | None = None
    """The `config rm` Job's outcome: "done" or "failed: <the commands to run by hand>"."""
    osds_restarted: OsdsRestarted | None = None
    over: Commands | None = None
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
    client: float | None = None
    """For Rook to make the run's CephClient (its cephx user and key)."""


class SpecChange(StatusModel):
    """One value the run's patch put into the CephCluster's spec."""

    path: list[Kept253] = Field(max_length=8)
    """Where in spec, e.g. [cephConfig, osd.0, crimson_seastar_cpu_cores]."""
    before: KeptJson | None = None
    """The value found there (JSON text); unset: the path did not exist."""
    after: KeptJson
    """The value the run set (JSON text): put back only while the cluster still has it."""


class MonChange(StatusModel):
    """One option the run's cephConfig makes Rook set in the mon database."""

    who: Kept253
    key: Kept253
    value: Kept4096
    """The run's value."""
    before: Kept4096 | None = None
    """The mon database's value before the run (`ceph config dump`); unset: none."""


class UndoRecord(StatusModel):
    """Everything cleanup and the restore act on, recorded before the run changes anything
    and read instead of the spec (which may be edited, or stop validating, mid-run)."""

    target: Kept64 = ""
    """rook or external ("": the run never got as far as recording)."""
    where: Kept4096 = ""
    """The target as messages name it."""
    rook_namespace: Kept253 = ""
    cluster_name: Kept253 = ""
    cluster_uid: Kept253 = ""
    """The CephCluster's metadata.uid: one recreated under the same name is not ours."""
    fsid: Kept253 = ""
    """The Ceph cluster's fsid."""
    mon_host: Kept4096 = ""
    """External targets: the monitors, as the spec named them when the run began."""
    keyring_secret: list[Kept253] = Field(default_factory=list, max_length=2)
    """External targets: the keyring Secret [name, key] in jobs_namespace."""
    ceph_user: Kept253 = ""
    """External targets: the cephx user of that keyring."""
    lease: list[Kept253] = Field(default_factory=list, max_length=2)
    """The Lease held for the cluster: [namespace, name]."""
    jobs_namespace: Kept253 = ""
    pool: Kept253 = ""
    """The Ceph pool of the run's images."""
    pool_object: Kept253 = ""
    """The CephBlockPool the run created (Rook; "": none)."""
    client_object: Kept253 = ""
    """The CephClient the run created (Rook; "": none)."""
    user: Kept253 = ""
    """The cephx user the images were made and removed as."""
    images: list[Kept253] = Field(default_factory=list, max_length=1024)
    """The RBD images the run creates (each tagged with the run's uid)."""
    keep_images: bool = False
    crimson_osds: list[int] = Field(default_factory=list, max_length=4096)
    """Crimson OSDs to restart after the restore (their layout is read at start only)."""
    spec_changes: list[SpecChange] = Field(default_factory=list, max_length=8192)
    spec_digest: Kept64 = ""
    """sha256 of spec_changes, also put on the CephCluster by the patch itself."""
    recorded_generation: int = 0
    """The CephCluster's generation spec_changes were read from: patched only while it
    still has that generation (else recorded again)."""
    mon_changes: list[MonChange] = Field(default_factory=list, max_length=8192)


class ErrorMark(StatusModel):
    """An unexpected error every tick of the run has hit since `since` (an API refusal, a
    quota, a missing CephCluster...): past errorTimeoutSeconds the run fails, and is
    restored first if it changed the cluster. Cleared by the first tick without one."""

    since: float
    """When it first appeared (epoch s)."""
    stage: Short = ""
    """The stage that hit it."""
    text: ErrorText = ""
    """The latest error."""
    ticks: int = 1
    """Ticks in a row that hit an error."""


RetryReasons = Annotated[
    list[Reason], Field(max_length=RETRY_REASONS), BeforeValidator(_newest(RETRY_REASONS))
]
StepRetries = Annotated[
    dict[str, RetryReasons],
    Field(max_length=RETRIED_STEPS),
    BeforeValidator(_newest(RETRIED_STEPS)),
]


class RunBookkeeping(StatusModel):
    """What the operator remembers of a run only to carry on after a restart."""

    step_retries: StepRetries = Field(default_factory=dict)
    """Step -> why each of its attempts was dropped (the newest steps)."""
    osd_incarnations: dict[str, Name] | None = Field(default=None, max_length=MAX_OSDS)
    """Crimson: each planned OSD's pod uid/restarts when the run patched it."""
    waits: Waits = Field(default_factory=Waits)
    restore: RestoreMarks = Field(default_factory=RestoreMarks)
    images_removed: Short = ""
    """The run's RBD images removed: "done", or "failed" (left to remove by hand)."""
    planned_spec: str = Field(default="", max_length=PLANNED_SPEC_CHARS)
    """The spec as planned (JSON): one changing what its steps measure later stops the run."""
    undo: UndoRecord = Field(default_factory=UndoRecord)
    """What the run changed and created: cleanup and the restore read only this."""
    error: ErrorMark | None = None
    """The unexpected error the run's ticks keep hitting, if any."""
    restoring_since: float | None = None
    """When the restore began (epoch s): it ends, done or not, restoreTimeoutSeconds later."""


class BenchmarkRunStatus(StatusModel):
    phase: Phase = Field(default=Phase.PENDING, strict=False)
    message: Message = ""
    observed_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list, max_length=32)
    current_step: Reason = ""
    steps_done: int = 0
    steps_total: int = 0
    progress: Short = Field(default="", description="steps done / total, for kubectl get.")
    steps: StepSummaries = Field(default_factory=list)
    peaks: list[WorkloadPeak] = Field(default_factory=list, max_length=32)
    peak_iops: int = Field(default=0, description="Highest IOPS over all workloads.")
    suspect_steps: int = Field(default=0, description="Steps whose figure is suspect.")
    results: ResultsRef | None = None
    started_at: Short = ""
    finished_at: Short = ""
    # The operator's state machine lives here, not in memory, so a restarted operator
    # resumes exactly where the last one stopped.
    stage: Short = Field(default="", description="Reconcile stage (lease, topology, patch, ...).")
    failure: Message = Field(
        default="", description="Why the run fails once the cluster is restored."
    )
    prefilled: bool = False
    images_created: bool = False
    osd_placement: dict[str, Name] = Field(
        default_factory=dict,
        max_length=MAX_OSDS,
        description="OSD id -> node, as found before the patch (OSDs never move).",
    )
    client_nodes: list[Name] = Field(
        default_factory=list, max_length=MAX_NODES,
        description="The nodes fio runs on, in client order.",
    )  # fmt: skip
    option_family: Short = Field(
        default="", description="Crimson option names the cluster knows: legacy or current."
    )
    fio_servers: dict[str, Name] = Field(
        default_factory=dict, max_length=MAX_NODES,
        description="fio client -> its fio server's address:port.",
    )  # fmt: skip
    patched_generation: int = Field(default=0, description="CephCluster generation we patched.")
    metrics_source: Name = Field(default="", description="metrics.k8s.io, or none.")
    step_samples: list[StepSample] = Field(
        default_factory=list, max_length=720, description="Samples of the running step."
    )
    record: RunBookkeeping | None = Field(
        default=None, description="What the operator remembers to carry on after a restart."
    )
