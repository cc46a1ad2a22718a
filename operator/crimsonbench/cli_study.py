"""`crimsonbench study FILE`: a BenchmarkStudy on this machine, its variants one after
another, each on its own throwaway cluster, ending in one comparison."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.text import Text

from crimsonbench import cli_inputs as given
from crimsonbench.cli_common import console, guard, kube_api, literal_error
from crimsonbench.cli_inputs import BadInput
from crimsonbench.results.store import NotAResultsDirectory
from crimsonbench.spec.names import validate_name
from crimsonbench.spec.study import load_study

if TYPE_CHECKING:  # imported when the command runs: `crimsonbench --help` stays quick
    from crimsonbench.local.study import PlannedRun
    from crimsonbench.plan.study import StudyRun, Variant

# The comparison's options, the same for `study` and `fetch-study`.
THRESHOLD = typer.Option(
    5.0, min=0.0, help="A regression is worse by more than this many % (and significant)."
)
ALPHA = typer.Option(0.05, min=0.0001, max=0.5, help="Significance level.")
GATE = typer.Option(
    False,
    "--gate",
    help="Exit 1 when a variant regresses against the baseline variant, or against "
    "--baseline (as `compare` does: regressions, missing steps, untested rows).",
)
BASELINE = typer.Option(
    None,
    help="A stored baseline: a results directory (an earlier run, e.g. last release's, or one "
    "`crimsonbench fetch` wrote) every variant is also judged against; --gate fails on its "
    "regressions too.",
)
ALLOW_UNTESTED = typer.Option(False, help="As `compare --allow-untested`.")
ALLOW_SUSPECT = typer.Option(False, help="As `compare --allow-suspect`.")


def study(
    study_file: Path = typer.Argument(..., help="BenchmarkStudy YAML (base.target.local)"),
    results: Path | None = typer.Option(
        None, help="Study directory; default results/<study>. Finished runs are kept."
    ),
    fresh: bool = typer.Option(False, help="Delete the study's earlier runs first."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Check every variant and print the runs and the time; run nothing."
    ),
    wait_cpus: float = typer.Option(
        0.0, min=0.0, help="Wait up to this many seconds for CPUs another run pins."
    ),
    threshold: float = THRESHOLD,
    alpha: float = ALPHA,
    gate: bool = GATE,
    baseline: Path | None = BASELINE,
    allow_untested: bool = ALLOW_UNTESTED,
    allow_suspect: bool = ALLOW_SUSPECT,
) -> None:
    """Run a study: every variant of a base spec (vary: axes, or variants: a list), its
    repeats interleaved (A B C A B C), then one comparison (curves overlaid, the grid of
    peaks, knees and per-core figures, verdicts against the baseline, the best variant).
    Killed at any point, the same command goes on where it stopped."""
    from crimsonbench.local.signals import stop_exits
    from crimsonbench.local.study import LocalStudy
    from crimsonbench.progress import RichEvents

    with guard(), stop_exits(130):
        name, spec = load_study(study_file)
        _check_stored(baseline)  # unreadable: refused now, not after hours of runs
        root = results or Path("results") / name
        runner = LocalStudy(name, spec, root, lambda: RichEvents(console), _say, fresh,
                            spec_file=study_file.absolute(), cpu_wait_s=wait_cpus)  # fmt: skip
        planned = runner.preflight()  # every variant checked before the first run
        _say_planned(name, len(runner.variants), spec.repeats, planned)
        if dry_run:
            return
        outcome = runner.execute(planned)
    if outcome.interrupted:
        _say(f"study interrupted; `crimsonbench study {study_file}` goes on from here")
        raise typer.Exit(130)
    for run, why in outcome.failed.items():
        console.print(Text("failed:", style="red") + f" {run}: {why}", highlight=False)
    options = GateOptions(threshold, alpha, allow_untested, allow_suspect, baseline)
    failures = _comparison(name, runner.variants, runner.runs, runner.completed_dirs(), root,
                           options)  # fmt: skip
    if outcome.failed:
        raise typer.Exit(1)
    if gate and failures:
        console.print(f"[bold red]gate failed[/] ({failures}): see {root / 'comparison'}")
        raise typer.Exit(1)


def _say_planned(name: str, variants: int, repeats: int, planned: Sequence[PlannedRun]) -> None:
    fio_s = sum(p.fio_seconds for p in planned if not p.done)
    done = sum(p.done for p in planned)
    for p in planned:
        mark = "done" if p.done else f"{len(p.plan.steps)} steps"
        _say(f"  {p.run.name}: {p.variant.describe()} ({mark})")
    _say(
        f"study {name}: {variants} variants x {repeats} repeat(s) = {len(planned)} runs "
        f"({done} done), at least {fio_s / 60:.1f} min of fio plus a cluster and a prefill "
        "per run"
    )


def fetch_study(
    study_name: str = typer.Argument(..., metavar="STUDY", help="BenchmarkStudy (or ns/name)."),
    namespace: str = typer.Option("default", "--namespace", "-n"),
    results: Path | None = typer.Option(None, help="Study directory; default results/<study>."),
    kubeconfig: Path | None = typer.Option(None, help="Default: $KUBECONFIG or ~/.kube/config."),
    context: str | None = typer.Option(None, help="kubeconfig context."),
    threshold: float = THRESHOLD,
    alpha: float = ALPHA,
    gate: bool = GATE,
    baseline: Path | None = BASELINE,
    allow_untested: bool = ALLOW_UNTESTED,
    allow_suspect: bool = ALLOW_SUSPECT,
) -> None:
    """Write a Kubernetes study's finished runs as a study directory and its comparison
    (the same files `crimsonbench study` writes locally)."""
    from crimsonbench.spec.names import validate_namespace
    from crimsonbench.spec.study import validate_study_name

    with guard():
        if "/" in study_name:
            namespace, study_name = study_name.split("/", 1)
        validate_study_name(validate_name(study_name, field="STUDY"))
        validate_namespace(namespace, field="--namespace")
        _check_stored(baseline)
        try:
            from crimsonbench.controller.fetch import FetchError
            from crimsonbench.controller.study_fetch import fetch_study as fetch
            from crimsonbench.controller.study_fetch import write_study_dir
        except ImportError as exc:
            raise BadInput(f"fetch-study needs the kubernetes client ({exc.name}): "
                           "pip install 'crimsonbench[operator]'") from exc  # fmt: skip
        api = kube_api("fetch-study", kubeconfig, context)
        root = results or Path("results") / study_name
        with api:
            try:
                study = fetch(api, namespace, study_name)
                dirs = write_study_dir(study, root)
            except FetchError as exc:
                raise BadInput(str(exc)) from exc
            except OSError as exc:
                raise BadInput(f"cannot fetch the study: {exc}") from exc
    _say(f"{len(study.fetched)} of {len(study.runs)} runs of {namespace}/{study_name} "
         f"finished, in {root / 'runs'}")  # fmt: skip
    options = GateOptions(threshold, alpha, allow_untested, allow_suspect, baseline)
    failures = _comparison(study_name, study.variants, study.runs, dirs, root, options)
    if gate and failures:
        console.print(f"[bold red]gate failed[/] ({failures}): see {root / 'comparison'}")
        raise typer.Exit(1)


def _comparison(
    name: str,
    variants: Sequence[Variant],
    runs: Sequence[StudyRun],
    dirs: Mapping[str, list[Path]],
    root: Path,
    gate: GateOptions,
) -> int:
    """Write the study's comparison into ROOT/comparison; the number of gate failures (0
    when there is none to write, which is said)."""
    from crimsonbench.reports.study import VariantRow
    from crimsonbench.reports.study_report import (
        NothingToCompare,
        VariantRuns,
        write_study_comparison,
    )

    planned = {v.name: sum(r.variant == v.name for r in runs) for v in variants}
    rows = [
        VariantRuns(
            VariantRow(v.name, v.describe(), len(dirs[v.name]), planned[v.name]), dirs[v.name]
        )  # fmt: skip
        for v in variants
    ]
    limit = variants[0].spec.sweep.early_exit.mean_latency_ms_limit if variants else None
    out = root / "comparison"
    with guard():
        try:
            done = write_study_comparison(name, rows, out, limit, gate.threshold, gate.alpha,
                                          gate.allow_untested, gate.allow_suspect,
                                          gate.stored_baseline)  # fmt: skip
        except NothingToCompare as exc:
            _say(f"no comparison: {exc}")
            return 0
        except NotAResultsDirectory as exc:
            literal_error(str(exc), 2)
        except OSError as exc:
            raise BadInput(f"cannot write the comparison into {out}: {exc}") from exc
    for path in done.written:
        console.print(str(path), markup=False, highlight=False, soft_wrap=True)
    sys.stdout.write(done.verdicts)
    return len(done.failures)


@dataclass(frozen=True)
class GateOptions:
    threshold: float
    alpha: float
    allow_untested: bool
    allow_suspect: bool
    stored_baseline: Path | None = None


def _check_stored(baseline: Path | None) -> None:
    if baseline is None:
        return
    try:
        given.store(baseline)
    except NotAResultsDirectory as exc:
        raise BadInput(f"--baseline: {exc}") from exc


def _say(line: str) -> None:
    console.print(line, markup=False, highlight=False, soft_wrap=True)
