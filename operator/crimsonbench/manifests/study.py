"""A study's child BenchmarkRun: the variant's spec, named and labelled for the study,
owned by it (deleting the study deletes its runs, and each run's own finalizer restores
its cluster first)."""

from __future__ import annotations

from typing import Any

from crimsonbench.manifests.naming import APP, LABEL_MANAGED_BY, LABEL_NAME, label_value
from crimsonbench.plan.study import StudyRun, Variant
from crimsonbench.spec.api import API_VERSION, GROUP, KIND, STUDY_KIND

LABEL_STUDY = f"{GROUP}/study"
LABEL_VARIANT = f"{GROUP}/variant"
LABEL_REPEAT = f"{GROUP}/repeat"


def child_run(
    study: str, namespace: str, study_uid: str, run: StudyRun, variant: Variant
) -> dict[str, Any]:
    """The BenchmarkRun of one variant's repeat. Its spec is what the variant sets on the
    base, as written (the API server fills in the defaults, as for a user's run)."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": run.name,
            "namespace": namespace,
            "labels": {
                LABEL_NAME: APP,
                LABEL_MANAGED_BY: "crimsonbench-operator",
                LABEL_STUDY: label_value(study),
                LABEL_VARIANT: label_value(variant.name),
                LABEL_REPEAT: str(run.repeat),
            },
            "annotations": {f"{GROUP}/variant-sets": variant.describe()[:4096]},
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": STUDY_KIND,
                    "name": study,
                    "uid": study_uid,
                    "controller": True,
                }
            ],
        },
        "spec": variant.spec.model_dump(mode="json", by_alias=True, exclude_unset=True),
    }
