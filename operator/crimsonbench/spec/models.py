"""The BenchmarkRun spec as pydantic models: parsed once, at the edge, into frozen values.

Field names are snake_case in Python and camelCase in YAML (the Kubernetes convention).
The CRD in crds/ is generated from these models (see crimsonbench.spec.crd); a test fails
if the checked-in YAML drifts from them.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from crimsonbench.errors import InvalidSpec
from crimsonbench.spec.api import API_VERSION, KIND
from crimsonbench.spec.cpuset import CPUSET_PATTERN, format_cpuset, parse_cpuset
from crimsonbench.spec.rules import Rule, cel_rules, violations

DEFAULT_IODEPTHS = (1, 2, 4, 8, 16, 24, 32, 40, 52, 64)
RECORDED_PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)  # what every step records

# fio options a custom workload may set. Everything else (engine, pool, image, cpus_allowed,
# iodepth, runtime, output) is owned by the planner so results stay comparable.
FIO_OPTION_ALLOWLIST = (
    "rwmixread",
    "rwmixwrite",
    "rate_iops",
    "rate",
    "norandommap",
    "randrepeat",
    "random_distribution",
    "zero_buffers",
    "refill_buffers",
    "buffer_compress_percentage",
    "buffer_compress_chunk",
    "dedupe_percentage",
    "bssplit",
    "offset",
    "size",
    "io_size",
    "percentile_list",
    "thinktime",
    "thinktime_blocks",
    "busy_poll",
    "rbd_background_processing",
)

SIZE_PATTERN = r"^[1-9][0-9]*(Mi|Gi|Ti)$"
BLOCK_SIZE_PATTERN = r"^[1-9][0-9]*[kKmM]?$"
_SIZE_UNITS = {"Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def _parsable_cpuset(value: str) -> str:
    parse_cpuset(value)  # ValueError: backwards range, id above the kernel's limit
    return value


CpuSetStr = Annotated[
    str, Field(pattern=CPUSET_PATTERN, max_length=4096), AfterValidator(_parsable_cpuset)
]
SizeStr = Annotated[str, Field(pattern=SIZE_PATTERN)]
BlockSizeStr = Annotated[str, Field(pattern=BLOCK_SIZE_PATTERN)]


def size_bytes(size: str) -> int:
    """Bytes of a validated size field (imageSize, bluestoreSize): "2Gi" -> 2147483648."""
    return int(size[:-2]) * _SIZE_UNITS[size[-2:]]


def block_size_bytes(bs: str) -> int:
    """Bytes of a validated block size, read as fio reads it: "64k" -> 65536."""
    unit = bs[-1].lower()
    scale = {"k": 2**10, "m": 2**20}.get(unit)
    return int(bs[:-1]) * scale if scale else int(bs)


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_enum_values=False,
    )


def _enforce(rules: tuple[Rule, ...], obj: Any) -> Any:
    broken = violations(rules, obj)
    if broken:
        raise _rule_error(*[(r.field, r.message) for r in broken])
    return obj


def _rule_error(*problems: tuple[str, str]) -> PydanticCustomError:
    # ctx carries every (field inside the model, message) so validate_spec names them all.
    field, message = problems[0]
    return PydanticCustomError("spec_rule", message, {"field": field, "problems": problems})


class Flavor(StrEnum):
    CRIMSON = "crimson"
    CLASSIC = "classic"


class ObjectStore(StrEnum):
    CYANSTORE = "cyanstore"
    SEASTORE = "seastore"
    BLUESTORE = "bluestore"
    MEMSTORE = "memstore"


class CpuPolicy(StrEnum):
    DEFAULT = "default"  # contiguous CPUs per OSD
    OSD = "osd"  # every reactor of an OSD on one NUMA node; OSDs alternate nodes
    SOCKET = "socket"  # each OSD's reactors spread evenly over NUMA nodes


class HyperThreads(StrEnum):
    PHYSICAL = "physical"  # one reactor per physical core; its sibling stays idle
    DUAL = "dual"  # both hyper-thread siblings host a reactor ("dual reactor")


class OptionNaming(StrEnum):
    AUTO = "auto"  # from the Ceph version
    LEGACY = "legacy"  # crimson_seastar_cpu_cores / crimson_alien_* (squid, tentacle)
    CURRENT = "current"  # crimson_cpu_set / crimson_bluestore_* (Ceph 21 and newer)


# ---------------------------------------------------------------- target


class SecretKeyRef(_Model):
    name: str = Field(min_length=1, description="Secret in the BenchmarkRun's namespace.")
    key: str = Field(default="keyring", min_length=1, description="Key holding the keyring.")


class LocalTarget(_Model):
    """A throwaway single-node cluster started from the installed Ceph packages."""

    work_dir: str | None = Field(
        default=None, description="Cluster and results directory; default: a fresh one."
    )
    bluestore_backing: Literal["file", "loop"] = Field(
        default="file",
        description="Classic bluestore on a plain file or on a loop device.",
    )
    bluestore_size: SizeStr = Field(default="8Gi", description="Block size per bluestore OSD.")
    force_ssd: bool = Field(
        default=True, description="Apply SSD tunables even if the disk reports rotational."
    )
    crimson_binary: str | None = Field(
        default=None, description="Path of crimson-osd; default: search PATH."
    )
    keep_cluster: bool = Field(default=False, description="Leave the cluster running afterwards.")


NodeName = Annotated[str, Field(min_length=1, max_length=253)]


class RookTarget(_Model):
    cluster_name: str = Field(min_length=1, description="Name of the Rook CephCluster.")
    namespace: str = Field(default="rook-ceph", min_length=1)
    osd_nodes: list[NodeName] = Field(
        default_factory=list,
        max_length=1024,
        json_schema_extra={"x-kubernetes-list-type": "set"},
        description="Nodes whose OSDs are planned and pinned, each from its own CPU "
        "topology; default: every node running an OSD of the cluster. OSDs never move.",
    )
    osd_ids: list[Annotated[int, Field(ge=0, le=1_000_000)]] = Field(
        default_factory=list,
        max_length=4096,
        json_schema_extra={"x-kubernetes-list-type": "set"},
        description="Only these OSDs are planned and pinned; default: every OSD on osdNodes.",
    )
    allow_reprovision: bool = Field(
        default=False,
        description="Allow purging and re-creating crimson OSDs when the reactor layout changes.",
    )


EXTERNAL_RULES = (
    Rule(
        cel="has(self.keyringSecret) || has(self.keyringFile)",
        message="set keyringSecret (operator) or keyringFile (local CLI) to reach the cluster",
        field="keyringSecret",
        check=lambda s: s.keyring_secret is not None or s.keyring_file is not None,
    ),
)


class ExternalTarget(_Model):
    """An existing cluster (cephadm, Proxmox, ...) reached through its monitors."""

    model_config = ConfigDict(json_schema_extra=cel_rules(EXTERNAL_RULES))

    mon_host: str = Field(min_length=1, description="mon_host as in ceph.conf.")
    user: str = Field(default="admin", min_length=1, description="cephx user without 'client.'.")
    keyring_secret: SecretKeyRef | None = Field(default=None, description="For the operator.")
    keyring_file: str | None = Field(default=None, description="For the local CLI.")

    @model_validator(mode="after")
    def _one_keyring(self) -> ExternalTarget:
        return _enforce(EXTERNAL_RULES, self)


TARGET_RULES = (
    Rule(
        cel="[has(self.local), has(self.rook), has(self.external)].filter(x, x).size() == 1",
        message="set exactly one of local, rook or external",
        field="",
        check=lambda t: sum(x is not None for x in (t.local, t.rook, t.external)) == 1,
    ),
)


class TargetSpec(_Model):
    model_config = ConfigDict(json_schema_extra=cel_rules(TARGET_RULES))
    local: LocalTarget | None = None
    rook: RookTarget | None = None
    external: ExternalTarget | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> TargetSpec:
        return _enforce(TARGET_RULES, self)

    @property
    def kind(self) -> str:
        return "local" if self.local else "rook" if self.rook else "external"


# ---------------------------------------------------------------- OSDs

_CRIMSON_STORES = ("cyanstore", "seastore", "bluestore")
_CLASSIC_STORES = ("bluestore", "memstore")

OSD_RULES = (
    Rule(
        cel="self.flavor != 'classic' || self.objectStore in ['bluestore', 'memstore']",
        message="classic OSDs support objectStore bluestore or memstore; "
        "cyanstore and seastore need flavor crimson",
        field="objectStore",
        check=lambda o: o.flavor != Flavor.CLASSIC or o.object_store.value in _CLASSIC_STORES,
    ),
    Rule(
        cel="self.flavor != 'crimson' "
        "|| self.objectStore in ['cyanstore', 'seastore', 'bluestore']",
        message="crimson OSDs support objectStore cyanstore, seastore or bluestore; "
        "memstore needs flavor classic",
        field="objectStore",
        check=lambda o: o.flavor != Flavor.CRIMSON or o.object_store.value in _CRIMSON_STORES,
    ),
    Rule(
        cel="self.flavor != 'classic' || !has(self.reactors)",
        message="reactors applies to crimson OSDs only; for classic OSDs set cpusPerOsd",
        field="reactors",
        check=lambda o: o.flavor != Flavor.CLASSIC or o.reactors is None,
    ),
    Rule(
        cel="self.flavor != 'crimson' || !has(self.cpusPerOsd)",
        message="cpusPerOsd applies to classic OSDs only; for crimson OSDs set reactors",
        field="cpusPerOsd",
        check=lambda o: o.flavor != Flavor.CRIMSON or o.cpus_per_osd is None,
    ),
    Rule(
        cel="(self.flavor == 'crimson' && self.objectStore == 'bluestore') "
        "|| (!has(self.alienThreads) && !has(self.alienCpuSet))",
        message="alienThreads and alienCpuSet apply to crimson with objectStore bluestore only",
        field="alienThreads",
        check=lambda o: (
            (o.flavor == Flavor.CRIMSON and o.object_store == ObjectStore.BLUESTORE)
            or (o.alien_threads is None and o.alien_cpu_set is None)
        ),
    ),
)


class OsdSpec(_Model):
    model_config = ConfigDict(json_schema_extra=cel_rules(OSD_RULES))

    flavor: Flavor = Field(default=Flavor.CRIMSON, description="crimson or classic ceph-osd.")
    object_store: ObjectStore = Field(
        default=ObjectStore.BLUESTORE,
        description="crimson: cyanstore|seastore|bluestore; classic: bluestore|memstore.",
    )
    count: int = Field(default=1, ge=1, le=128, description="Number of OSDs.")
    reactors: int | None = Field(
        default=None, ge=1, le=1024, description="Seastar reactors per crimson OSD (default 1)."
    )
    cpus_per_osd: int | None = Field(
        default=None, ge=1, le=1024, description="CPUs per classic OSD (default: an equal share)."
    )
    cpu_policy: CpuPolicy = Field(default=CpuPolicy.DEFAULT, description="Reactor placement.")
    cpu_set: CpuSetStr | None = Field(
        default=None, description="CPUs the OSDs may use; default: all CPUs not given to fio."
    )
    hyper_threads: HyperThreads = Field(
        default=HyperThreads.DUAL,
        description="physical: one reactor per core; dual: both siblings host a reactor.",
    )
    alien_threads: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="BlueStore alien threads (default 4*OSDs*reactors).",
    )
    alien_cpu_set: CpuSetStr | None = Field(
        default=None, description="CPUs for alien threads; default: allowed CPUs left by reactors."
    )
    option_naming: OptionNaming = Field(
        default=OptionNaming.AUTO, description="Crimson option names; auto picks by Ceph version."
    )
    ceph_version: str | None = Field(
        default=None,
        pattern=r"^\d+\.\d+(\.\d+)?$",
        description="Ceph version if it cannot be detected, e.g. 19.2.1.",
    )
    devices: list[Annotated[str, Field(max_length=256)]] = Field(
        default_factory=list, max_length=128, description="Block devices, one per OSD (seastore)."
    )
    ceph_config: dict[str, Annotated[str, Field(max_length=1024)]] = Field(
        default_factory=dict, max_length=128, description="Extra options for the [osd] section."
    )

    @model_validator(mode="after")
    def _consistent(self) -> OsdSpec:
        return _enforce(OSD_RULES, self)

    @property
    def reactors_per_osd(self) -> int:
        """Reactors for crimson (default 1); 0 for classic, which has none."""
        if self.flavor == Flavor.CLASSIC:
            return 0
        return self.reactors or 1

    @property
    def alien_thread_count(self) -> int:
        """The reference method's sizing: 4 x OSDs x reactors (crimson bluestore only)."""
        if self.flavor != Flavor.CRIMSON or self.object_store != ObjectStore.BLUESTORE:
            return 0
        return self.alien_threads or 4 * self.count * self.reactors_per_osd


