"""A BenchmarkStudy against a real API server, with the operator under the chart's RBAC:
the study creates its runs one at a time in the interleaved order, owned by it; a run that
fails is a finding and the study goes on to the end; a run of a child's name that is not
the study's is never adopted; the spec it was accepted with cannot be edited; and
deleting the study deletes its runs (the garbage collector, through the owner
references). The runs' targets are clusters the chart does not list, so each run fails
at once (no kubelet runs pods here); the study on a live Rook is tests/kind's."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import kubernetes.client
import pytest
from kopf.testing import KopfRunner
from kubernetes.client.exceptions import ApiException
from test_operator import (  # noqa: F401 - fixtures
    OTHER_ROOK_NS,
    RUN_NS,
    G,
    V,
    admin,
    metrics_port,
    operator,
    run_body,
    wait_for,
)

pytestmark = pytest.mark.k8s


def study_body(name: str) -> dict[str, Any]:
    base = copy.deepcopy(run_body("unused")["spec"])
    base["target"]["rook"].update(namespace=OTHER_ROOK_NS, clusterName="other")
    return {
        "apiVersion": f"{G}/{V}",
        "kind": "BenchmarkStudy",
        "metadata": {"name": name, "namespace": RUN_NS},
        "spec": {"base": base, "vary": [{"field": "client.images", "values": [1, 2]}],
                 "repeats": 2},
    }  # fmt: skip


def get_study(api: Any, name: str) -> dict[str, Any]:
    return dict(kubernetes.client.CustomObjectsApi(api).get_namespaced_custom_object(
        G, V, RUN_NS, "benchmarkstudies", name))  # fmt: skip


def runs_of(api: Any, study: str) -> dict[str, dict[str, Any]]:
    items = kubernetes.client.CustomObjectsApi(api).list_namespaced_custom_object(
        G, V, RUN_NS, "benchmarkruns", label_selector=f"{G}/study={study}")["items"]  # fmt: skip
    return {i["metadata"]["name"]: i for i in items}


def test_a_study_runs_its_runs_in_order_to_the_end_and_they_go_with_it(
    admin: Any,  # noqa: F811 - test_operator's fixtures
    operator: Callable[[], KopfRunner],  # noqa: F811
) -> None:
    custom = kubernetes.client.CustomObjectsApi(admin)
    with operator():
        created = custom.create_namespaced_custom_object(G, V, RUN_NS, "benchmarkstudies",
                                                         study_body("st"))  # fmt: skip
        uid = created["metadata"]["uid"]
        st = wait_for("the study to end", lambda: (
            (s := get_study(admin, "st").get("status") or {}).get("phase") == "Completed" and s),
            timeout=120)  # fmt: skip
        names = ["st-images-1-r1", "st-images-2-r1", "st-images-1-r2", "st-images-2-r2"]
        assert [r["name"] for r in st["runs"]] == names
        assert [r["phase"] for r in st["runs"]] == ["Failed"] * 4
        assert st["progress"] == "4/4" and st["failedRuns"] == 4
        assert "4 failed" in st["message"] and "fetch-study bench/st" in st["message"]
        runs = runs_of(admin, "st")
        assert sorted(runs) == sorted(names)
        # one at a time: each run was created after the one before it had ended
        order = sorted(runs.values(), key=lambda r: r["metadata"]["creationTimestamp"])
        assert [r["metadata"]["name"] for r in order] == names
        for r in runs.values():
            owner = r["metadata"]["ownerReferences"][0]
            assert (owner["kind"], owner["uid"], owner["controller"]) == ("BenchmarkStudy", uid,
                                                                          True)  # fmt: skip
            assert "may not act on CephCluster rook-b/other" in r["status"]["message"]
        assert runs["st-images-2-r2"]["spec"]["client"]["images"] == 2
        # the spec it was accepted with cannot change
        with pytest.raises(ApiException) as err:
            custom.patch_namespaced_custom_object(G, V, RUN_NS, "benchmarkstudies", "st",
                                                  {"spec": {"repeats": 3}})  # fmt: skip
        assert err.value.status == 422 and "a study runs the spec it was accepted with" in str(
            err.value.body
        )
        custom.delete_namespaced_custom_object(G, V, RUN_NS, "benchmarkstudies", "st")
        wait_for("its runs to go with it", lambda: runs_of(admin, "st") == {}, timeout=120)


def test_a_run_of_a_childs_name_that_is_not_the_studys_is_never_adopted(
    admin: Any,  # noqa: F811 - test_operator's fixtures
    operator: Callable[[], KopfRunner],  # noqa: F811
) -> None:
    custom = kubernetes.client.CustomObjectsApi(admin)
    theirs = run_body("mine-images-1-r1")
    theirs["metadata"]["labels"] = {f"{G}/keep": "yes"}
    theirs["spec"]["target"]["rook"].update(namespace=OTHER_ROOK_NS, clusterName="other")
    custom.create_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", theirs)
    with operator():
        custom.create_namespaced_custom_object(G, V, RUN_NS, "benchmarkstudies",
                                               study_body("mine"))  # fmt: skip
        st = wait_for("the study to fail", lambda: (
            (s := get_study(admin, "mine").get("status") or {}).get("phase") == "Failed" and s),
            timeout=60)  # fmt: skip
        assert (
            "a BenchmarkRun named mine-images-1-r1 exists and is not this study's"
            in (st["message"])
        )
        assert runs_of(admin, "mine") == {}  # nothing created
        kept = custom.get_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns",
                                                   "mine-images-1-r1")  # fmt: skip
        assert "ownerReferences" not in kept["metadata"]
        custom.delete_namespaced_custom_object(G, V, RUN_NS, "benchmarkstudies", "mine")
        custom.delete_namespaced_custom_object(G, V, RUN_NS, "benchmarkruns", "mine-images-1-r1")
        wait_for("gone", lambda: not custom.list_namespaced_custom_object(
            G, V, RUN_NS, "benchmarkruns", field_selector="metadata.name=mine-images-1-r1"
        )["items"], timeout=60)  # fmt: skip


def test_a_study_the_api_server_refuses_names_the_field(admin: Any) -> None:  # noqa: F811
    custom = kubernetes.client.CustomObjectsApi(admin)
    bad = study_body("bad")
    bad["spec"]["variants"] = [{"name": "a", "set": {}}]  # and vary: both given
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object(G, V, RUN_NS, "benchmarkstudies", bad)
    assert err.value.status == 422
    assert "give either vary (axes, every combination runs) or variants" in str(err.value.body)
    long = study_body("x" * 41)
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object(G, V, RUN_NS, "benchmarkstudies", long)
    assert "at most 40 characters" in str(err.value.body)
