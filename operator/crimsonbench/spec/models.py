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
from typing import Any

import yaml
from pydantic import Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from crimsonbench.errors import InvalidSpec
from crimsonbench.spec.api import API_VERSION, KIND
from crimsonbench.spec.base import (
    BLOCK_SIZE_PATTERN,
    SIZE_PATTERN,
    BlockSizeStr,
    CpuSetStr,
    NodeName,
    RuledModel,
    SizeStr,
    block_size_bytes,
    rule_error,
    size_bytes,
)
from crimsonbench.spec.client import CLIENT_RULES, ClientSpec
from crimsonbench.spec.cpuset import CPUSET_PATTERN, format_cpuset, parse_cpuset
from crimsonbench.spec.osd import (
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
    PRESETS,
    WORKLOAD_RULES,
    WorkloadSpec,
)

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


class BenchmarkRunSpec(RuledModel):
    """spec of a BenchmarkRun: what to benchmark, where, and how to sweep it."""

    RULES = RUN_RULES

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


__all__ = [
    "BLOCK_SIZE_PATTERN",
    "CLIENT_RULES",
    "DEFAULT_IODEPTHS",
    "EXTERNAL_RULES",
    "LOCAL_RULES",
    "FIO_OPTION_ALLOWLIST",
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
    "size_bytes",
    "validate_spec",
]
