"""The BenchmarkRun spec as pydantic models: parsed once, at the edge, into frozen values.

Field names are snake_case in Python and camelCase in YAML (the Kubernetes convention).
The CRD in crds/ is generated from these models (see crimsonbench.spec.crd); a test fails
if the checked-in YAML drifts from them. The parts live in spec/{target,osd,client,
workload,sweep}.py; this module holds the run itself, validation and loading, and names
every part so callers import from one place.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from crimsonbench.errors import InvalidSpec
from crimsonbench.spec.api import KIND
from crimsonbench.spec.base import (
    BLOCK_SIZE_PATTERN,
    MAX_STEP_JOBS,
    PATTERN_HINTS,
    SIZE_PATTERN,
    STEP_JOBS_NOTE,
    BlockSizeStr,
    CpuSetStr,
    NodeName,
    RuledModel,
    SizeStr,
    block_size_bytes,
    rule_error,
    short,
    size_bytes,
)
from crimsonbench.spec.client import CLIENT_KEY_RULES, CLIENT_RULES, ClientSpec
from crimsonbench.spec.cpuset import CPUSET_PATTERN, format_cpuset, parse_cpuset
from crimsonbench.spec.manifest import read_manifest
from crimsonbench.spec.names import MAX_RUN_NAME, NAME_RULE, validate_name
from crimsonbench.spec.osd import (
    OSD_KEY_RULES,
    OSD_RULES,
    CpuPolicy,
    Flavor,
    HyperThreads,
    ObjectStore,
    OptionNaming,
    OsdSpec,
)
from crimsonbench.spec.rules import Rule
from crimsonbench.spec.sweep import (
    DEFAULT_IODEPTHS,
    RECORDED_PERCENTILES,
    SWEEP_RULES,
    EarlyExit,
    KneeSearch,
    LatencyTarget,
    SteadyStateSpec,
    SweepSpec,
)
from crimsonbench.spec.target import (
    EXTERNAL_RULES,
    LOCAL_RULES,
    TARGET_RULES,
    ExternalTarget,
    LocalTarget,
    RookTarget,
    SecretKeyRef,
    TargetSpec,
)
from crimsonbench.spec.workload import (
    FIO_OPTION_ALLOWLIST,
    OPTION_RULES,
    PRESETS,
    WORKLOAD_RULES,
    WorkloadSpec,
)
from crimsonbench.spec.yamlload import MAX_SPEC_BYTES

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
    Rule(  # issue 36: an existing cluster's `rbd` is someone's data
        cel="!has(self.target.external) || has(self.client.pool)",
        message="name the external cluster's pool the run's images go to (client.pool)",
        field="client.pool",
        check=lambda s: s.target.external is None or "pool" in s.client.model_fields_set,
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


# The whole run's size: fio job runs, one per step, image and process. The reference sweep
# (4 workloads x 10 iodepths x 32 images x 4 processes) is 5,120; a long one (4 x 3 repeats
# x 20 x 1024 images x 4) is 983,040. Each factor alone allowed 2.7 billion. Job files are
# rendered when their step starts, so this bounds the run's work and what it records, not
# the plan's memory (that grows with steps + jobs, each bounded by its fields).


def _or(path: str, default: int, size: bool = False) -> str:
    """CEL: self.<path> (its size() when `size`), or the default the API server fills in
    when the object does not carry it yet (rules also run against defaults as written)."""
    parts = path.split(".")
    guards = " && ".join(f"has(self.{'.'.join(parts[: i + 1])})" for i in range(len(parts)))
    value = f"self.{path}.size()" if size else f"self.{path}"
    return f"({guards} ? {value} : {default})"


def step_jobs(s: BenchmarkRunSpec) -> int:
    """Job files the whole sweep runs: workloads x repeats x iodepths x images x processes."""
    c = s.client
    sweep = len(s.workloads) * s.sweep.repeats * len(s.sweep.iodepths)
    return sweep * c.images * c.processes_per_image


_CLIENT_DEFAULTS = ClientSpec()
BOUND_RULES = (
    Rule(
        cel=" * ".join(
            (
                _or("workloads", len(PRESETS), size=True),
                _or("sweep.repeats", 1),
                _or("sweep.iodepths", len(DEFAULT_IODEPTHS), size=True),
                _or("client.images", _CLIENT_DEFAULTS.images),
                _or("client.processesPerImage", _CLIENT_DEFAULTS.processes_per_image),
            )
        )
        + f" <= {MAX_STEP_JOBS}",
        message="the sweep runs too many fio jobs: workloads x sweep.repeats x "
        "sweep.iodepths x client.images x client.processesPerImage must be at most "
        f"{MAX_STEP_JOBS:,} (the reference sweep is 4 x 1 x 10 x 32 x 4 = 5,120); split it "
        "into several runs",
        field="",
        check=lambda s: step_jobs(s) <= MAX_STEP_JOBS,
    ),
)


# The rules added at the spec's edge (names, map keys, option formats, bounds): with the
# groups above, every CEL rule of the CRD.
EDGE_RULES = (NAME_RULE, *CLIENT_KEY_RULES, *OSD_KEY_RULES, *OPTION_RULES, *BOUND_RULES)


class BenchmarkRunSpec(RuledModel):
    """spec of a BenchmarkRun: what to benchmark, where, and how to sweep it."""

    RULES = RUN_RULES + BOUND_RULES

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
        description="What fio does, one sweep each" + STEP_JOBS_NOTE,
    )
    sweep: SweepSpec = Field(default_factory=SweepSpec, json_schema_extra={"default": {}})
    keep_images: bool = Field(default=False, description="Keep the pool and images afterwards.")

    @model_validator(mode="after")
    def _cpu_sets_fit(self) -> BenchmarkRunSpec:
        self._check_cpu_sets()
        return self

    def _check_cpu_sets(self) -> None:
        # CEL cannot parse CPU lists, so the overlap check lives here (and in the planner).
        if self.osd.cpu_set and self.client.cpu_set:
            both = parse_cpuset(self.osd.cpu_set) & parse_cpuset(self.client.cpu_set)
            if both:
                raise rule_error(
                    (
                        "client.cpuSet",
                        f"osd.cpuSet and client.cpuSet share CPUs {format_cpuset(both)}; fio "
                        "must run on CPUs the OSDs do not use, so remove them from one of the two",
                    )
                )


# Map fields: what follows them in an error's location is a key the user wrote, not a field.
_MAP_FIELDS = frozenset(
    {"options", "ceph_config", "cephConfig", "node_selector", "nodeSelector", "node_cpu_sets",
     "nodeCpuSets"}
)  # fmt: skip
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_./-]{1,64}")


def _field_path(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    after_map = False
    for item in loc:
        if item == "[key]":  # the key itself is wrong (not a string): the map is at fault
            after_map = False
            continue
        if after_map:  # a key of a map, as written (quoted when it is not plain)
            key = str(item)
            parts.append(key if _PLAIN_KEY.fullmatch(key) else f"[{short(key, 40)}]")
            after_map = False
            continue
        if isinstance(item, int):
            parts[-1:] = [f"{parts[-1]}[{item}]"] if parts else [f"[{item}]"]
        elif not _PLAIN_KEY.fullmatch(item):  # an unknown field the user wrote: quoted
            parts.append(f"[{short(item, 40)}]")
        else:
            after_map = item in _MAP_FIELDS
            parts.append(to_camel(item) if "_" in item else item)
    return ".".join(p for p in parts if p)


M = TypeVar("M", bound=RuledModel)


def validate_spec(data: dict[str, Any]) -> BenchmarkRunSpec:
    """Parse a spec dict; raise InvalidSpec naming every bad camelCase field and its fix."""
    return validate_as(BenchmarkRunSpec, data)


def validate_as(model: type[M], data: Any, root: str = "spec") -> M:
    """Parse `data` as `model` (a run's spec, a study's); InvalidSpec names every bad
    field under `root` with its fix."""
    if not isinstance(data, dict):
        raise InvalidSpec(root, f"must be a mapping of fields, not {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems: list[tuple[str, str]] = []
        for err in exc.errors():
            outer = _field_path(tuple(err["loc"]))
            if err["type"] == "spec_rule":
                for inner, message in err["ctx"]["problems"]:
                    path = ".".join(p for p in (root, outer, inner) if p)
                    problems.append((path.replace(".[", "["), message))
            else:
                path = ".".join(p for p in (root, outer) if p)
                problems.append((path.replace(".[", "["), _friendly(err)))
        (field, message), *more = problems
        raise InvalidSpec(field, message, more=tuple(more)) from None


_PATTERN_HINTS = {
    CPUSET_PATTERN: "is not a CPU list; write ids and ranges like '0-3,8,10-11'",
    **PATTERN_HINTS,
}
_TYPE_NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
               dict: "a mapping", list: "a list", type(None): "null"}  # fmt: skip


def _friendly(err: Any) -> str:
    if err["type"] == "string_pattern_mismatch":
        hint = _PATTERN_HINTS.get(err["ctx"]["pattern"])
        allowed = err["ctx"]["pattern"].strip("^$()").split("|")
        if hint is None and all(re.fullmatch(r"[a-z0-9]+", a) for a in allowed):
            hint = "must be one of: " + ", ".join(allowed)
        return f"{short(err['input'])} {hint}" if hint else err["msg"]
    if err["type"] == "extra_forbidden":
        return "is not a field of BenchmarkRun; check the spelling (fields are camelCase)"
    if err["type"] in ("int_type", "float_type", "bool_type", "string_type"):
        # strict types, as the API server checks them: `true` is no iodepth, "8" no count
        given = _TYPE_NAMES.get(type(err["input"]), type(err["input"]).__name__)
        return f"{err['msg']}, not {given} ({short(err['input'])})"
    if err["type"] == "finite_number":
        return f"{err['msg']} ({short(err['input'])}: infinity and NaN are no limit)"
    return re.sub(r"^Value error, ", "", err["msg"])


def load_spec(path: str | Path) -> tuple[str, BenchmarkRunSpec]:
    """Read a BenchmarkRun YAML (the same file kubectl would apply). Returns (name, spec).
    Every problem is an InvalidSpec naming the line or the field. Bounded: a file over
    MAX_SPEC_BYTES is refused before it is parsed, and so are YAML aliases, deep nesting,
    duplicate keys and huge integers (crimsonbench.spec.yamlload)."""
    name, spec = read_manifest(path, KIND)
    return name, validate_spec(spec)


__all__ = [
    "BLOCK_SIZE_PATTERN",
    "BOUND_RULES",
    "CLIENT_KEY_RULES",
    "CLIENT_RULES",
    "DEFAULT_IODEPTHS",
    "EDGE_RULES",
    "EXTERNAL_RULES",
    "LOCAL_RULES",
    "FIO_OPTION_ALLOWLIST",
    "MAX_RUN_NAME",
    "MAX_SPEC_BYTES",
    "MAX_STEP_JOBS",
    "NAME_RULE",
    "OPTION_RULES",
    "OSD_KEY_RULES",
    "OSD_RULES",
    "PRESETS",
    "RECORDED_PERCENTILES",
    "RUN_RULES",
    "SIZE_PATTERN",
    "SWEEP_RULES",
    "TARGET_RULES",
    "WORKLOAD_RULES",
    "BenchmarkRunSpec",
    "BlockSizeStr",
    "ClientSpec",
    "CpuPolicy",
    "CpuSetStr",
    "EarlyExit",
    "ExternalTarget",
    "Flavor",
    "HyperThreads",
    "KneeSearch",
    "LatencyTarget",
    "LocalTarget",
    "NodeName",
    "ObjectStore",
    "OptionNaming",
    "OsdSpec",
    "RookTarget",
    "SecretKeyRef",
    "SizeStr",
    "SteadyStateSpec",
    "SweepSpec",
    "TargetSpec",
    "WorkloadSpec",
    "block_size_bytes",
    "load_spec",
    "read_manifest",
    "size_bytes",
    "step_jobs",
    "validate_name",
    "validate_as",
    "validate_spec",
]
