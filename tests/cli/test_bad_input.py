"""Bad input at the command line: one readable message naming the field or the line, a
non-zero exit, and never a traceback. Each row is something a user really types."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crimsonbench.cli import app
from crimsonbench.results.store import ResultStore
from crimsonbench.results.types import RunInfo

GOOD = """\
apiVersion: bench.crimson.ceph.io/v1alpha1
kind: BenchmarkRun
metadata:
  name: quick
spec:
  target: {local: {}}
  osd: {flavor: classic, objectStore: memstore, count: 1, cpuSet: "0"}
  client: {cpuSet: "1", images: 1, imageSize: 256Mi}
  sweep: {iodepths: [1], runtimeSeconds: 5}
"""


def spec_with(**spec_yaml: str) -> str:
    """GOOD with whole top-level sections of spec replaced (flow YAML strings)."""
    lines = GOOD.splitlines()
    out = []
    for line in lines:
        key = line.strip().split(":", 1)[0]
        if line.startswith("  ") and key in spec_yaml:
            out.append(f"  {key}: {spec_yaml.pop(key)}")
        else:
            out.append(line)
    out += [f"  {k}: {v}" for k, v in spec_yaml.items()]
    return "\n".join(out) + "\n"


# (id, spec file text, words the message must contain: the field or the line)
SPEC_CASES = [
    (
        "yaml-unclosed-brace",
        GOOD.replace("imageSize: 256Mi}", "imageSize: 256Mi"),
        ["line 9, column 8", "not valid YAML"],
    ),
    (
        "yaml-tab-indent",
        GOOD.replace("  name: quick", "\tname: quick"),
        ["line 4", "not valid YAML"],
    ),
    ("yaml-top-level-list", "- kind: BenchmarkRun\n", ["not a BenchmarkRun manifest"]),
    ("wrong-kind", GOOD.replace("kind: BenchmarkRun", "kind: Pod"), ["kind", "'Pod'"]),
    ("no-kind", GOOD.replace("kind: BenchmarkRun\n", ""), ["kind", "no kind"]),
    ("wrong-api-version", GOOD.replace("v1alpha1", "v9"), ["apiVersion", "v9"]),
    ("no-name", GOOD.replace("  name: quick\n", "  labels: {}\n"), ["metadata.name"]),
    ("spec-is-a-list", GOOD.split("spec:")[0] + "spec: [1, 2]\n", ["spec", "mapping"]),
    (
        "every-bad-field-at-once",
        spec_with(
            osd="{flavor: bogus, count: 0}",
            client='{cpuSet: "3-1", images: 0}',
            sweep="{iodepths: [1, 1]}",
        ),
        [
            "spec.osd.flavor",
            "spec.osd.count",
            "spec.client.cpuSet",
            "runs backwards",
            "spec.client.images",
            "spec.sweep.iodepths",
        ],
    ),
    (
        "typo-in-a-field",
        spec_with(osd="{flavor: classic, objectStore: memstore, reactor: 2}"),
        ["spec.osd.reactor", "not a field"],
    ),
    (
        "cpuset-not-a-list",
        spec_with(client='{cpuSet: "one-two"}'),
        ["spec.client.cpuSet", "not a CPU list"],
    ),
    (
        "cpu-sets-overlap",
        spec_with(client='{cpuSet: "0-1"}'),
        ["spec.client.cpuSet", "share CPUs 0"],
    ),
    (
        "reactors-on-classic",
        spec_with(osd="{flavor: classic, objectStore: memstore, reactors: 2}"),
        ["spec.osd.reactors", "classic"],
    ),
    (
        "two-targets",
        spec_with(target="{local: {}, rook: {clusterName: c}}"),
        ["spec.target", "exactly one"],
    ),
    (
        "custom-workload-without-bs",
        spec_with(workloads="[{name: mixed, rw: randrw}]"),
        ["spec.workloads[0]", "name, rw and bs"],
    ),
    (
        "percentile-not-recorded",
        spec_with(sweep="{latencyTarget: {percentile: 95, latencyMs: 2}}"),
        ["spec.sweep.latencyTarget.percentile", "95"],
    ),
    (
        "size-without-unit",
        spec_with(client='{cpuSet: "1", imageSize: "2G"}'),
        ["spec.client.imageSize", "Mi, Gi or Ti"],
    ),
]


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    text = result.output  # stdout and stderr, as a user sees them
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"crashed with {result.exception!r}:\n{text}")
    return result.exit_code, text


@pytest.mark.parametrize(
    ("text", "words"), [c[1:] for c in SPEC_CASES], ids=[c[0] for c in SPEC_CASES]
)
def test_a_bad_spec_is_refused_naming_the_field_or_line(
    tmp_path: Path, text: str, words: list[str]
) -> None:
    spec = tmp_path / "run.yaml"
    spec.write_text(text)
    code, out = _run("plan", str(spec))
    assert code == 2, out
    assert "Traceback" not in out
    assert out.startswith("error: "), out
    for word in words:
        assert word in out, f"{word!r} not in: {out}"


def _results_dir(root: Path) -> Path:
    ResultStore(root).write_run_info(RunInfo("r", "classic", "memstore", 1, 0, "default", "dual"))
    return root


def _path_cases(tmp: Path) -> list[tuple[str, list[str], list[str]]]:
    a_file = tmp / "file.txt"
    a_file.write_text("x")
    empty = tmp / "empty"
    empty.mkdir()
    good = _results_dir(tmp / "good")
    return [
        ("spec-file-missing", ["plan", str(tmp / "nope.yaml")], ["nope.yaml", "cannot read"]),
        ("report-missing-dir", ["report", str(tmp / "nope")], ["nope", "not a directory"]),
        ("report-a-file", ["report", str(a_file)], ["file.txt", "not a directory"]),
        ("report-not-results", ["report", str(empty)], ["empty", "not a results directory"]),
        ("compare-one-dir", ["compare", str(good)], ["at least two"]),
        ("compare-a-bad-dir", ["compare", str(good), str(empty)], ["not a results directory"]),
        (
            "lscpu-json-missing",
            ["plan", "--lscpu-json", str(tmp / "x.json"), str(a_file)],
            ["file.txt"],
        ),
    ]


CASE_IDS = [
    "spec-file-missing",
    "report-missing-dir",
    "report-a-file",
    "report-not-results",
    "compare-one-dir",
    "compare-a-bad-dir",
    "lscpu-json-missing",
]


@pytest.mark.parametrize("case", CASE_IDS)
def test_a_bad_path_is_refused_naming_it(tmp_path: Path, case: str) -> None:
    cases = {c[0]: c for c in _path_cases(tmp_path)}
    _, args, words = cases[case]
    code, out = _run(*args)
    assert code == 2, out
    assert "Traceback" not in out
    for word in words:
        assert word in out, f"{word!r} not in: {out}"


def test_the_table_has_at_least_fifteen_rows() -> None:
    assert len(SPEC_CASES) + len(CASE_IDS) >= 15


def test_lscpu_json_that_is_not_lscpu_names_the_fix(tmp_path: Path) -> None:
    spec = tmp_path / "run.yaml"
    spec.write_text(GOOD)
    bad = tmp_path / "lscpu.json"
    bad.write_text(textwrap.dedent('{"cpus": [}'))
    code, out = _run("plan", "--lscpu-json", str(bad), str(spec))
    assert code != 0 and "Traceback" not in out
    assert "lscpu" in out


@pytest.mark.parametrize(
    ("args", "words"),
    [
        # NS/RUN: namespace "..", run "../etc"
        (["fetch", "../../etc"], ["error: RUN: '../etc' may not contain '.', '/'"]),
        (["fetch", "/abs"], ["error: --namespace: '' is not a valid name"]),
        (["fetch", "ns/a" + "b" * 60], ["error: RUN: ", "more than 50"]),
        (["fetch", "-n", "Bad NS", "run"], ["error: --namespace: 'Bad NS' is not a valid name"]),
    ],
    ids=["run-climbs", "empty-namespace", "run-too-long", "namespace-upper"],
)
def test_fetch_refuses_names_the_api_server_would_not_have(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], words: list[str]
) -> None:
    """The run's name becomes results/<run>: refused before any path or cluster is used."""
    monkeypatch.chdir(tmp_path)
    code, out = _run(*args)
    assert code == 2, out
    for word in words:
        assert word in out, out
    assert list(tmp_path.iterdir()) == []


def test_a_study_with_an_unreadable_stored_baseline_is_refused_before_any_run(
    tmp_path: Path,
) -> None:
    study = Path(__file__).resolve().parents[2] / (
        "operator/crimsonbench/examples/studies/memstore-vs-bluestore.yaml"
    )
    out = tmp_path / "study"
    result = CliRunner().invoke(app, ["study", str(study), "--results", str(out),
                                      "--baseline", str(tmp_path / "nowhere")])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "--baseline" in result.output and "nowhere" in result.output
    assert not out.exists()
