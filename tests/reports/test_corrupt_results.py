"""`report` and `compare` on corrupted copies of a real results directory
(tests/fixtures/results/gate-1image): each gives one error naming the file and what is
wrong with it (exit 2; several broken steps: every one listed), never a traceback, never
a step dropped in silence, and nothing is written, neither in the directory nor through
a link out of it. Each row breaks one thing the way a careless copy, an editor, a
truncated transfer or a hostile file would."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from results_fixture import STEP_IDS, copy_run, dump, load, result_path
from typer.testing import CliRunner

from crimsonbench.cli import app

S1 = STEP_IDS[1]  # 001-randread4k-qd004-r1
R1 = f"steps/{S1}/result.json"
DEEP = "[" * 100_000 + "]" * 100_000
LINK_TO = "OUTSIDE"  # placeholder in expected messages: the link's target


@dataclass(frozen=True)
class Case:
    id: str
    breaks: Callable[[Path, Path], None]  # (results dir, a scratch dir outside it)
    error: str  # the exact message; {root} and {outside} are filled in
    compare_too: bool = True  # report/ is not read by compare: those rows are report's


def run_json(change: Callable[[dict[str, Any]], Any]) -> Callable[[Path, Path], None]:
    def breaks(root: Path, outside: Path) -> None:
        data = load(root / "run.json")
        replaced = change(data)
        dump(root / "run.json", data if replaced is None else replaced)

    return breaks


def run_json_text(text: str | bytes) -> Callable[[Path, Path], None]:
    def breaks(root: Path, outside: Path) -> None:
        path = root / "run.json"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())

    return breaks


def result(change: Callable[[dict[str, Any]], Any], step: str = S1) -> Callable[[Path, Path], None]:
    def breaks(root: Path, outside: Path) -> None:
        data = load(result_path(root, step))
        replaced = change(data)
        dump(result_path(root, step), data if replaced is None else replaced)

    return breaks


def result_text(text: str | bytes) -> Callable[[Path, Path], None]:
    def breaks(root: Path, outside: Path) -> None:
        path = result_path(root, S1)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())

    return breaks


def replace_number(key: str, literal: str) -> Callable[[Path, Path], None]:
    """fio.<key> written as a JSON literal json.dumps would never produce."""

    def breaks(root: Path, outside: Path) -> None:
        path = result_path(root, S1)
        data = load(path)
        data["fio"][key] = "@@"
        path.write_text(json.dumps(data, indent=2, sort_keys=True).replace('"@@"', literal))

    return breaks


def huge(name: str) -> Callable[[Path, Path], None]:
    """A sparse 1 GiB file: cheap to make, and never to be read whole."""

    def breaks(root: Path, outside: Path) -> None:
        path = root / name
        path.unlink()
        with path.open("wb") as fh:
            fh.truncate(2**30)

    return breaks


def link(name: str, to_dir: bool = False) -> Callable[[Path, Path], None]:
    """root/name replaced by a link to a copy of it outside (a valid file or directory)."""

    def breaks(root: Path, outside: Path) -> None:
        path = root / name
        target = outside / "target"
        if path.is_dir():
            shutil.copytree(path, target)
            shutil.rmtree(path)
        else:
            shutil.copy(path, target)
            path.unlink()
        path.symlink_to(target, target_is_directory=to_dir)

    return breaks


def to_dir(name: str) -> Callable[[Path, Path], None]:
    def breaks(root: Path, outside: Path) -> None:
        (root / name).unlink()
        (root / name).mkdir()

    return breaks


def fifo(root: Path, outside: Path) -> None:
    path = result_path(root, S1)
    path.unlink()
    os.mkfifo(path)


def stray_file(root: Path, outside: Path) -> None:
    (root / "steps" / "notes.txt").write_text("my notes\n")


def steps_a_file(root: Path, outside: Path) -> None:
    shutil.rmtree(root / "steps")
    (root / "steps").write_text("")


def report_link(root: Path, outside: Path) -> None:
    (outside / "elsewhere").mkdir()
    (root / "report").symlink_to(outside / "elsewhere", target_is_directory=True)


def report_file_link(root: Path, outside: Path) -> None:
    (root / "report").mkdir()
    (outside / "precious.txt").write_text("keep me\n")
    (root / "report" / "summary.md").symlink_to(outside / "precious.txt")


def report_a_file(root: Path, outside: Path) -> None:
    (root / "report").write_text("not a directory\n")


def report_png_a_dir(root: Path, outside: Path) -> None:
    (root / "report" / "seqwrite64k_cpu.png").mkdir(parents=True)


def two_broken(root: Path, outside: Path) -> None:
    result_text('{"step_id": ')(root, outside)
    result(lambda d: d["fio"].update(total_ios="22229"), STEP_IDS[3])(root, outside)


def pop(*keys: str) -> Callable[[dict[str, Any]], None]:
    def change(d: dict[str, Any]) -> None:
        for k in keys[:-1]:
            d = d[k]
        del d[keys[-1]]

    return change


def put(*keys: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(d: dict[str, Any]) -> None:
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value

    return change


def digits(n: int) -> str:
    return "1" * n


LEFT_OUT = (
    "{n} step(s) would be left out; nothing was written. Move those step directories out of "
    "steps/ (or run the steps again) to use the rest."
)
NOT_FOLLOWED = "is a symbolic link (to {outside}/target); not followed"
LINK_REFUSED = (
    "is a symbolic link (to {outside}/target); crimsonbench never reads or writes through "
    "a link inside a results directory: replace it with a real directory or file"
)

CASES = [
    # ---- run.json: the run's labels and spec
    Case(
        "run-json-invalid",
        run_json_text("{not json"),
        "{root}/run.json: not valid JSON (Expecting property name enclosed in double quotes: "
        "line 1 column 2)",
    ),
    Case(
        "run-json-null", run_json_text("null"), "{root}/run.json: run.json is null, not an object"
    ),
    Case("run-json-empty", run_json_text(""), "{root}/run.json: is empty"),
    Case(
        "run-json-a-list",
        run_json_text("[1, 2]"),
        "{root}/run.json: run.json is a list, not an object",
    ),
    Case("run-json-directory", to_dir("run.json"), "{root}/run.json: is a directory, not a file"),
    Case("run-json-link-outside", link("run.json"), "{root}/run.json " + LINK_REFUSED),
    Case(
        "run-json-huge",
        huge("run.json"),
        "{root}/run.json: is 1073741824 bytes, more than the 32 MiB such a file can be",
    ),
    Case(
        "run-json-not-utf8",
        run_json_text(b'{"info": "\xff\xfe"}'),
        "{root}/run.json: not UTF-8 text (byte 10)",
    ),
    Case(
        "run-json-deeply-nested",
        run_json_text('{"extra": ' + DEEP + "}"),
        "{root}/run.json: JSON nested too deeply to be a crimsonbench file",
    ),
    Case("run-json-no-info", run_json(pop("info")), "{root}/run.json: info is missing"),
    Case(
        "run-json-info-null",
        run_json(put("info", value=None)),
        "{root}/run.json: info is null, not an object",
    ),
    Case(
        "run-json-osds-a-string",
        run_json(put("info", "osds", value="one")),
        "{root}/run.json: info.osds is a string ('one'), not an integer",
    ),
    Case(
        "run-json-osds-1e400",
        run_json_text(
            '{"info": {"name": "x", "flavor": "classic", "object_store": "m", "osds": 1e400}}'
        ),
        "{root}/run.json: the number 1e400 does not fit a float",
    ),
    Case(
        "run-json-5000-digit-integer",
        run_json_text('{"info": {"osds": ' + digits(5000) + "}}"),
        "{root}/run.json: not usable JSON (Exceeds the limit (4300 digits) for integer string "
        "conversion: value has 5000 digits; use sys.set_int_max_str_digits() to increase the "
        "limit)",
    ),
    Case(
        "run-json-osds-too-large",
        run_json(put("info", "osds", value=10**30)),
        "{root}/run.json: info.osds is 1000000000000000000000000000000, above 1000000",
    ),
    Case(
        "run-json-name-with-a-newline",
        run_json(put("info", "name", value="a\n# fake")),
        "{root}/run.json: info.name is 'a\\n# fake': control characters are not allowed",
    ),
    Case(
        "run-json-name-too-long",
        run_json(put("info", "name", value="x" * 300)),
        "{root}/run.json: info.name is 300 characters long, more than 256",
    ),
    Case(
        "run-json-extra-a-list",
        run_json(put("extra", value=[1])),
        "{root}/run.json: extra is a list, not an object",
    ),
    Case(
        "run-json-nan-literal",
        run_json_text('{"info": {"reactors": NaN}}'),
        "{root}/run.json: NaN is not a number JSON allows (crimsonbench writes null)",
    ),
    # ---- steps/ itself
    Case("steps-link-outside", link("steps", to_dir=True), "{root}/steps " + LINK_REFUSED),
    Case("steps-a-file", steps_a_file, "{root}/steps: is a file, not the steps directory"),
    # ---- one step's result.json
    Case(
        "result-truncated",
        result_text('{\n  "clients": {\n    "client-0": {\n      "bw'),
        "{root}/" + R1 + ": not valid JSON (Unterminated string starting at: line 4 column 7)",
    ),
    Case("result-empty", result_text(""), "{root}/" + R1 + ": is empty"),
    Case(
        "result-null",
        result_text("null"),
        "{root}/" + R1 + ": the step result is null, not an object",
    ),
    Case("result-directory", to_dir(R1), "{root}/" + R1 + ": is a directory, not a file"),
    Case("result-fifo", fifo, "{root}/" + R1 + ": is not a regular file"),
    Case("result-link-outside", link(R1), "{root}/" + R1 + ": " + NOT_FOLLOWED),
    Case(
        "result-huge",
        huge(R1),
        "{root}/" + R1 + ": is 1073741824 bytes, more than the 32 MiB such a file can be",
    ),
    Case(
        "result-deeply-nested",
        result_text('{"extra": ' + DEEP + "}"),
        "{root}/" + R1 + ": JSON nested too deeply to be a crimsonbench file",
    ),
    Case(
        "result-iops-a-string",
        result(put("fio", "iops", value="4444.9")),
        "{root}/" + R1 + ": fio.iops is a string ('4444.9'), not a number",
    ),
    Case(
        "result-iops-null",
        result(put("fio", "iops", value=None)),
        "{root}/" + R1 + ": fio.iops is null, not a number",
    ),
    Case(
        "result-iops-nan",
        replace_number("iops", "NaN"),
        "{root}/" + R1 + ": NaN is not a number JSON allows (crimsonbench writes null)",
    ),
    Case(
        "result-iops-infinity",
        replace_number("iops", "Infinity"),
        "{root}/" + R1 + ": Infinity is not a number JSON allows (crimsonbench writes null)",
    ),
    Case(
        "result-iops-1e400",
        replace_number("iops", "1e400"),
        "{root}/" + R1 + ": the number 1e400 does not fit a float",
    ),
    Case(
        "result-iops-negative",
        result(put("fio", "iops", value=-5)),
        "{root}/" + R1 + ": fio.iops is -5, below 0",
    ),
    Case(
        "result-iops-a-list",
        result(put("fio", "iops", value=[1])),
        "{root}/" + R1 + ": fio.iops is a list, not a number",
    ),
    Case("result-no-fio", result(pop("fio")), "{root}/" + R1 + ": fio is missing"),
    Case(
        "result-no-total-ios",
        result(pop("fio", "total_ios")),
        "{root}/" + R1 + ": fio.total_ios is missing",
    ),
    Case(
        "result-total-ios-a-float",
        result(put("fio", "total_ios", value=22229.5)),
        "{root}/" + R1 + ": fio.total_ios is 22229.5, not an integer",
    ),
    Case(
        "result-iodepth-true",
        result(put("iodepth", value=True)),
        "{root}/" + R1 + ": iodepth is a boolean (True), not an integer",
    ),
    Case(
        "result-iodepth-zero",
        result(put("iodepth", value=0)),
        "{root}/" + R1 + ": iodepth is 0, below 1",
    ),
    Case(
        "result-exact-a-string",
        result(put("fio", "percentiles_exact", value="yes")),
        "{root}/" + R1 + ": fio.percentiles_exact is a string ('yes'), not true or false",
    ),
    Case(
        "result-resources-no-samples",
        result(pop("resources", "samples")),
        "{root}/" + R1 + ": resources.samples is missing",
    ),
    Case(
        "result-client-not-an-object",
        result(put("clients", "client-0", value=5)),
        "{root}/" + R1 + ": clients.client-0 is 5, not an object",
    ),
    Case(
        "result-series-strings",
        result(put("extra", "iops_per_second", value=["4300"])),
        "{root}/" + R1 + ": extra.iops_per_second[0] is a string ('4300'), not a number",
    ),
    Case(
        "result-series-not-a-list",
        result(put("extra", "iops_per_second", value=4300)),
        "{root}/" + R1 + ": extra.iops_per_second is not a list of numbers",
    ),
    Case(
        "result-of-another-step",
        result(put("step_id", value=STEP_IDS[0])),
        "{root}/" + R1 + f": step_id is '{STEP_IDS[0]}', not '{S1}' (its directory)",
    ),
    Case(
        "result-step-id-markup",
        result(put("step_id", value="[/red]x")),
        "{root}/" + R1 + f": step_id is '[/red]x', not '{S1}' (its directory)",
    ),
    Case(
        "result-workload-a-path",
        result(put("workload", value="../../../../tmp/evil")),
        "{root}/" + R1 + ": workload '../../../../tmp/evil' is not a plain name (letters, "
        "digits, . _ -): reports name files after it",
    ),
    Case(
        "result-workload-absolute",
        result(put("workload", value="/etc/cron.d/x")),
        "{root}/" + R1 + ": workload '/etc/cron.d/x' is not a plain name (letters, digits, "
        ". _ -): reports name files after it",
    ),
    # ---- other entries of steps/
    Case(
        "step-dir-link-outside",
        link(f"steps/{S1}", to_dir=True),
        "{root}/steps/" + S1 + ": " + NOT_FOLLOWED,
    ),
    Case("steps-stray-file", stray_file, "{root}/steps/notes.txt: is not a step directory"),
    Case(
        "two-steps-broken",
        two_broken,
        "{root}: 2 files cannot be used:\n"
        "  " + R1 + ": not valid JSON (Expecting value: line 1 column 13)\n"
        f"  steps/{STEP_IDS[3]}/result.json: fio.total_ios is a string ('22229'), not an "
        "integer\n" + LEFT_OUT.format(n=2),
    ),
    # ---- where report writes
    Case(
        "report-link-outside",
        report_link,
        "{root}/report " + LINK_REFUSED.replace("{outside}/target", "{outside}/elsewhere"),
        compare_too=False,
    ),
    Case(
        "report-a-file",
        report_a_file,
        "{root}/report is a file; the report goes into a directory of that name",
        compare_too=False,
    ),
    Case(
        "report-png-a-directory",
        report_png_a_dir,
        "{root}/report/seqwrite64k_cpu.png is not a file; the report writes a file there: "
        "remove it",
        compare_too=False,
    ),
    Case(
        "report-file-link-outside",
        report_file_link,
        "{root}/report/summary.md is a symbolic link (to {outside}/precious.txt); "
        "crimsonbench never writes through a link inside a results directory: remove it",
        compare_too=False,
    ),
]


def cli(*args: str) -> tuple[int, str]:
    got = CliRunner().invoke(app, list(args))
    if got.exception is not None and not isinstance(got.exception, SystemExit):
        raise AssertionError(f"crashed with {got.exception!r}:\n{got.output}")
    return got.exit_code, got.output


def expected_output(case: Case, root: Path, outside: Path) -> str:
    message = case.error.format(root=root, outside=outside)
    if case.error.startswith("{root}/steps/"):  # one step's file: the step is named as left out
        message += "\n" + LEFT_OUT.format(n=1)
    first, *rest = message.splitlines()
    return "\n".join([f"error: {first}", *(f"       {line}" for line in rest)]) + "\n"


def snapshot(*dirs: Path) -> dict[str, bytes | str]:
    """Every entry under dirs (links as their target text, not followed)."""
    out: dict[str, bytes | str] = {}
    for d in dirs:
        for dirpath, dirnames, filenames in os.walk(d):
            for name in dirnames + filenames:
                p = Path(dirpath) / name
                if p.is_symlink():
                    out[str(p)] = "-> " + os.readlink(p)
                elif p.is_file() and p.stat().st_size < 2**20:
                    out[str(p)] = p.read_bytes()
                else:
                    out[str(p)] = f"{p.stat().st_size} bytes"
    return out


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_report_and_compare_refuse_naming_the_file(tmp_path: Path, case: Case) -> None:
    root, outside = tmp_path / "run", tmp_path / "outside"
    copy_run(root)
    outside.mkdir()
    case.breaks(root, outside)
    before = snapshot(root, outside)
    code, out = cli("report", str(root))
    assert (code, out) == (2, expected_output(case, root, outside))
    assert snapshot(root, outside) == before  # nothing written, nothing followed
    if case.compare_too:
        good = copy_run(tmp_path / "good")
        for base, new in ((good, root), (root, good)):
            code, out = cli("compare", str(base), str(new), "--out", str(tmp_path / "cmp"))
            assert (code, out) == (2, expected_output(case, root, outside))
        assert not (tmp_path / "cmp").exists()
        assert snapshot(root, outside) == before
