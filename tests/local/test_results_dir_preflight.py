"""Where a local run writes, and what `--fresh` may delete, is decided before anything is
written or deleted: a directory crimsonbench did not create (no .crimsonbench-results
marker) is never emptied and never written into, links in it are refused, and every
refusal (the results directory's, the plan's) comes before the first write. The name of a
run can be a path (`run --fresh` with metadata.name `/srv/data` once emptied /srv/data
before the CPU-set refusal ran)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from crimsonbench.errors import InvalidSpec
from crimsonbench.local.runner import LocalRun
from crimsonbench.progress import QuietEvents
from crimsonbench.results.run_status import RunStatus
from crimsonbench.results.store import MARKER_FILE, ResultStore
from crimsonbench.spec.models import validate_spec
from crimsonbench.spec.status import Phase


def spec(cpu_set: str = "0", client_cpus: str = "1") -> Any:
    return validate_spec(
        {
            "target": {"local": {}},
            "osd": {"flavor": "classic", "objectStore": "memstore", "count": 1, "cpuSet": cpu_set},
            "client": {"cpuSet": client_cpus, "images": 1, "imageSize": "64Mi"},
            "sweep": {"iodepths": [1], "runtimeSeconds": 1},
        }
    )


def tree(root: Path) -> dict[str, str]:
    """Every entry under root (links as their target): what must not change."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            else:
                out[rel] = p.read_text() if p.is_file() else "dir"
    return out


def someone_elses(root: Path) -> Path:
    (root / "projects").mkdir(parents=True)
    (root / "projects" / "thesis.tex").write_text("years of work\n")
    (root / "notes.txt").write_text("keep\n")
    return root


def refused(run: LocalRun) -> InvalidSpec:
    with pytest.raises(InvalidSpec) as err:
        run.execute()
    return err.value


def test_fresh_refuses_a_directory_without_our_marker(tmp_path: Path) -> None:
    target = someone_elses(tmp_path / "srv")
    before = tree(target)
    err = refused(LocalRun("x", spec(), target, QuietEvents(), fresh=True))
    assert err.field == "--results"
    assert err.message == (
        f"--fresh empties only a results directory crimsonbench created (it has "
        f"{target / MARKER_FILE}); {target} has none and holds notes.txt, projects. Check "
        "what it is, then delete it yourself, or pick another --results directory"
    )
    assert tree(target) == before  # not a file removed, no lock, no marker


def test_a_run_does_not_write_into_a_directory_that_is_not_ours(tmp_path: Path) -> None:
    target = someone_elses(tmp_path / "home")
    before = tree(target)
    err = refused(LocalRun("x", spec(), target, QuietEvents()))
    assert err.message == (
        f"{target} is not empty (notes.txt, projects) and is not a crimsonbench results "
        f"directory of this spec (no {target / MARKER_FILE}): pick a new or empty --results "
        "directory"
    )
    assert tree(target) == before


@pytest.mark.parametrize("linked", ["steps", "report", "spec.json"])
def test_a_link_in_our_results_directory_is_refused_naming_it(tmp_path: Path, linked: str) -> None:
    store = ResultStore(tmp_path / "res")
    store.write_spec(spec().model_dump(mode="json", by_alias=True))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (store.root / linked).unlink(missing_ok=True)
    (store.root / linked).symlink_to(elsewhere)
    before, outside = tree(store.root), tree(elsewhere)
    for fresh in (False, True):
        err = refused(LocalRun("x", spec(), store.root, QuietEvents(), fresh=fresh))
        assert err.message.startswith(
            f"{store.root / linked} is a symbolic link (to {elsewhere}); a run writes nothing "
            "through links in its results directory"
        )
    assert tree(store.root) == before and tree(elsewhere) == outside


def test_an_old_results_directory_of_the_same_spec_is_resumed_and_marked(tmp_path: Path) -> None:
    """Results written before markers existed: same spec, our files only."""
    res = tmp_path / "res"
    res.mkdir()
    ResultStore(res).write_spec(spec().model_dump(mode="json", by_alias=True))
    (res / MARKER_FILE).unlink()  # as an older version left it
    run = LocalRun("x", spec(), res, QuietEvents())
    run.check_results_dir()  # accepted: it is ours
    other = LocalRun("x", spec(cpu_set="1", client_cpus="0"), res, QuietEvents())
    with pytest.raises(InvalidSpec, match="not a crimsonbench results directory of this spec"):
        other.check_results_dir()


@pytest.mark.ceph  # the plan asks this machine's Ceph for its version
def test_fresh_deletes_nothing_when_the_plan_is_refused(tmp_path: Path) -> None:
    """Ours (marked) and --fresh, but the spec's CPU set is not on this machine: the plan's
    refusal comes first, every earlier result is still there."""
    res = tmp_path / "res"
    store = ResultStore(res)
    store.write_spec({"old": "spec"})
    store.write_status(RunStatus(phase=Phase.COMPLETED))
    before = tree(res)
    err = refused(LocalRun("x", spec(cpu_set="0-63", client_cpus="64"), res, QuietEvents(),
                           fresh=True))  # fmt: skip
    assert err.field == "spec.osd.cpuSet" and "not on this machine" in err.message
    assert tree(res) == before


def test_a_resumed_run_refuses_a_step_it_cannot_read(tmp_path: Path) -> None:
    """Its report would fail after the whole run: refused first, naming the file."""
    store = ResultStore(tmp_path / "res")
    store.write_spec(spec().model_dump(mode="json", by_alias=True))
    bad = store.step_dir("000-randread4k-qd001-r1") / "result.json"
    bad.write_text('{"step_id": ')
    before = tree(store.root)
    err = refused(LocalRun("x", spec(), store.root, QuietEvents()))
    assert err.message.startswith(
        f"{bad}: not valid JSON (Expecting value: line 1 column 13)\n1 step(s) would be left out"
    )
    assert err.message.endswith("Or pass --fresh to start over.")
    assert tree(store.root) == before
