"""A study's variants and the order its runs go in: pure, before anything starts.

expand_study turns a BenchmarkStudy into named variants, each a BenchmarkRun spec that has
passed the run's own validation (a variant that cannot run is refused here, naming the
variant, the field and the fix, before the first run starts); study_runs orders them
interleaved, repeat by repeat (A B C A B C), each with the name of its own run.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from dataclasses import dataclass
from typing import Any

from crimsonbench.errors import InvalidSpec
from crimsonbench.spec.models import BenchmarkRunSpec, validate_name, validate_spec
from crimsonbench.spec.names import MAX_RUN_NAME
from crimsonbench.spec.study import MAX_VARIANTS, BenchmarkStudySpec, axis_label


@dataclass(frozen=True)
class Variant:
    name: str
    spec: BenchmarkRunSpec
    settings: tuple[tuple[str, Any], ...]  # (field, value) as the study set them

    def describe(self) -> str:
        """`osd.objectStore=bluestore, client.images=4` (`the base` when nothing is set)."""
        return ", ".join(f"{f}={_compact(v)}" for f, v in self.settings) or "the base"


@dataclass(frozen=True)
class StudyRun:
    """One BenchmarkRun of the study: a variant's repeat (1-based)."""

    variant: str
    repeat: int
    name: str  # the run's own name (results directory, child BenchmarkRun)


def expand_study(spec: BenchmarkStudySpec) -> list[Variant]:
    """The variants, in the study's order (the baseline first), each a validated run spec.
    InvalidSpec names every variant that cannot run, and two that would run the same."""
    base = spec.base.model_dump(mode="json", by_alias=True, exclude_unset=True)
    wanted: list[tuple[str, str, tuple[tuple[str, Any], ...]]] = []  # (name, where, settings)
    if spec.vary:
        count = 1
        for axis in spec.vary:
            count *= len(axis.values)
        if count > MAX_VARIANTS:
            sizes = " x ".join(str(len(a.values)) for a in spec.vary)
            raise InvalidSpec(
                "spec.vary",
                f"{sizes} = {count} variants, more than {MAX_VARIANTS}; drop values or "
                "list the variants you want under variants",
            )
        for i, combo in enumerate(itertools.product(*(a.values for a in spec.vary))):
            settings = tuple((a.field, v) for a, v in zip(spec.vary, combo, strict=True))
            name = "-".join(
                f"{axis_label(a)}-{_name_part(v)}" for a, v in zip(spec.vary, combo, strict=True)
            )
            wanted.append((name, f"spec.vary (variant {i + 1}, {name})", settings))
    else:
        for i, v in enumerate(spec.variants):
            wanted.append((v.name, f"spec.variants[{i}] ({v.name})", tuple(v.settings.items())))
    variants, problems = [], []
    for name, where, settings in wanted:
        try:
            variants.append(Variant(name, _variant_spec(base, settings, where), settings))
        except InvalidSpec as exc:
            problems += [(f"{where}: {f}" if f else where, m) for f, m in exc.problems]
    if problems:
        (field, message), *more = problems
        raise InvalidSpec(field, message, more=tuple(more))
    _refuse_duplicates(variants)
    return _baseline_first(variants, spec.baseline)


def study_runs(study_name: str, variants: list[Variant], repeats: int) -> list[StudyRun]:
    """Every run, interleaved: repeat 1 of each variant, then repeat 2 of each, ... Names
    are `<study>-<variant>` (`-r<k>` with repeats); when one would pass a run's 50
    characters, every run is named by the variant's position instead (`<study>-v<i>`)."""

    def name(label: str, repeat: int) -> str:
        return f"{study_name}-{label}" + (f"-r{repeat}" if repeats > 1 else "")

    long = any(len(name(v.name, repeats)) > MAX_RUN_NAME for v in variants)
    runs = []
    for repeat in range(1, repeats + 1):
        for i, v in enumerate(variants):
            run = name(f"v{i + 1}" if long else v.name, repeat)
            runs.append(StudyRun(v.name, repeat, validate_name(run, field="metadata.name")))
    return runs


def study_fingerprint(spec: BenchmarkStudySpec) -> str:
    """The study as JSON, keys sorted: a resumed study must be the same study."""
    return json.dumps(spec.model_dump(mode="json", by_alias=True), sort_keys=True)


def _variant_spec(
    base: dict[str, Any], settings: tuple[tuple[str, Any], ...], where: str
) -> BenchmarkRunSpec:
    doc = copy.deepcopy(base)
    for field, value in settings:
        _set_path(doc, field, value, where)
    return validate_spec(doc)


def _set_path(doc: dict[str, Any], field: str, value: Any, where: str) -> None:
    """doc[field] = value for a dotted path (null removes the field, so its default
    applies: a classic variant of a crimson base drops osd.reactors); numeric parts
    index lists that exist."""
    node: Any = doc
    parts = field.split(".")
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        at = ".".join(parts[: depth + 1])
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise InvalidSpec(
                    f"{where}: {field}",
                    f"{at}: the base's list has {len(node)} items (indexes 0-{len(node) - 1})",
                )
            if last:
                node[int(part)] = copy.deepcopy(value)
            else:
                node = node[int(part)]
            continue
        if not isinstance(node, dict):
            raise InvalidSpec(f"{where}: {field}", f"{at}: the base has a value there, not fields")
        if part.isdigit():
            raise InvalidSpec(f"{where}: {field}", f"{at}: an index where the base has no list")
        if last and value is None:  # null: the field is removed, its default applies
            node.pop(part, None)
        elif last:
            node[part] = copy.deepcopy(value)
        else:
            node = node.setdefault(part, {})


def _refuse_duplicates(variants: list[Variant]) -> None:
    seen: dict[str, str] = {}
    for v in variants:
        key = json.dumps(v.spec.model_dump(mode="json"), sort_keys=True)
        if key in seen:
            raise InvalidSpec(
                "spec",
                f"variants {seen[key]} and {v.name} run the same spec; drop one, or make "
                "them differ (a repeat is spec.repeats)",
            )
        seen[key] = v.name
    names = [v.name for v in variants]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise InvalidSpec(
            "spec.vary",
            f"two variants would be named {clash[0]}; give the axes labels (vary[].label) "
            "or values that differ in letters and digits",
        )


def _baseline_first(variants: list[Variant], baseline: str | None) -> list[Variant]:
    if baseline is None:
        return variants
    chosen = [v for v in variants if v.name == baseline]
    if not chosen:
        raise InvalidSpec(
            "spec.baseline",
            f"{baseline!r} is none of the variants: " + ", ".join(v.name for v in variants),
        )
    return chosen + [v for v in variants if v.name != baseline]


def _name_part(value: Any) -> str:
    """A value in a variant's name: letters and digits, '-' between words (bluestore,
    2, true, 0-3 for "0-3"); objects and lists by their values."""
    text = _compact(value).lower()
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")[:24].strip("-") or "x"


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
