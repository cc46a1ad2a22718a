"""Hostile and careless BenchmarkRun files through `crimsonbench plan` (issue 26: names used
as paths, fio job-file and ceph.conf injection, resource bombs, output that trusts its
input). Every row is refused before anything is planned or written, with one error naming
the field (or the file and line) and saying what is wrong; never a traceback. A few rows
at the end are accepted and check that what `plan` prints is literal and shell-safe.

Rows are (id, the file's text, the field the error names, words the message must hold).
"""

from __future__ import annotations

import copy
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from crimsonbench.cli import app
from crimsonbench.spec.models import MAX_RUN_NAME, MAX_SPEC_BYTES

LSCPU = Path(__file__).resolve().parents[1] / "fixtures" / "lscpu" / "adjacent-2s-8c-ht.json"

BASE: dict[str, Any] = {
    "apiVersion": "bench.crimson.ceph.io/v1alpha1",
    "kind": "BenchmarkRun",
    "metadata": {"name": "quick"},
    "spec": {
        "target": {"local": {}},
        "osd": {"flavor": "classic", "objectStore": "memstore", "count": 1, "cpuSet": "0-3"},
        "client": {"cpuSet": "4-5", "images": 2, "imageSize": "256Mi"},
        "sweep": {"iodepths": [1], "runtimeSeconds": 5},
        "workloads": [{"name": "mix", "rw": "randrw", "bs": "4k", "options": {"rwmixread": "70"}}],
    },
}
BASE_TEXT = yaml.safe_dump(BASE, sort_keys=False)
ROOK = {"rook": {"clusterName": "rook-ceph"}}
EXTERNAL = {
    "external": {"user": "admin", "monHost": "10.0.0.1", "keyringFile": "/etc/ceph/keyring"}
}


def doc(*edits: tuple[str, Any]) -> str:
    """BASE with values set at dotted paths ("spec.client.user"), as YAML text. A path
    ending in `-` removes the key. PyYAML quotes what needs it: the value arrives as is."""
    out = copy.deepcopy(BASE)
    for path, value in edits:
        *parents, last = path.split(".")
        node = out
        for key in parents:
            node = node.setdefault(key, {})
        if last.endswith("-"):
            node.pop(last[:-1], None)
        else:
            node[last] = value
    return yaml.safe_dump(out, sort_keys=False, allow_unicode=False, width=10_000)


def spec_part(**parts: Any) -> str:
    """BASE with whole sections of spec replaced."""
    return doc(*((f"spec.{k}", v) for k, v in parts.items()))


def options(**opts: str) -> str:
    return doc(("spec.workloads", [{"name": "mix", "rw": "randrw", "bs": "4k", "options": opts}]))


def text_replace(old: str, new: str) -> str:
    assert old in BASE_TEXT, old
    return BASE_TEXT.replace(old, new, 1)


def alias_bomb(levels: int = 12) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]")
    body = "\n".join("    " + line for line in lines)
    return BASE_TEXT.replace("spec:\n", f"spec:\n  target: {{local: {{}}}}\n  x:\n{body}\n", 1)


@dataclass(frozen=True)
class Case:
    id: str
    text: str | Callable[[Path], str]  # the file's text, or a writer of big files
    field: str  # what the error names first ("FILE" for the spec file's path)
    words: tuple[str, ...]


