"""`crimsonbench fetch-study`: a Kubernetes study's finished runs written as a local study
directory (study.json, runs/<run>/), so its comparison is made exactly as a local study's."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crimsonbench.controller.fetch import FetchedRun, FetchError, fetch_run, write_results_dir
from crimsonbench.errors import InvalidSpec
from crimsonbench.plan.study import StudyRun, Variant, expand_study, study_runs
from crimsonbench.results.safe_files import write_atomic
from crimsonbench.results.store import ResultStore
from crimsonbench.spec.api import GROUP, STUDY_KIND, STUDY_PLURAL, VERSION
from crimsonbench.spec.models import validate_as
from crimsonbench.spec.status import Phase
from crimsonbench.spec.study import BenchmarkStudySpec


@dataclass
class FetchedStudy:
    name: str
    namespace: str
    spec: BenchmarkStudySpec
    variants: list[Variant]
    runs: list[StudyRun]
    phases: dict[str, str]  # run -> its phase as the study's status says ('' = not made)
    fetched: dict[str, FetchedRun] = field(default_factory=dict)  # the completed runs


def fetch_study(api: Any, namespace: str, name: str) -> FetchedStudy:
    from kubernetes import client

    from crimsonbench.controller.kube_errors import Gone, KubeError, Typed

    try:
        obj: dict[str, Any] = Typed(client.CustomObjectsApi(api)).get_namespaced_custom_object(
            GROUP, VERSION, namespace, STUDY_PLURAL, name
        )
    except Gone as exc:
        raise FetchError(f"no BenchmarkStudy {name} in namespace {namespace} "
                         f"(kubectl get bs -n {namespace})") from exc  # fmt: skip
    except KubeError as exc:
        raise FetchError(f"cannot read BenchmarkStudy {namespace}/{name}: {exc}") from exc
    status = obj.get("status") or {}
    raw = status.get("acceptedSpec")
    try:
        spec = validate_as(BenchmarkStudySpec, json.loads(raw) if raw else obj.get("spec"))
        variants = expand_study(spec)
    except (InvalidSpec, ValueError) as exc:
        raise FetchError(f"BenchmarkStudy {namespace}/{name} cannot be read: {exc}") from exc
    runs = study_runs(name, variants, spec.repeats)
    phases = {str(r.get("name")): str(r.get("phase") or "") for r in status.get("runs") or []
              if isinstance(r, dict)}  # fmt: skip
    study = FetchedStudy(name, namespace, spec, variants, runs, phases)
    for run in runs:
        if phases.get(run.name) == Phase.COMPLETED.value:
            study.fetched[run.name] = fetch_run(api, namespace, run.name)
    return study


def write_study_dir(study: FetchedStudy, root: Path) -> dict[str, list[Path]]:
    """runs/<run>/ for each completed run and study.json; variant -> its runs' dirs."""
    dirs: dict[str, list[Path]] = {v.name: [] for v in study.variants}
    for run in study.runs:
        fetched = study.fetched.get(run.name)
        if fetched is None:
            continue
        store = ResultStore(root / "runs" / run.name)
        if store.read_spec() not in (None, fetched.spec):
            raise FetchError(f"{store.root} holds results of another spec; pick another --results")
        write_results_dir(fetched, store)
        dirs[run.variant].append(store.root)
    record = {
        "kind": STUDY_KIND,
        "name": study.name,
        "source": f"{study.namespace}/{study.name}",
        "spec": study.spec.model_dump(mode="json", by_alias=True),
        "variants": [{"name": v.name, "sets": v.describe()} for v in study.variants],
        "runs": [
            {
                "name": r.name,
                "variant": r.variant,
                "repeat": r.repeat,
                "phase": study.phases.get(r.name, ""),
            }
            for r in study.runs
        ],  # fmt: skip
    }
    write_atomic(root / "study.json", json.dumps(record, indent=2) + "\n")
    return dirs
