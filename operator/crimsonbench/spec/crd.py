"""Generate the BenchmarkRun CRD from the pydantic models (the one source of truth).

`python -m crimsonbench.spec.crd > crds/benchmarkrun.yaml` regenerates the checked-in file;
tests/spec/test_crd.py fails when the two differ.
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

from crimsonbench.spec.api import GROUP, KIND, PLURAL, SHORT_NAMES, SINGULAR, VERSION
from crimsonbench.spec.models import BenchmarkRunSpec, SweepSpec
from crimsonbench.spec.names import NAME_RULE
from crimsonbench.spec.rules import cel_rules
from crimsonbench.spec.status import BenchmarkRunStatus

# JSON-schema keywords a structural Kubernetes schema does not accept.
_DROP = {"title", "additionalProperties:false", "$defs", "discriminator"}


def _structural(node: Any, defs: dict[str, Any]) -> Any:
    """Turn pydantic's JSON schema into an OpenAPI v3.0 structural schema."""
    if isinstance(node, list):
        return [_structural(x, defs) for x in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _structural(merged, defs)
    if "anyOf" in node:  # Optional[X]: keep X; nulls are pruned by the API server
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        if len(options) == 1:
            merged = {**_structural(options[0], defs), **rest}
            if merged.get("default", 0) is None:
                del merged["default"]
            return _structural(merged, defs)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP or (key == "additionalProperties" and value is False):
            continue
        if key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
            out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
            out[key] = True  # OpenAPI 3.0 spells it as a flag beside minimum/maximum
            continue
        out[key] = _structural(value, defs)
    return out


def schema_of(model: type[Any]) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return _structural(raw, raw.get("$defs", {}))


def _printer_columns() -> list[dict[str, Any]]:
    def col(name: str, path: str, typ: str = "string", priority: int = 0) -> dict[str, Any]:
        c: dict[str, Any] = {"name": name, "type": typ, "jsonPath": path}
        if priority:
            c["priority"] = priority
        return c

    return [
        col("Phase", ".status.phase"),
        col("Progress", ".status.progress"),
        col("Flavor", ".spec.osd.flavor", priority=1),
        col("Backend", ".spec.osd.objectStore"),
        col("OSDs", ".spec.osd.count", "integer", priority=1),
        col("Reactors", ".spec.osd.reactors", "integer"),
        col("Policy", ".spec.osd.cpuPolicy"),
        col("Peak IOPS", ".status.peakIops", "integer"),
        col("Suspect", ".status.suspectSteps", "integer"),
        col("Age", ".metadata.creationTimestamp", "date"),
    ]


# spec.sweep fields that say which steps exist and run (plan/meaning.py: SWEEP_AXES); the
# frozen rule below lets only these change, besides workloads added
_SWEEP_AXES = ("iodepths", "repeats", "earlyExit", "latencyTarget", "kneeSearch")
FROZEN_MESSAGE = (
    "the spec is frozen once the run is planned (status.record.plannedSpec): only "
    "sweep.iodepths, repeats, earlyExit, latencyTarget and kneeSearch may change, and "
    "workloads may be added; create a new BenchmarkRun for another spec"
)


def _aliases(model: type[Any]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def frozen_spec_rule() -> dict[str, str]:
    """A transition rule at the root (it reads the status): once the run is planned, its
    spec keeps its meaning (the operator's own rule: plan.meaning.effective_spec)."""

    def same(path: str) -> str:  # sweep has a default ({}): its fields' parent is there
        new, old = f"self.spec.{path}", f"oldSelf.spec.{path}"
        return f"(has({new}) == has({old}) && (!has({new}) || {new} == {old}))"

    spec_fields = [f for f in _aliases(BenchmarkRunSpec) if f not in ("sweep", "workloads")]
    sweep_fields = [f for f in _aliases(SweepSpec) if f not in _SWEEP_AXES]
    kept = [same(f) for f in spec_fields] + [same(f"sweep.{f}") for f in sweep_fields]
    kept.append("oldSelf.spec.workloads.all(w, w in self.spec.workloads)")
    planned = ("has(oldSelf.status) && has(oldSelf.status.record) && "
               "has(oldSelf.status.record.plannedSpec) && "
               "size(oldSelf.status.record.plannedSpec) > 0")  # fmt: skip
    return {"rule": f"!({planned}) || ({' && '.join(kept)})", "message": FROZEN_MESSAGE,
            "fieldPath": ".spec"}  # fmt: skip


def build_crd() -> dict[str, Any]:
    return custom_resource(
        KIND, PLURAL, SINGULAR, SHORT_NAMES, "A CPU-pinned fio sweep against Ceph OSDs.",
        _printer_columns(),
        # the root may read metadata.name (only it): the run's name; and both spec and
        # status: the spec frozen once planned
        [*cel_rules((NAME_RULE,))["x-kubernetes-validations"], frozen_spec_rule()],
        schema_of(BenchmarkRunSpec), schema_of(BenchmarkRunStatus),
    )  # fmt: skip


def custom_resource(
    kind: str,
    plural: str,
    singular: str,
    short_names: tuple[str, ...],
    description: str,
    columns: list[dict[str, Any]],
    root_rules: list[dict[str, str]],
    spec_schema: dict[str, Any],
    status_schema: dict[str, Any],
) -> dict[str, Any]:
    """One of our CRDs (BenchmarkRun, BenchmarkStudy): namespaced, one served version with
    a status subresource, rules at the root (they may read metadata.name and status)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": singular,
                "shortNames": list(short_names),
                "categories": ["ceph", "benchmark"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": description,
                            "required": ["spec"],
                            "x-kubernetes-validations": root_rules,
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                # declared so a name rule's fieldPath names it (the
                                # root schema may restrict metadata's name only)
                                "metadata": {
                                    "type": "object",
                                    "properties": {"name": {"type": "string"}},
                                },
                                "spec": spec_schema,
                                "status": status_schema,
                            },
                        }
                    },
                }
            ],
        },
    }


def render_crd() -> str:
    header = "# Generated from crimsonbench.spec.models by `python -m crimsonbench.spec.crd`.\n"
    header += "# Do not edit by hand: change the models and regenerate.\n"
    return header + yaml.safe_dump(build_crd(), sort_keys=False, width=100)


if __name__ == "__main__":
    sys.stdout.write(render_crd())
