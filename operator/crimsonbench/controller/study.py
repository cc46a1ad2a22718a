"""A BenchmarkStudy's tick: read its accepted spec and the BenchmarkRuns of its namespace,
ask controller.decisions.study_decide what comes next, create that run, and say where the study
stands. The runs themselves are ordinary BenchmarkRuns: the run machinery plans, patches,
sweeps and restores each, and the lease keeps them one at a time per cluster.

The study runs the spec it was accepted with (status.acceptedSpec, written at its first
tick): its runs are named and ordered from it, so an edit later would rename or reorder
runs already made. Such an edit is refused with an event and a message."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from crimsonbench.controller.decisions.study_decide import (
    ChildRun,
    CreateRun,
    Finish,
    Refuse,
    WaitFor,
    next_study_action,
    progress,
)
from crimsonbench.controller.kube import Kube
from crimsonbench.controller.kube_errors import Conflict, Forbidden, Invalid
from crimsonbench.errors import InvalidSpec
from crimsonbench.manifests.study import child_run
from crimsonbench.plan.study import StudyRun, expand_study, study_runs
from crimsonbench.spec.api import GROUP, PLURAL, VERSION
from crimsonbench.spec.models import validate_as
from crimsonbench.spec.status import Phase
from crimsonbench.spec.study import BenchmarkStudySpec, validate_study_name
from crimsonbench.spec.study_status import BenchmarkStudyStatus, StudyRunState

EDIT_REFUSED = (
    "the study runs the spec it was accepted with (status.acceptedSpec); this edit is not "
    "applied: create a new BenchmarkStudy for another spec"
)


@dataclass
class StudyTick:
    """What one tick decided: the new status, and events to post (reason, message)."""

    status: BenchmarkStudyStatus
    events: list[tuple[str, str]] = field(default_factory=list)


def tick_study(
    kube: Kube,
    name: str,
    namespace: str,
    uid: str,
    spec: dict[str, Any],
    status: dict[str, Any],
    generation: int,
) -> StudyTick:
    current = BenchmarkStudyStatus.model_validate(status or {})
    out = StudyTick(current.model_copy(deep=True))
    new = out.status
    given = json.dumps(spec, sort_keys=True)
    if not new.accepted_spec:
        new.accepted_spec = given
    elif given != new.accepted_spec and generation != new.observed_generation:
        out.events.append(("EditRefused", EDIT_REFUSED))
    new.observed_generation = generation
    try:
        validate_study_name(name)
        study = validate_as(BenchmarkStudySpec, json.loads(new.accepted_spec))
        variants = expand_study(study)
        runs = study_runs(name, variants, study.repeats)
    except InvalidSpec as exc:
        return _failed(out, str(exc))
    children = _children(kube, namespace, {r.name for r in runs})
    by_variant = {v.name: v for v in variants}
    action = next_study_action(runs, children, uid)
    new.runs = [
        StudyRunState(name=r.name, variant=r.variant, repeat=r.repeat,
                      phase=c.phase if (c := children.get(r.name)) and c.owner_uid == uid else "")
        for r in runs
    ]  # fmt: skip
    new.progress = progress(runs, children, uid)
    new.failed_runs = sum(s.phase == Phase.FAILED.value for s in new.runs)
    match action:
        case CreateRun(run):
            variant = by_variant[run.variant]
            body = child_run(name, namespace, uid, run, variant)
            return _create(kube, out, body, run, variant.describe())
        case WaitFor(run):
            _running(new, run.name, run.variant)
        case Finish(failed):
            new.phase, new.current_run, new.current_variant = Phase.COMPLETED, "", ""
            fetch = f"crimsonbench fetch-study {namespace}/{name} writes the comparison"
            new.message = (
                f"all {len(runs)} runs finished"
                + (f"; {len(failed)} failed: {', '.join(failed)}" if failed else "")
                + f". {fetch}"
            )
        case Refuse(message):
            return _failed(out, message)
    return out


def _create(
    kube: Kube, out: StudyTick, body: dict[str, Any], run: StudyRun, sets: str
) -> StudyTick:
    """The study's next run made; a refusal by admission (the variant is not allowed here)
    fails the study naming it."""
    namespace = body["metadata"]["namespace"]
    try:
        kube.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    except Conflict:  # made meanwhile: the next tick sees whose it is
        return out
    except (Invalid, Forbidden) as exc:  # admission refused the variant
        return _failed(out, f"run {run.name} was refused: {exc.message or exc}")
    out.events.append(
        ("RunCreated", f"{run.name}: variant {run.variant}, repeat {run.repeat} ({sets})")
    )
    _running(out.status, run.name, run.variant)
    return out


def _running(status: BenchmarkStudyStatus, run: str, variant: str) -> None:
    status.phase, status.current_run, status.current_variant = Phase.RUNNING, run, variant
    status.message = f"run {run} (variant {variant}): {status.progress} runs finished"


def _failed(out: StudyTick, message: str) -> StudyTick:
    out.status.phase, out.status.message = Phase.FAILED, message
    out.status.current_run = out.status.current_variant = ""
    out.events.append(("Failed", message))
    return out


def _children(kube: Kube, namespace: str, names: set[str]) -> dict[str, ChildRun]:
    """The BenchmarkRuns of the namespace that bear a name of the study's runs, whoever
    made them (a run of such a name that is not the study's is refused, never adopted)."""
    found = kube.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    out = {}
    for item in found.get("items", []):
        meta = item.get("metadata") or {}
        if meta.get("name") not in names:
            continue
        owners = [o for o in meta.get("ownerReferences") or [] if o.get("controller")]
        status = item.get("status") or {}
        out[meta["name"]] = ChildRun(
            name=meta["name"],
            owner_uid=str(owners[0].get("uid", "")) if owners else "",
            phase=str(status.get("phase") or ""),
            message=str(status.get("message") or ""),
        )
    return out
