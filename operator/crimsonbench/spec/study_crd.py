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
    STUDY_KIND,
    STUDY_PLURAL,
    STUDY_SHORT_NAMES,
    STUDY_SINGULAR,
)
from crimsonbench.spec.crd import custom_resource, schema_of
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
    frozen = {"rule": f"!({accepted}) || self.spec == oldSelf.spec", "message": FROZEN_MESSAGE,
              "fieldPath": ".spec"}  # fmt: skip
    return custom_resource(
        STUDY_KIND, STUDY_PLURAL, STUDY_SINGULAR, STUDY_SHORT_NAMES,
        "Variants of a BenchmarkRun, run one after another and compared.", _columns(),
        [NAME_RULE, frozen], schema_of(BenchmarkStudySpec), schema_of(BenchmarkStudyStatus),
    )  # fmt: skip


def render_study_crd() -> str:
    header = (
        "# Generated from crimsonbench.spec.study by `python -m crimsonbench.spec.study_crd`.\n"
    )
    header += "# Do not edit by hand: change the models and regenerate.\n"
    return header + yaml.safe_dump(build_study_crd(), sort_keys=False, width=100)


if __name__ == "__main__":
    sys.stdout.write(render_study_crd())
