"""Reading a manifest file (BenchmarkRun, BenchmarkStudy): bounded before it is parsed,
its kind, apiVersion and name checked, its spec returned for the model to validate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from crimsonbench.errors import InvalidSpec
from crimsonbench.spec.api import API_VERSION
from crimsonbench.spec.base import short
from crimsonbench.spec.names import validate_name
from crimsonbench.spec.yamlload import MAX_SPEC_BYTES, load_yaml


def read_manifest(path: str | Path, kind: str) -> tuple[str, dict[str, Any]]:
    """A manifest of `kind` (BenchmarkRun, BenchmarkStudy): its checked name and its
    spec, not yet validated. Bounded as load_spec says."""
    text = _read_bounded(Path(path))
    try:
        doc = load_yaml(text)
    except yaml.YAMLError as exc:
        raise InvalidSpec(str(path), _yaml_problem(exc)) from None
    if not isinstance(doc, dict):
        raise InvalidSpec(
            str(path),
            f"is not a {kind} manifest: expected a YAML mapping with kind, metadata and spec",
        )
    unknown = sorted(str(k) for k in doc if k not in _MANIFEST_KEYS)
    if unknown:
        raise InvalidSpec(
            short(unknown[0], 40).strip("'\""),
            f"is not a field of a {kind} manifest (it has {', '.join(_MANIFEST_KEYS)}); "
            "check the spelling",
        )
    if doc.get("kind") != kind:
        found = f"kind {short(doc['kind'])}" if "kind" in doc else "no kind"
        raise InvalidSpec("kind", f"{path} has {found}; a {kind} manifest says kind: {kind}")
    if doc.get("apiVersion") not in (None, API_VERSION):
        raise InvalidSpec(
            "apiVersion",
            f"{short(doc['apiVersion'])} is not served; write apiVersion: {API_VERSION}",
        )
    metadata = doc.get("metadata")
    if not isinstance(metadata, dict):
        raise InvalidSpec("metadata.name", f"give the {kind} a name (metadata: {{name: ...}})")
    name = validate_name(metadata.get("name"))
    spec = doc.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise InvalidSpec("spec", f"must be a mapping of fields, not {type(spec).__name__}")
    return name, spec


_MANIFEST_KEYS = ("apiVersion", "kind", "metadata", "spec", "status")


def _read_bounded(path: Path) -> str:
    """The file's text, refused before parsing when it is over MAX_SPEC_BYTES."""
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise InvalidSpec(str(path), f"cannot read the file: {exc}") from None
    if len(data) > MAX_SPEC_BYTES:
        raise InvalidSpec(
            str(path),
            f"is larger than {MAX_SPEC_BYTES // 2**20} MiB ({MAX_SPEC_BYTES:,} bytes), the "
            "most a BenchmarkRun spec may be; a real one is a few hundred bytes",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidSpec(str(path), f"is not UTF-8 text: {exc}") from None


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """ "line L, column C: what is wrong", from PyYAML's marks (0-based)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}not valid YAML ({problem})"