def big_file(size: int) -> Callable[[Path], str]:
    def write(path: Path) -> str:
        with path.open("w") as fh:
            fh.write(BASE_TEXT)
            fh.write("# padding\n" * (size // 10))
        return ""

    return write


NAME_RULE_WORDS = "DNS-1123 label of at most 50 characters"
FIO_VALUE = "is not a fio option value"
CEPH_VALUE = "is not a ceph.conf value we accept"
ALLOWED_ONLY = "options may only set: rwmixread"

CASES = [
    # ---- 1. metadata.name: a name is a path (results/<name>) and names every object
    Case("name-absolute-path", doc(("metadata.name", "/etc")), "metadata.name",
         ("'/etc' may not contain '/'", NAME_RULE_WORDS)),
    Case("name-slash", doc(("metadata.name", "/")), "metadata.name", ("'/'", NAME_RULE_WORDS)),
    Case("name-dot", doc(("metadata.name", ".")), "metadata.name", ("may not contain '.'",)),
    Case("name-dotdot", doc(("metadata.name", "../..")), "metadata.name",
         ("'../..' may not contain '.', '/'",)),
    Case("name-climbs-out", doc(("metadata.name", "../../x")), "metadata.name",
         ("may not contain '.', '/'",)),
    Case("name-nul", doc(("metadata.name", "run\0x")), "metadata.name",
         (r"'run\x00x' may not contain '\x00'",)),
    Case("name-newline", doc(("metadata.name", "run\nx")), "metadata.name",
         (r"may not contain '\n'",)),
    Case("name-300-characters", doc(("metadata.name", "a" * 300)), "metadata.name",
         ("has 300 characters, more than 50", "(300 characters)")),
    Case("name-51-characters", doc(("metadata.name", "a" * (MAX_RUN_NAME + 1))), "metadata.name",
         ("has 51 characters, more than 50",)),
    Case("name-mapping", doc(("metadata.name", {"a": 1})), "metadata.name",
         ("is a mapping ({'a': 1}), not a string",)),
    Case("name-list", doc(("metadata.name", ["a"])), "metadata.name", ("is a list",)),
    Case("name-integer", doc(("metadata.name", 7)), "metadata.name", ("is an integer",)),
    Case("name-upper-case", doc(("metadata.name", "Quick")), "metadata.name",
         ("may not contain 'Q'",)),
    Case("name-ends-with-dash", doc(("metadata.name", "quick-")), "metadata.name",
         ("must start and end with a letter or digit",)),
    Case("name-unicode", doc(("metadata.name", "qu\u00efck")), "metadata.name",
         ("may not contain '\u00ef'",)),
    Case("name-empty", doc(("metadata.name", "")), "metadata.name", ("give the run a name",)),
    Case("name-missing", doc(("metadata", {})), "metadata.name", ("give the run a name",)),
    # ---- 2. fio job files: option values, option names, workload names, cephx user
    Case("option-newline-exec-prerun", options(rwmixread="70\nexec_prerun=/bin/sh -c id"),
         "spec.workloads[0].options.rwmixread", (r"'70\nexec_prerun=/bin/sh -c id'", FIO_VALUE)),
    Case("option-newline-filename", options(rate="1m\nfilename=/etc/passwd"),
         "spec.workloads[0].options.rate", (FIO_VALUE,)),
    Case("option-newline-ioengine", options(size="1g\nioengine=sync"),
         "spec.workloads[0].options.size", (FIO_VALUE,)),
    Case("option-carriage-return", options(rwmixread="70\rexec_prerun=id"),
         "spec.workloads[0].options.rwmixread", (r"\r", FIO_VALUE)),
    Case("option-adds-a-section", options(bssplit="4k/100\n[evil]\nfilename=/etc/passwd"),
         "spec.workloads[0].options.bssplit", (FIO_VALUE,)),
    Case("option-brackets", options(bssplit="[global]"),
         "spec.workloads[0].options.bssplit", ("'[global]'", FIO_VALUE)),
    Case("option-include-value", options(rwmixread="70\ninclude /etc/passwd"),
         "spec.workloads[0].options.rwmixread", (FIO_VALUE,)),
    Case("option-include-key", options(include="/etc/passwd"),
         "spec.workloads[0].options", (ALLOWED_ONLY,)),
    Case("option-key-with-newline", options(**{"rwmixread\nexec_prerun": "1"}),
         "spec.workloads[0].options", (ALLOWED_ONLY,)),
    Case("option-percentile-list-is-the-planners", options(percentile_list="50:99"),
         "spec.workloads[0].options", (ALLOWED_ONLY, "percentile_list: every step records")),
    Case("option-iodepth-is-the-planners", options(iodepth="256"),
         "spec.workloads[0].options", (ALLOWED_ONLY, "iodepth")),
    Case("option-env-expansion", options(size="${HOME}"),
         "spec.workloads[0].options.size", (FIO_VALUE,)),
    Case("option-percentage-150", options(rwmixread="150"), "spec.workloads[0].options",
         ("options rwmixread, rwmixwrite, buffer_compress_percentage, dedupe_percentage",
          "must be a whole percentage, 0 to 100")),
    Case("option-flag-yes", options(norandommap="yes"), "spec.workloads[0].options",
         ("must be 0 or 1",)),
    Case("option-rate-words", options(rate_iops="fast"), "spec.workloads[0].options",
         ("options rate, rate_iops must be a number",)),
    Case("option-value-markup", options(rwmixread="[/bold]"),
         "spec.workloads[0].options.rwmixread", ("'[/bold]'", FIO_VALUE)),
    Case("workload-name-newline-section",
         doc(("spec.workloads", [{"name": "mix\n[global]", "rw": "read", "bs": "4k"}])),
         "spec.workloads[0].name", ("String should match pattern",)),
    Case("client-user-newline", doc(("spec.client.user", "admin\nexec_prerun=id")),
         "spec.client.user", (r"'admin\nexec_prerun=id' is not a cephx user id",)),
    Case("client-user-bracket", doc(("spec.client.user", "admin]")), "spec.client.user",
         ("is not a cephx user id",)),
    Case("client-user-option", doc(("spec.client.user", "-h")), "spec.client.user",
         ("not starting with '-'",)),
    Case("pool-newline", doc(("spec.client.pool", "rbd\nioengine=sync")), "spec.client.pool",
         ("String should match pattern",)),
    Case("pool-reads-as-an-option", doc(("spec.client.pool", "--yes-i-really-mean-it")),
         "spec.client.pool", ("String should match pattern",)),
    Case("image-prefix-path", doc(("spec.client.imagePrefix", "../x")),
         "spec.client.imagePrefix", ("String should match pattern",)),
    # ---- 2. ceph.conf: cephConfig keys and values, mon_host, paths, devices, versions
    Case("ceph-config-key-adds-global",
         doc(("spec.osd.cephConfig", {"osd_op_num_shards\n[global]\nauth_supported": "none"})),
         "spec.osd.cephConfig", ("cephConfig keys must be Ceph option names",)),
    Case("ceph-config-key-with-spaces", doc(("spec.osd.cephConfig", {"osd op num shards": "8"})),
         "spec.osd.cephConfig", ("lower case letters, digits and '_'",)),
    Case("ceph-config-value-adds-global",
         doc(("spec.osd.cephConfig", {"osd_op_num_shards": "8\n[global]\nauth_supported = none"})),
         "spec.osd.cephConfig.osd_op_num_shards", (CEPH_VALUE,)),
    Case("ceph-config-value-section", doc(("spec.osd.cephConfig", {"osd_op_num_shards": "[mon]"})),
         "spec.osd.cephConfig.osd_op_num_shards", ("'[mon]'", CEPH_VALUE)),
    Case("ceph-config-value-comment", doc(("spec.osd.cephConfig", {"debug_osd": "20 # x"})),
         "spec.osd.cephConfig.debug_osd", (CEPH_VALUE,)),
    Case("ceph-config-value-shell", doc(("spec.osd.cephConfig", {"debug_osd": "$(reboot)"})),
         "spec.osd.cephConfig.debug_osd", (CEPH_VALUE,)),
    Case("mon-host-newline",
         doc(("spec.target", {"external": {"monHost": "10.0.0.1\n[global]\nkeyring = /k",
                                           "keyringFile": "/k", "user": "admin"}}),
             ("spec.client.node", "n1")),
         "spec.target.external.monHost", ("is not a mon_host",)),
    Case("mon-host-shell", doc(("spec.target", {"external": {"monHost": "10.0.0.1;reboot",
                                                              "keyringFile": "/k",
                                                              "user": "admin"}}),
                               ("spec.client.node", "n1")),
         "spec.target.external.monHost", ("[v2:10.0.0.1:3300,v1:10.0.0.1:6789]",)),
    Case("external-user-newline",
         doc(("spec.target", {"external": {**EXTERNAL["external"], "user": "admin\nx"}}),
             ("spec.client.node", "n1")),
         "spec.target.external.user", ("is not a cephx user id",)),
    Case("keyring-file-newline",
         doc(("spec.target", {"external": {"monHost": "10.0.0.1", "keyringFile": "/k\nx",
                                           "user": "admin"}}),
             ("spec.client.node", "n1")),
         "spec.target.external.keyringFile", ("is not a path we accept",)),
    Case("keyring-secret-path", doc(("spec.target", {"external": {
        "monHost": "10.0.0.1", "user": "u", "keyringSecret": {"name": "../x"}}}),
        ("spec.client.node", "n1")),
         "spec.target.external.keyringSecret.name", ("is not a valid Kubernetes name",)),
    Case("work-dir-newline", doc(("spec.target.local.workDir", "/tmp/x\n/etc")),
         "spec.target.local.workDir", ("is not a path we accept",)),
    Case("ceph-root-shell", doc(("spec.target.local.cephRoot", "$(reboot)")),
         "spec.target.local.cephRoot", ("is not a path we accept",)),
    Case("device-relative", doc(("spec.osd.devices", ["../../etc/passwd"])),
         "spec.osd.devices[0]", ("is not a block device path",)),
    Case("device-climbs", doc(("spec.osd.devices", ["/dev/../etc/passwd"])),
         "spec.osd.devices[0]", ("no component starting with '.'",)),
    Case("ceph-version-newline", doc(("spec.osd.cephVersion", "19.2.1\n")),
         "spec.osd.cephVersion", ("String should match pattern",)),
    Case("ceph-version-other-digits", doc(("spec.osd.cephVersion", "\u0661\u0669.\u0662")),
         "spec.osd.cephVersion", ("String should match pattern",)),
    Case("cpuset-newline", doc(("spec.client.cpuSet", "4-5\n")), "spec.client.cpuSet",
         ("is not a CPU list",)),
    Case("cpuset-other-digits", doc(("spec.client.cpuSet", "\u0664")), "spec.client.cpuSet",
         ("is not a CPU list",)),
    # ---- 2. Kubernetes names that become Jobs, labels and fio job sections
    Case("node-name-section", doc(("spec.target", ROOK), ("spec.client.node", "n1\n[x]")),
         "spec.client.node", ("is not a valid Kubernetes name",)),
    Case("osd-node-upper", doc(("spec.target", {"rook": {"clusterName": "c",
                                                         "osdNodes": ["Node_1"]}}),
                               ("spec.client.node", "n1")),
         "spec.target.rook.osdNodes[0]", ("is not a valid Kubernetes name",)),
    Case("node-selector-key", doc(("spec.target", ROOK), ("spec.client.nodeSelector",
                                                          {"role fio": "x"})),
         "spec.client.nodeSelector", ("nodeSelector keys must be label keys",)),
    Case("node-selector-value", doc(("spec.target", ROOK), ("spec.client.nodeSelector",
                                                            {"role": "fio\n"})),
         "spec.client.nodeSelector.role", ("is not a valid label value",)),
    Case("node-cpu-sets-key", doc(("spec.target", ROOK), ("spec.client.node", "n1"),
                                  ("spec.client.nodeCpuSets", {"../n1": "0"})),
         "spec.client.nodeCpuSets", ("nodeCpuSets keys must be node names",)),
    Case("rook-namespace-path", doc(("spec.target", {"rook": {"clusterName": "c",
                                                              "namespace": "a/../b"}}),
                                    ("spec.client.node", "n1")),
         "spec.target.rook.namespace", ("is not a valid name",)),
    Case("rook-cluster-name-upper", doc(("spec.target", {"rook": {"clusterName": "Rook_Ceph"}}),
                                        ("spec.client.node", "n1")),
         "spec.target.rook.clusterName", ("is not a valid Kubernetes name",)),
    # ---- 5. bounds on the whole file
    Case("alias-bomb", alias_bomb(), "FILE", ("aliases (*a0) are not accepted",)),
    Case("fifty-megabytes", big_file(50 * 2**20), "FILE",
         ("is larger than 1 MiB (1,048,576 bytes)",)),
    Case("just-over-one-mebibyte", big_file(MAX_SPEC_BYTES), "FILE", ("is larger than 1 MiB",)),
    Case("deep-nesting", text_replace("target:", "x: " + "[" * 5000 + "]" * 5000 + "\n  target:"),
         "FILE", ("nested more than 32 levels deep",)),
    Case("five-thousand-digits", text_replace("count: 1", "count: " + "9" * 5000), "FILE",
         ("an integer of 5000 digits is too large",)),
    Case("duplicate-section", BASE_TEXT + "  osd: {flavor: crimson}\n", "FILE",
         ("found the key 'osd' twice (first on line",)),
    Case("duplicate-nested-key", text_replace("count: 1", "count: 1\n    count: 8"), "FILE",
         ("found the key 'count' twice",)),
    Case("not-utf8", lambda p: p.write_bytes(b"kind: \xff\xfe\n") and "", "FILE",
         ("is not UTF-8 text",)),
    Case("unknown-top-level-key", BASE_TEXT.replace("spec:", "specs:"), "specs",
         ("is not a field of a BenchmarkRun manifest",)),
    Case("unknown-field-with-markup", doc(("spec.x\n[/bold]", 1)), "spec['x\\n[/bold]']",
         ("is not a field of BenchmarkRun",)),
    Case("ceph-config-key-integer", doc(("spec.osd.cephConfig", {1: "x"})),
         "spec.osd.cephConfig.1", ("valid string, not an integer (1)",)),
    Case("kind-megabyte", doc(("kind", "x" * 100_000)), "kind",
         ("(100000 characters)", "a BenchmarkRun manifest says kind: BenchmarkRun")),
    # ---- 5. bounds on values: types as the API server checks them, finite numbers, sizes
    Case("true-as-iodepth", doc(("spec.sweep.iodepths", [True])), "spec.sweep.iodepths[0]",
         ("Input should be a valid integer, not a boolean (True)",)),
    Case("true-as-count", doc(("spec.osd.count", True)), "spec.osd.count",
         ("valid integer, not a boolean",)),
    Case("string-as-count", doc(("spec.osd.count", "8")), "spec.osd.count",
         ("valid integer, not a string ('8')",)),
    Case("number-as-boolean", doc(("spec.client.prefill", 0)), "spec.client.prefill",
         ("valid boolean, not an integer (0)",)),
    Case("inf-latency-limit",
         text_replace("runtimeSeconds: 5", "runtimeSeconds: 5\n    earlyExit: "
                      "{enabled: true, meanLatencyMsLimit: .inf}"),
         "spec.sweep.earlyExit.meanLatencyMsLimit", ("finite number", "infinity and NaN")),
    Case("nan-latency-target",
         text_replace("runtimeSeconds: 5", "runtimeSeconds: 5\n    latencyTarget: "
                      "{latencyMs: .nan}"),
         "spec.sweep.latencyTarget.latencyMs", ("finite number",)),
    Case("overflowing-float",
         text_replace("runtimeSeconds: 5", "runtimeSeconds: 5\n    kneeSearch: "
                      "{latencyMs: 1.0e+400}"),
         "spec.sweep.kneeSearch.latencyMs", ("finite number",)),
    Case("latency-limit-a-year", doc(("spec.sweep.latencyTarget", {"latencyMs": 3.2e10})),
         "spec.sweep.latencyTarget.latencyMs", ("less than or equal to 3600000",)),
    Case("twenty-digit-ti-image", doc(("spec.client.imageSize", "9" * 20 + "Ti")),
         "spec.client.imageSize", ("is not a size", "below 1000Ti")),
    Case("thousand-ti-store", doc(("spec.target.local.bluestoreSize", "1000Ti")),
         "spec.target.local.bluestoreSize", ("'1000Ti' is not a size",)),
    Case("huge-block-size", doc(("spec.client.prefillBlockSize", "99999999999k")),
         "spec.client.prefillBlockSize", ("is not a block size",)),
    Case("steps-times-jobs-bomb",
         doc(("spec.client.images", 1024), ("spec.client.processesPerImage", 64),
             ("spec.sweep.iodepths", list(range(1, 21)))),
         "spec", ("the sweep runs too many fio jobs", "at most 1,000,000")),
    Case("steps-times-jobs-repeats",
         doc(("spec.workloads-", None), ("spec.sweep.repeats", 20),
             ("spec.sweep.iodepths", list(range(1, 65))), ("spec.client.images", 256)),
         "spec", ("workloads x sweep.repeats x sweep.iodepths x client.images",)),
]  # fmt: skip


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"crashed with {result.exception!r}:\n{result.output}")
    return result.exit_code, result.output


def _write(tmp_path: Path, case: Case) -> Path:
    path = tmp_path / "run.yaml"
    if callable(case.text):
        case.text(path)
    else:
        path.write_text(case.text)
    return path


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_hostile_spec_is_refused_naming_the_field(tmp_path: Path, case: Case) -> None:
    path = _write(tmp_path, case)
    code, out = _run("plan", "--lscpu-json", str(LSCPU), str(path))
    assert code == 2, out
    assert "Traceback" not in out
    field = str(path) if case.field == "FILE" else case.field
    first = out.splitlines()[0]
    assert first.startswith(f"error: {field}: "), out[:2000]
    for words in case.words:
        assert words in out, f"{words!r} not in: {out[:2000]}"
    # a megabyte of input never becomes a megabyte of error
    assert len(out) < 4000, len(out)


def test_the_set_is_large_enough() -> None:
    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES)


