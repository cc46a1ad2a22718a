"""Hostile command-line input (issue 36, class 11): each is one error naming the option
that is wrong, exit 2, and nothing written; before, a traceback, the wrong field blamed,
or a results directory overwritten."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from results_fixture import copy_run
from typer.testing import CliRunner

from crimsonbench.cli import app

LSCPU = Path(__file__).parents[1] / "fixtures" / "lscpu" / "single-socket-8-noht.json"
CLASSIC = """\
apiVersion: bench.crimson.ceph.io/v1alpha1
kind: BenchmarkRun
metadata: {name: edges}
spec:
  target: {local: {}}
  osd: {flavor: classic, objectStore: memstore, cpuSet: "0"}
  client: {cpuSet: "1", images: 1, imageSize: 256Mi}
"""
CRIMSON = CLASSIC.replace("flavor: classic, objectStore: memstore", "flavor: crimson, "
                          "objectStore: cyanstore")  # fmt: skip


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"crashed with {result.exception!r}:\n{result.output}")
    return result.exit_code, result.output


def one_error(out: str) -> str:
    """The single `error:` line (continuations indented), never a traceback."""
    assert "Traceback" not in out, out
    errors = [ln for ln in out.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, out
    return errors[0]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"[" * 100_000 + b"]" * 100_000, ["nests too deep"]),
        (b'{"cpus": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", ["nests too deep"]),
        (b'{"a":' * 50_000 + b"1" + b"}" * 50_000, ["nests too deep"]),
        (b"\xff\xfe{\x00}\x00", ["not text", "not UTF-8"]),
        (LSCPU.read_bytes() + b" " * (17 * 2**20), ["larger than 16 MiB"]),
    ],
    ids=["nested-lists", "nested-cpus", "nested-objects", "utf16", "17-MiB"],
)
def test_an_lscpu_json_that_is_not_lscpus_table_is_one_error(
    tmp_path: Path, content: bytes, words: list[str]
) -> None:
    spec, lscpu = tmp_path / "run.yaml", tmp_path / "lscpu.json"
    spec.write_text(CLASSIC)
    lscpu.write_bytes(content)
    code, out = cli("plan", str(spec), "--lscpu-json", str(lscpu))
    line = one_error(out)
    assert code == 2 and line.startswith(f"error: --lscpu-json {lscpu}: "), out
    for word in words:
        assert word in out, out


def test_lscpu_json_from_an_endless_device_is_refused_after_16_mib(tmp_path: Path) -> None:
    spec = tmp_path / "run.yaml"
    spec.write_text(CLASSIC)
    code, out = cli("plan", str(spec), "--lscpu-json", "/dev/zero")
    assert code == 2 and "larger than 16 MiB" in one_error(out), out


@pytest.mark.parametrize("spec_text", [CLASSIC, CRIMSON], ids=["classic", "crimson"])
@pytest.mark.parametrize("version", ["banana", "", "1" * 5000 + ".2", "v.2"])
def test_a_ceph_version_that_is_none_blames_the_option(
    tmp_path: Path, spec_text: str, version: str
) -> None:
    spec = tmp_path / "run.yaml"
    spec.write_text(spec_text)
    code, out = cli("plan", str(spec), "--lscpu-json", str(LSCPU), "--ceph-version", version)
    line = one_error(out)
    assert code == 2 and line.startswith("error: --ceph-version "), out
    assert "spec.osd.cephVersion" not in out


def test_a_ceph_version_that_is_one_plans(tmp_path: Path) -> None:
    spec = tmp_path / "run.yaml"
    spec.write_text(CRIMSON)
    code, out = cli("plan", str(spec), "--lscpu-json", str(LSCPU), "--ceph-version", "20.2.4")
    assert code == 0, out
    assert "crimson_seastar_cpu_cores" in out


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.mark.parametrize("where", ["base", "base/report", "new/steps", "other", "other/x/y"])
def test_compare_out_inside_a_results_directory_is_refused_untouched(
    tmp_path: Path, where: str
) -> None:
    """--out in a compared run (or any results directory: its marker) would put the
    comparison's files among that run's own; refused, every directory as it was."""
    base, new = copy_run(tmp_path / "base"), copy_run(tmp_path / "new")
    other = copy_run(tmp_path / "other")  # not compared, but a results directory
    (other / ".crimsonbench-results").write_text("crimsonbench results directory\n")
    before = {d: _digest(d) for d in (base, new, other)}
    code, out = cli("compare", str(base), str(new), "--out", str(tmp_path / where))
    line = one_error(out)
    assert code == 2 and line.startswith(f"error: --out {tmp_path / where} is inside"), out
    assert {d: _digest(d) for d in (base, new, other)} == before


def test_compare_out_through_a_link_into_a_run_is_refused(tmp_path: Path) -> None:
    base, new = copy_run(tmp_path / "base"), copy_run(tmp_path / "new")
    (tmp_path / "sneaky").symlink_to(base / "report", target_is_directory=True)
    before = _digest(base)
    code, out = cli("compare", str(base), str(new), "--out", str(tmp_path / "sneaky"))
    assert code == 2 and "is inside the results directory" in one_error(out), out
    assert _digest(base) == before
