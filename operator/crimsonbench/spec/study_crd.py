"""Generate the BenchmarkStudy CRD from the pydantic models (as spec.crd does the
BenchmarkRun's): the base is a whole BenchmarkRun spec, with its own CEL rules.

`python -m crimsonbench.spec.study_crd > crds/benchmarkstudy.yaml` regenerates the
checked-in file; tests/spec/test_crd.py fails when the two differ.
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

from crimsonbench.spec.api import (
    GROUP,
    STUDY_KIND,
    STUDY_PLURAL,
    STUDY_SHORT_NAMES,
    STUDY_SINGULAR,
    VERSION,
)
from crimsonbench.spec.crd import schema_of
from crimsonbench.spec.study import MAX_STUDY_NAME, BenchmarkStudySpec
from crimsonbench.spec.study_status import BenchmarkStudyStatus

NAME_RULE = {
    "rule": f"size(self.metadata.name) <= {MAX_STUDY_NAME}",
    "message": f"a study's name has at most {MAX_STUDY_NAME} characters, so its runs' "
    "names (<study>-<variant>) fit in 50",
    "fieldPath": ".metadata.name",
}
FROZEN_MESSAGE = (
    "a study runs the spec it was accepted with (status.acceptedSpec): create a new "
    "BenchmarkStudy for another spec"
)


def _columns() -> list[dict[str, Any]]:
    return [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Runs", "type": "string", "jsonPath": ".status.progress"},
        {"name": "Variant", "type": "string", "jsonPath": ".status.currentVariant"},
        {"name": "Run", "type": "string", "jsonPath": ".status.currentRun"},
        {"name": "Failed", "type": "integer", "jsonPath": ".status.failedRuns"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]


def build_study_crd() -> dict[str, Any]:
    accepted = ("has(oldSelf.status) && has(oldSelf.status.acceptedSpec) && "
                "size(oldSelf.status.acceptedSpec) > 0")  # fmt: skip
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{STUDY_PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": STUDY_KIND,
                "listKind": f"{STUDY_KIND}List",
                "plural": STUDY_PLURAL,
                "singular": STUDY_SINGULAR,
                "shortNames": list(STUDY_SHORT_NAMES),
                "categories": ["ceph", "benchmark"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": _columns(),
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "Variants of a BenchmarkRun, run one after "
                            "another and compared.",
                            "required": ["spec"],
                            "x-kubernetes-validations": [
                                NAME_RULE,
                                {
                                    "rule": f"!({accepted}) || self.spec == oldSelf.spec",
                                    "message": FROZEN_MESSAGE,
                                    "fieldPath": ".spec",
                                },
                            ],  # fmt: skip
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {
                                    "type": "object",
                                    "properties": {"name": {"type": "string"}},
                                },
                                "spec": schema_of(BenchmarkStudySpec),
                                "status": schema_of(BenchmarkStudyStatus),
                            },
                        }
                    },
                }
            ],
        },
    }


def render_study_crd() -> str:
    header = (
        "# Generated from crimsonbench.spec.study by `python -m crimsonbench.spec.study_crd`.\n"
    )
    header += "# Do not edit by hand: change the models and regenerate.\n"
    return header + yaml.safe_dump(build_study_crd(), sort_keys=False, width=100)


if __name__ == "__main__":
    sys.stdout.write(render_study_crd())