def test_nothing_is_written_for_a_refused_name(tmp_path: Path, monkeypatch: Any) -> None:
    """`run --fresh` with a name that is a path fails before any directory is touched."""
    monkeypatch.chdir(tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("x")
    spec = tmp_path / "run.yaml"
    spec.write_text(doc(("metadata.name", str(victim))))
    code, out = _run("run", "--fresh", str(spec))
    assert code == 2 and out.startswith("error: metadata.name: "), out
    assert (victim / "keep").read_text() == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.yaml", "victim"]


# ---- 6. output: user text is printed literally; shell lines are quoted


def test_markup_in_an_error_is_printed_literally(tmp_path: Path) -> None:
    spec = tmp_path / "run.yaml"
    spec.write_text(options(rwmixread="[/bold]", rate="[red]x[/red]"))
    code, out = _run("plan", "--lscpu-json", str(LSCPU), str(spec))
    assert code == 2
    assert "'[/bold]'" in out and "'[red]x[/red]'" in out
    assert "MarkupError" not in out


def test_brackets_in_messages_survive(tmp_path: Path) -> None:
    spec = tmp_path / "run.yaml"
    spec.write_text(doc(("spec.client.cpuSet", "[4-5]")))
    code, out = _run("plan", "--lscpu-json", str(LSCPU), str(spec))
    assert code == 2
    assert "'[4-5]' is not a CPU list" in out


def test_plan_prints_ceph_config_lines_shell_quoted(tmp_path: Path) -> None:
    spec = tmp_path / "run.yaml"
    spec.write_text(
        doc(
            (
                "spec.osd",
                {
                    "flavor": "crimson",
                    "objectStore": "cyanstore",
                    "cpuSet": "0-3",
                    "cephConfig": {
                        "osd_op_queue": "wpq",
                        "debug_osd": "20/20",
                        "bluestore_rocksdb_options": "a=1, b=2",
                    },
                },
            ),
        )  # fmt: skip
    )
    code, out = _run("plan", "--lscpu-json", str(LSCPU), "--ceph-version", "19.2.1", str(spec))
    assert code == 0, out
    lines = [line for line in out.splitlines() if line.startswith("ceph ")]
    assert "ceph config set osd debug_osd 20/20" in lines
    assert "ceph config set osd bluestore_rocksdb_options 'a=1, b=2'" in lines
    for line in lines:  # every line splits back into exactly the words it was made of
        words = shlex.split(line)
        assert shlex.join(words) == line
    settings = {tuple(shlex.split(line)[3:5]): shlex.split(line)[5] for line in lines
                if line.startswith("ceph config set")}  # fmt: skip
    assert settings[("osd", "bluestore_rocksdb_options")] == "a=1, b=2"


def test_a_mon_host_with_brackets_is_accepted(tmp_path: Path) -> None:
    """Brackets are mon_host's own syntax: the edge refuses what breaks a line, not them."""
    spec = tmp_path / "run.yaml"
    mon = "[v2:10.0.0.1:3300,v1:10.0.0.1:6789],[v2:[2001:db8::1]:3300]"
    spec.write_text(
        doc(
            (
                "spec.target",
                {"external": {"user": "admin", "monHost": mon, "keyringFile": "/etc/ceph/k"}},
            ),
            ("spec.client.node", "n1"),
            ("spec.client.pool", "bench"),
        )  # fmt: skip
    )
    from crimsonbench.spec.models import load_spec

    name, loaded = load_spec(spec)
    assert name == "quick"
    assert loaded.target.external is not None and loaded.target.external.mon_host == mon
