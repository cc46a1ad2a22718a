"""`crimsonbench fetch` against a real API server: a run's objects -> a results directory
that `report` and `compare` read like a local run's.

The run's objects are made by the operator's own builders from real fio output
(tests/fixtures/fio/rbd, captured from fio's rbd engine); the kind e2e
(tests/kind/test_kind_rook_run.py) fetches a run the operator really executed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml
from harness import ControlPlane
from typer.testing import CliRunner

from crimsonbench.cli import app
from crimsonbench.manifests.results import run_configmap, step_configmaps
from crimsonbench.results.fio_json import combine, parse_fio_json
from crimsonbench.results.store import ResultStore
from crimsonbench.results.types import ResourceSummary, RunInfo, StepResult
from crimsonbench.spec.api import GROUP, PLURAL, VERSION

pytestmark = pytest.mark.k8s
FIO = Path(__file__).resolve().parents[1] / "fixtures" / "fio" / "rbd"
NS = "fetch"
SPEC = {
    "target": {
        "external": {"user": "admin", "monHost": "127.0.0.1:6789", "keyringSecret": {"name": "k"}}
    },
    "osd": {"flavor": "classic", "objectStore": "memstore", "count": 1},
    "client": {"node": "n1", "cpuSet": "1", "pool": "bench", "images": 2, "imageSize": "256Mi"},
    "workloads": [{"preset": "randread4k"}, {"preset": "randwrite4k"}],
    "sweep": {"iodepths": [1], "runtimeSeconds": 10},
}


def _step(index: int, workload: str, fixture: str) -> StepResult:
    fio = combine(parse_fio_json((FIO / fixture).read_text()))
    return StepResult(
        f"{index:03d}-{workload}-qd001-r1",
        workload,
        1,
        1,
        fio,
        ResourceSummary(osd_cpu=55.5, osd_mem_mib=700.0, fio_cpu=20.0, samples=9),
        extra={"wall_seconds": 12.5},
    )


STEPS = [_step(0, "randread4k", "randread4k.json"), _step(1, "randwrite4k", "randwrite4k.json")]
INFO = RunInfo("fetched", "classic", "memstore", 1, 0, "default", "dual", "16.2.15", "n1", "t0")


@pytest.fixture(scope="module")
def api(admin: kubernetes.client.ApiClient) -> kubernetes.client.ApiClient:
    kubernetes.client.CoreV1Api(admin).create_namespace({"metadata": {"name": NS}})
    return admin


def _create_run(api: kubernetes.client.ApiClient, name: str, status: dict[str, Any]) -> str:
    """The run, its status as given; its uid (its ConfigMaps are owned by it)."""
    custom = kubernetes.client.CustomObjectsApi(api)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "BenchmarkRun",
        "metadata": {"name": name, "namespace": NS},
        "spec": SPEC,
    }
    made = custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, body)
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, NS, PLURAL, name, {"status": status}
    )
    return str(made["metadata"]["uid"])


def _create_results(
    api: kubernetes.client.ApiClient, name: str, uid: str, steps: list[StepResult]
) -> None:
    """As the operator stores them: owned by the run (only its own are its results)."""
    core = kubernetes.client.CoreV1Api(api)
    owner = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "BenchmarkRun", "name": name,
             "uid": uid}  # fmt: skip
    plan = {"cpu": {"client": "1"}, "steps": [s.step_id for s in STEPS]}
    # a small limit: each step is put back together from several ConfigMaps
    for cm in [run_configmap(name, INFO, plan, namespace=NS),
               *(cm for s in steps for cm in step_configmaps(name, s, namespace=NS,
                                                             limit_bytes=2500))]:  # fmt: skip
        cm["metadata"]["ownerReferences"] = [owner]
        core.create_namespaced_config_map(NS, cm)


def _fetch(cp: ControlPlane, tmp: Path, *args: str) -> tuple[int, str]:
    kubeconfig = cp.kubeconfig(tmp / "kubeconfig")
    result = CliRunner().invoke(app, ["fetch", *args, "--kubeconfig", str(kubeconfig)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"fetch crashed: {result.exception!r}\n{result.output}")
    return result.exit_code, result.output


def test_fetch_writes_a_results_directory_report_and_compare_read(
    api: kubernetes.client.ApiClient, control_plane: ControlPlane, tmp_path: Path
) -> None:
    status = {"phase": "Completed", "stepsTotal": 2, "progress": "2/2", "finishedAt": "t1"}
    uid = _create_run(api, "fetched", status)
    _create_results(api, "fetched", uid, STEPS)
    out = tmp_path / "k8s"
    code, text = _fetch(control_plane, tmp_path, f"{NS}/fetched", "--results", str(out))
    assert code == 0, text
    assert "warning" not in text
    store = ResultStore(out)
    # exactly what the operator stored (compared as JSON: a percentile fio did not report
    # is NaN in memory, and NaN never equals NaN)
    assert [r.to_json_dict() for r in store.load_results()] == [r.to_json_dict() for r in STEPS]
    assert store.read_run_info() == INFO
    assert store.read_spec() is not None and store.read_spec()["osd"]["count"] == 1
    assert store.read_plan() == {"cpu": {"client": "1"}, "steps": [s.step_id for s in STEPS]}
    assert store.read_status().phase == "Completed"

    # the same steps as a local run would have written them
    local = ResultStore(tmp_path / "local")
    local.write_run_info(INFO, {"spec": SPEC})
    for step in STEPS:
        local.write_step(step)
    runner = CliRunner()
    report = runner.invoke(app, ["report", str(out), "--output", "json"])
    assert report.exit_code == 0, report.output
    rows = json.loads(report.output)
    assert [r["iops"] for r in rows] == pytest.approx([s.fio.iops for s in STEPS])
    assert (out / "report" / "summary.md").exists()
    compared = runner.invoke(  # steps without fio's per-second IOPS: untested, allowed
        app, ["compare", str(local.root), str(out), "--out", str(tmp_path / "c"),
              "--allow-untested"]
    )  # fmt: skip
    assert compared.exit_code == 0, compared.output
    text = (tmp_path / "c" / "comparison.md").read_text()
    assert "randread4k" in text and "randwrite4k" in text


def test_a_running_run_fetches_what_exists_and_says_so(
    api: kubernetes.client.ApiClient, control_plane: ControlPlane, tmp_path: Path
) -> None:
    uid = _create_run(
        api, "partial", {"phase": "Running", "stepsTotal": 2, "currentStep": STEPS[1].step_id}
    )
    _create_results(api, "partial", uid, STEPS[:1])
    code, text = _fetch(
        control_plane, tmp_path, "partial", "-n", NS, "--results", str(tmp_path / "p")
    )
    assert code == 0, text
    assert "is Running, not finished: 1 of 2 steps fetched" in text
    assert [r.step_id for r in ResultStore(tmp_path / "p").load_results()] == [STEPS[0].step_id]


def test_fetching_a_run_that_does_not_exist_names_it(
    api: kubernetes.client.ApiClient, control_plane: ControlPlane, tmp_path: Path
) -> None:
    code, text = _fetch(control_plane, tmp_path, "nope", "-n", NS)
    assert code == 2
    assert "no BenchmarkRun nope in namespace fetch" in text and "Traceback" not in text


def test_a_bad_kubeconfig_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "clusters": []}))
    result = CliRunner().invoke(app, ["fetch", "x", "--kubeconfig", str(bad)])
    assert result.exit_code == 2 and "kubeconfig" in result.output
