"""The BenchmarkStudy spec: a base BenchmarkRun spec and what varies across its variants.

Every published Crimson result is a comparison (classic vs seastore, one vs two reactors
per core, the three CPU policies), so a study is one object: `vary` (axes, expanded by
product) or `variants` (an explicit list), `repeats` run interleaved across the variants,
and the `baseline` variant the others are judged against. Which spec field a variant sets
is written as in YAML (`osd.objectStore`, `workloads.0.options.numjobs`); whether the
result is a valid run is the BenchmarkRun's own validation, applied to each variant by
plan.study before anything starts.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import Field, JsonValue, field_validator

from crimsonbench.errors import InvalidSpec
from crimsonbench.spec.api import STUDY_KIND
from crimsonbench.spec.base import DNS_LABEL_PATTERN, RuledModel, SpecModel
from crimsonbench.spec.models import BenchmarkRunSpec, read_manifest, validate_as
from crimsonbench.spec.rules import Rule

# A variant's run is `<study>-<variant>[-r<repeat>]` (or `<study>-v<i>[-r<repeat>]` when
# that is too long): the study's name leaves room for the suffix within a run's 50.
MAX_STUDY_NAME = 40
MAX_VARIANT_NAME = 40
MAX_AXES = 4
MAX_VALUES = 16
MAX_VARIANTS = 64  # runs one after another: 64 reference sweeps is weeks already
MAX_REPEATS = 10
# A spec field as YAML names it: camelCase names and list indexes, dot-separated.
FIELD_PATH_PATTERN = r"^[a-zA-Z][a-zA-Z0-9]*(\.([a-zA-Z][a-zA-Z0-9]*|[0-9]+))*$"
# a value of whatever the field takes
_ANY: dict[str, JsonValue] = {"x-kubernetes-preserve-unknown-fields": True}


class StudyAxis(SpecModel):
    """One axis of a product: a spec field and the values it takes in turn."""

    field: str = Field(
        pattern=FIELD_PATH_PATTERN,
        min_length=1,
        max_length=200,
        description="The spec field, as in YAML: osd.objectStore, osd.reactorsPerOsd, "
        "client.images, workloads.0.options.numjobs",
    )
    values: list[Any] = Field(
        min_length=1, max_length=MAX_VALUES, json_schema_extra={"items": _ANY}
    )
    label: str | None = Field(
        default=None,
        max_length=20,
        pattern=DNS_LABEL_PATTERN,
        description="Names the axis in variant names (default: the field's last part)",
    )


class StudyVariant(SpecModel):
    """One variant, listed by hand: its name and the fields it sets on the base."""

    name: str = Field(min_length=1, max_length=MAX_VARIANT_NAME, pattern=DNS_LABEL_PATTERN)
    settings: dict[str, Any] = Field(
        default_factory=dict,
        alias="set",
        max_length=32,
        json_schema_extra={"additionalProperties": _ANY},
        description="Spec fields (as in YAML, e.g. osd.flavor) and their values; "
        "empty: the base itself",
    )

    @field_validator("settings")
    @classmethod
    def _fields_as_in_yaml(cls, settings: dict[str, Any]) -> dict[str, Any]:
        # Python only: the API server's CEL cannot see a map whose values have no type
        # (any value a field takes), so the operator refuses such a study at its first tick
        bad = [k for k in settings if len(k) > 200 or not re.fullmatch(FIELD_PATH_PATTERN, k)]
        if bad:
            raise ValueError(
                f"{bad[0]!r} is not a spec field as YAML writes it: camelCase names and list "
                "indexes joined by '.', e.g. osd.objectStore or workloads.0.bs"
            )
        return settings


STUDY_RULES = (
    Rule(
        cel="(has(self.vary) && self.vary.size() > 0) != "
        "(has(self.variants) && self.variants.size() > 0)",
        message="give either vary (axes, every combination runs) or variants (a list), "
        "not both and not neither",
        field="vary",
        check=lambda s: bool(s.vary) != bool(s.variants),
    ),
    Rule(
        cel="!has(self.vary) || self.vary.all(a, self.vary.filter(b, b.field == a.field)"
        ".size() == 1)",
        message="each field is one axis: merge the values of the axes that name it",
        field="vary",
        check=lambda s: len({a.field for a in s.vary}) == len(s.vary),
    ),
    Rule(
        cel="!has(self.variants) || self.variants.all(a, "
        "self.variants.filter(b, b.name == a.name).size() == 1)",
        message="variant names must be unique",
        field="variants",
        check=lambda s: len({v.name for v in s.variants}) == len(s.variants),
    ),
    Rule(
        cel="!has(self.baseline) || !has(self.variants) || self.variants.size() == 0 || "
        "self.variants.exists(v, v.name == self.baseline)",
        message="baseline must be the name of one of the variants",
        field="baseline",
        check=lambda s: (
            s.baseline is None or not s.variants or s.baseline in {v.name for v in s.variants}
        ),
    ),
)


class BenchmarkStudySpec(RuledModel):
    """spec of a BenchmarkStudy: a base run, its variants, repeats and the baseline."""

    RULES = STUDY_RULES

    base: BenchmarkRunSpec = Field(description="The BenchmarkRun spec every variant starts from")
    vary: list[StudyAxis] = Field(
        default_factory=list,
        max_length=MAX_AXES,
        description="Axes: every combination of their values is a variant",
    )
    variants: list[StudyVariant] = Field(
        default_factory=list, max_length=MAX_VARIANTS, description="Variants listed by hand"
    )
    repeats: int = Field(
        default=1,
        ge=1,
        le=MAX_REPEATS,
        description="Runs per variant, interleaved (A B C A B C): the order that spreads a "
        "noisy machine's drift over every variant alike",
    )
    baseline: str | None = Field(
        default=None,
        max_length=MAX_VARIANT_NAME,
        description="The variant the others are judged against (default: the first)",
    )


def validate_study_name(name: str) -> str:
    if len(name) > MAX_STUDY_NAME:
        raise InvalidSpec(
            "metadata.name",
            f"{name!r} has {len(name)} characters; a study's name has at most "
            f"{MAX_STUDY_NAME}, so its runs' names (<study>-<variant>) fit in 50",
        )
    return name


def load_study(path: str | Path) -> tuple[str, BenchmarkStudySpec]:
    """Read a BenchmarkStudy YAML (the file kubectl would apply, or `crimsonbench study`
    runs here). Bounded and checked like load_spec; variants are checked by plan.study."""
    name, spec = read_manifest(path, STUDY_KIND)
    return validate_study_name(name), validate_as(BenchmarkStudySpec, spec)


def axis_label(axis: StudyAxis) -> str:
    """The axis's name in variant names: its label, or its field's last part in lower
    case (osd.objectStore -> objectstore; workloads.0.options.bs -> bs)."""
    if axis.label:
        return axis.label
    last = [p for p in axis.field.split(".") if not p.isdigit()][-1]
    return re.sub(r"[^a-z0-9]", "", last.lower()) or "axis"