# ---------------------------------------------------------------- client


CLIENT_RULES = (
    Rule(
        cel="[has(self.node), has(self.nodes) && self.nodes.size() > 0, "
        "has(self.nodeSelector) && self.nodeSelector.size() > 0].filter(x, x).size() <= 1",
        message="name the client nodes one way: node, nodes or nodeSelector",
        field="nodes",
        check=lambda c: sum((c.node is not None, bool(c.nodes), bool(c.node_selector))) <= 1,
    ),
    Rule(
        cel="!has(self.count) || (!has(self.node) && (!has(self.nodes) || self.nodes.size() == 0))",
        message="count is for nodeSelector (how many matching nodes) or local runs (fio "
        "clients on this machine); with node or nodes there is one client per node",
        field="count",
        check=lambda c: c.count is None or (c.node is None and not c.nodes),
    ),
)


class ClientSpec(_Model):
    model_config = ConfigDict(json_schema_extra=cel_rules(CLIENT_RULES))

    cpu_set: CpuSetStr | None = Field(
        default=None,
        description="CPUs reserved for fio on every client (local: shared equally by count "
        "clients); must not overlap osd.cpuSet. Default: the CPUs the OSDs do not use.",
    )
    pool: str = Field(default="rbd", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    pg_num: int = Field(default=128, ge=1, le=65536)
    images: int = Field(default=32, ge=1, le=1024, description="Number of RBD images.")
    image_size: SizeStr = Field(default="2Gi", description="Size of each RBD image.")
    processes_per_image: int = Field(default=1, ge=1, le=64, description="fio processes per image.")
    num_jobs: int = Field(default=1, ge=1, le=64, description="fio numjobs per process.")
    prefill: bool = Field(default=True, description="Write every image once, 64K sequential.")
    prefill_block_size: BlockSizeStr = Field(default="64k")
    user: str = Field(default="admin", min_length=1, description="cephx client for fio.")
    image_prefix: str = Field(default="fio_test_", pattern=r"^[A-Za-z0-9_.-]{1,48}$")
    node: str | None = Field(
        default=None, max_length=253, description="The node fio runs on (operator)."
    )
    nodes: list[NodeName] = Field(
        default_factory=list,
        max_length=1024,
        json_schema_extra={"x-kubernetes-list-type": "set"},
        description="Client nodes (operator): one fio client on each, started together; "
        "the images are spread over them.",
    )
    node_selector: dict[str, Annotated[str, Field(max_length=63)]] = Field(
        default_factory=dict,
        max_length=16,
        description="Client nodes by label (operator): the first `count` matching nodes by "
        "name (default: all of them).",
    )
    count: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="Number of fio clients: with nodeSelector, how many nodes; in local "
        "runs, fio clients on this machine, each on its own share of cpuSet.",
    )
    node_cpu_sets: dict[str, CpuSetStr] = Field(
        default_factory=dict,
        max_length=1024,
        description="Client CPUs per node name, overriding cpuSet on that node.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> ClientSpec:
        return _enforce(CLIENT_RULES, self)

    @property
    def named_nodes(self) -> tuple[str, ...]:
        """The client nodes the spec names (node or nodes); () for a selector or local."""
        return (self.node,) if self.node is not None else tuple(self.nodes)


# ---------------------------------------------------------------- workloads

PRESETS: dict[str, tuple[str, str]] = {
    "randread4k": ("randread", "4k"),
    "randwrite4k": ("randwrite", "4k"),
    "seqread64k": ("read", "64k"),
    "seqwrite64k": ("write", "64k"),
}

WORKLOAD_RULES = (
    Rule(
        cel="has(self.preset) != (has(self.rw) || has(self.bs))",
        message="set either preset, or rw and bs for a custom workload, not both",
        field="preset",
        check=lambda w: (w.preset is not None) != (w.rw is not None or w.bs is not None),
    ),
    Rule(
        cel="has(self.preset) || (has(self.rw) && has(self.bs) && has(self.name))",
        message="a custom workload needs name, rw and bs",
        field="name",
        check=lambda w: w.preset is not None or None not in (w.rw, w.bs, w.name),
    ),
    Rule(
        cel="!has(self.options) || self.options.all(k, k in "
        + repr(list(FIO_OPTION_ALLOWLIST)).replace("'", '"')
        + ")",
        message="options may only set: " + ", ".join(FIO_OPTION_ALLOWLIST),
        field="options",
        check=lambda w: all(k in FIO_OPTION_ALLOWLIST for k in w.options),
    ),
)


class WorkloadSpec(_Model):
    model_config = ConfigDict(json_schema_extra=cel_rules(WORKLOAD_RULES))

    preset: Literal["randread4k", "randwrite4k", "seqread64k", "seqwrite64k"] | None = Field(
        default=None, description="A standard workload."
    )
    # maxLength keeps the unique-name CEL rule inside the API server's cost budget.
    name: str | None = Field(default=None, max_length=31, pattern=r"^[a-z0-9][a-z0-9-]{0,30}$")
    rw: Literal["read", "write", "randread", "randwrite", "rw", "readwrite", "randrw"] | None = None
    bs: BlockSizeStr | None = None
    options: dict[str, Annotated[str, Field(max_length=256)]] = Field(
        default_factory=dict, max_length=32, description="Allow-listed fio options."
    )

    @model_validator(mode="after")
    def _consistent(self) -> WorkloadSpec:
        return _enforce(WORKLOAD_RULES, self)

    @property
    def key(self) -> str:
        return self.preset or self.name or ""

    @property
    def rw_mode(self) -> str:
        return PRESETS[self.preset][0] if self.preset else str(self.rw)

    @property
    def block_size(self) -> str:
        return PRESETS[self.preset][1] if self.preset else str(self.bs)

    @property
    def reports_bandwidth(self) -> bool:
        """Sequential workloads are read as MiB/s, random ones as IOPS (as published)."""
        return self.rw_mode in ("read", "write", "rw", "readwrite")


# ---------------------------------------------------------------- sweep


class EarlyExit(_Model):
    # Off by default: the published comparisons show the whole curve, and their rows often
    # pass stddev/mean 0.5 long before iodepth 64.
    enabled: bool = Field(
        default=False, description="Stop a workload's sweep when it saturates (off = full curve)."
    )
    clat_cv_limit: float = Field(
        default=0.5, gt=0, le=100, description="Stop when clat stddev/mean reaches this."
    )
    mean_latency_ms_limit: float | None = Field(
        default=None, gt=0, description="Stop when mean clat (ms) exceeds this."
    )


class LatencyTarget(_Model):
    percentile: float = Field(
        default=99.0,
        json_schema_extra={"enum": list(RECORDED_PERCENTILES)},
        description="fio clat percentile (the ones every step records).",
    )
    latency_ms: float = Field(gt=0, description="The latency that percentile must stay under.")
    stop_when_exceeded: bool = Field(default=True, description="End the sweep once it is missed.")

    @field_validator("percentile")
    @classmethod
    def _recorded(cls, v: float) -> float:
        if v not in RECORDED_PERCENTILES:
            raise ValueError(f"{v:g} is not recorded; use one of 50, 90, 99, 99.9 or 99.99")
        return v


class KneeSearch(_Model):
    """Run only the iodepths needed to find the knee: the most throughput whose latency
    stays under latencyMs (bisecting the iodepth list, stopping past saturation)."""

    latency_ms: float = Field(gt=0, description="The latency limit of the knee (ms).")
    metric: Literal["mean", "p50", "p90", "p99", "p99.9", "p99.99"] = Field(
        default="p99", description="Which completion latency the limit is on."
    )
    min_gain_pct: float = Field(
        default=5.0,
        ge=0,
        le=100,
        description="Saturated when a deeper queue adds no more than this % throughput "
        "while latency rises (0: only the limit bounds the search).",
    )


class SteadyStateSpec(_Model):
    """fio's steady-state detection: a step ends once `criterion` stays within `limit`
    over durationSeconds (after rampSeconds); runtimeSeconds becomes an upper bound."""

    criterion: Literal["iops", "iops_slope", "bw", "bw_slope", "lat", "lat_slope"] = Field(
        default="iops_slope", description="fio's steadystate criterion."
    )
    limit: float = Field(default=0.5, gt=0, le=1e9, description="fio's steadystate limit.")
    percent: bool = Field(default=True, description="limit is a % of the window's mean.")
    duration_seconds: int = Field(default=30, ge=2, le=86400, description="fio's ss_dur.")
    ramp_seconds: int = Field(default=10, ge=0, le=86400, description="fio's ss_ramp.")


SWEEP_RULES = (
    Rule(
        cel="!has(self.kneeSearch) || !has(self.earlyExit) || !has(self.earlyExit.enabled) "
        "|| !self.earlyExit.enabled",
        message="kneeSearch picks the iodepths itself; turn earlyExit off (or drop kneeSearch)",
        field="kneeSearch",
        check=lambda s: s.knee_search is None or not s.early_exit.enabled,
    ),
    Rule(
        cel="!has(self.steadyState) || self.steadyState.rampSeconds + "
        "self.steadyState.durationSeconds <= self.runtimeSeconds",
        message="steadyState.rampSeconds + durationSeconds must fit in runtimeSeconds, or "
        "steady state could never be reached",
        field="steadyState",
        check=lambda s: s.steady_state is None
        or s.steady_state.ramp_seconds + s.steady_state.duration_seconds <= s.runtime_seconds,
    ),
)


class SweepSpec(_Model):
    model_config = ConfigDict(json_schema_extra=cel_rules(SWEEP_RULES))

    iodepths: list[Annotated[int, Field(ge=1, le=4096)]] = Field(
        default_factory=lambda: list(DEFAULT_IODEPTHS),
        min_length=1,
        max_length=64,
        json_schema_extra={"x-kubernetes-list-type": "set", "default": list(DEFAULT_IODEPTHS)},
        description="The iodepth per step, in order (the response curve).",
    )
    runtime_seconds: int = Field(default=300, ge=1, le=86400)
    ramp_seconds: int = Field(default=10, ge=0, le=3600)
    repeats: int = Field(default=1, ge=1, le=20, description="Run each step this many times.")
    sample_interval_seconds: float = Field(default=1.0, ge=0.1, le=60)
    early_exit: EarlyExit = Field(default_factory=EarlyExit, json_schema_extra={"default": {}})
    latency_target: LatencyTarget | None = Field(
        default=None, description="Find the most IOPS meeting a percentile latency."
    )
    knee_search: KneeSearch | None = Field(
        default=None, description="Run only the iodepths that find the knee (fewer steps)."
    )
    steady_state: SteadyStateSpec | None = Field(
        default=None, description="End each step once fio sees steady state."
    )

    @model_validator(mode="after")
    def _consistent(self) -> SweepSpec:
        return _enforce(SWEEP_RULES, self)

    @field_validator("iodepths")
    @classmethod
    def _unique(cls, v: list[int]) -> list[int]:
        dupes = sorted({x for x in v if v.count(x) > 1})
        if dupes:
            raise ValueError(f"iodepths repeats {dupes}; list each iodepth once")
        return v


# ---------------------------------------------------------------- the run

RUN_RULES = (
    Rule(
        cel="!has(self.target.local) || (!has(self.client.node) && "
        "(!has(self.client.nodes) || self.client.nodes.size() == 0) && "
        "(!has(self.client.nodeSelector) || self.client.nodeSelector.size() == 0))",
        message="a local run uses this machine: remove client.node, nodes and nodeSelector "
        "(client.count sets how many fio clients run here)",
        field="client",
        check=lambda s: (
            s.target.local is None
            or (s.client.node is None and not s.client.nodes and not s.client.node_selector)
        ),
    ),
    Rule(
        cel="has(self.target.local) || has(self.client.node) || "
        "(has(self.client.nodes) && self.client.nodes.size() > 0) || "
        "(has(self.client.nodeSelector) && self.client.nodeSelector.size() > 0)",
        message="name where fio runs: client.node, client.nodes or client.nodeSelector "
        "(kubectl get nodes)",
        field="client.nodes",
        check=lambda s: (
            s.target.local is not None
            or bool(s.client.node or s.client.nodes or s.client.node_selector)
        ),
    ),
    Rule(
        cel="self.workloads.all(w, self.workloads.filter(v, "
        "(has(v.preset) ? v.preset : has(v.name) ? v.name : '') == "
        "(has(w.preset) ? w.preset : has(w.name) ? w.name : '')).size() == 1)",
        message="workload names must be unique; give each custom workload its own name",
        field="workloads",
        check=lambda s: len({w.key for w in s.workloads}) == len(s.workloads),
    ),
)


class BenchmarkRunSpec(_Model):
    """spec of a BenchmarkRun: what to benchmark, where, and how to sweep it."""

    model_config = ConfigDict(json_schema_extra=cel_rules(RUN_RULES))

    target: TargetSpec
    # `default: {}` in the CRD makes the API server fill nested defaults, so
    # `kubectl get -o yaml` shows exactly what will run.
    # The API server checks CEL rules against a default as written (nested defaults are not
    # filled in first), so the osd default names the fields its rules read.
    osd: OsdSpec = Field(
        default_factory=OsdSpec,
        json_schema_extra={"default": {"flavor": "crimson", "objectStore": "bluestore"}},
    )
    client: ClientSpec = Field(default_factory=ClientSpec, json_schema_extra={"default": {}})
    workloads: list[WorkloadSpec] = Field(
        default_factory=lambda: [WorkloadSpec(preset=p) for p in PRESETS],  # type: ignore[arg-type]
        min_length=1,
        max_length=32,
        json_schema_extra={"default": [{"preset": p} for p in PRESETS]},
    )
    sweep: SweepSpec = Field(default_factory=SweepSpec, json_schema_extra={"default": {}})
    keep_images: bool = Field(default=False, description="Keep the pool and images afterwards.")

    @model_validator(mode="after")
    def _consistent(self) -> BenchmarkRunSpec:
        _enforce(RUN_RULES, self)
        self._check_cpu_sets()
        return self

    def _check_cpu_sets(self) -> None:
        # CEL cannot parse CPU lists, so the overlap check lives here (and in the planner).
        if self.osd.cpu_set and self.client.cpu_set:
            both = parse_cpuset(self.osd.cpu_set) & parse_cpuset(self.client.cpu_set)
            if both:
                raise _rule_error(
                    (
                        "client.cpuSet",
                        f"osd.cpuSet and client.cpuSet share CPUs {format_cpuset(both)}; fio "
                        "must run on CPUs the OSDs do not use, so remove them from one of the two",
                    )
                )


def _field_path(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts[-1:] = [f"{parts[-1]}[{item}]"] if parts else [f"[{item}]"]
        else:
            parts.append(to_camel(item) if "_" in item else item)
    return ".".join(p for p in parts if p)


def validate_spec(data: dict[str, Any]) -> BenchmarkRunSpec:
    """Parse a spec dict; raise InvalidSpec naming every bad camelCase field and its fix."""
    try:
        return BenchmarkRunSpec.model_validate(data)
    except ValidationError as exc:
        problems: list[tuple[str, str]] = []
        for err in exc.errors():
            outer = _field_path(tuple(err["loc"]))
            if err["type"] == "spec_rule":
                for inner, message in err["ctx"]["problems"]:
                    path = ".".join(p for p in ("spec", outer, inner) if p)
                    problems.append((path, message))
            else:
                path = ".".join(p for p in ("spec", outer) if p)
                problems.append((path, _friendly(err)))
        (field, message), *more = problems
        raise InvalidSpec(field, message, more=tuple(more)) from None


_PATTERN_HINTS = {
    CPUSET_PATTERN: "is not a CPU list; write ids and ranges like '0-3,8,10-11'",
    SIZE_PATTERN: "is not a size; write a whole number with Mi, Gi or Ti",
    BLOCK_SIZE_PATTERN: "is not a block size; write e.g. 4k, 64k or 1m",
}


def _friendly(err: Any) -> str:
    if err["type"] == "string_pattern_mismatch":
        hint = _PATTERN_HINTS.get(err["ctx"]["pattern"])
        allowed = err["ctx"]["pattern"].strip("^$()").split("|")
        if hint is None and all(re.fullmatch(r"[a-z0-9]+", a) for a in allowed):
            hint = "must be one of: " + ", ".join(allowed)
        return f"{err['input']!r} {hint}" if hint else err["msg"]
    if err["type"] == "extra_forbidden":
        return "is not a field of BenchmarkRun; check the spelling (fields are camelCase)"
    return re.sub(r"^Value error, ", "", err["msg"])


def load_spec(path: str | Path) -> tuple[str, BenchmarkRunSpec]:
    """Read a BenchmarkRun YAML (the same file kubectl would apply). Returns (name, spec).
    Every problem is an InvalidSpec naming the line or the field."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidSpec(str(path), f"cannot read the file: {exc}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidSpec(str(path), _yaml_problem(exc)) from None
    if not isinstance(doc, dict):
        raise InvalidSpec(
            str(path),
            "is not a BenchmarkRun manifest: expected a YAML mapping with kind, metadata and spec",
        )
    if doc.get("kind") != KIND:
        found = f"kind {doc['kind']!r}" if "kind" in doc else "no kind"
        raise InvalidSpec("kind", f"{path} has {found}; a BenchmarkRun manifest says kind: {KIND}")
    if doc.get("apiVersion") not in (None, API_VERSION):
        raise InvalidSpec(
            "apiVersion", f"{doc['apiVersion']!r} is not served; write apiVersion: {API_VERSION}"
        )
    name = (
        (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), dict) else None
    )
    if not name:
        raise InvalidSpec("metadata.name", "give the run a name (metadata: {name: ...})")
    spec = doc.get("spec") or {}
    if not isinstance(spec, dict):
        raise InvalidSpec("spec", f"must be a mapping of fields, not {type(spec).__name__}")
    return str(name), validate_spec(spec)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """ "line L, column C: what is wrong", from PyYAML's marks (0-based)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}not valid YAML ({problem})"
