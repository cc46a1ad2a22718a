"""crimsonbench: the command line. Thin: parse, call the planner/runner/reports, print."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from crimsonbench.errors import CrimsonBenchError, InvalidSpec
from crimsonbench.plan.build import build_plan
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.plan.types import RunPlan, Topology
from crimsonbench.spec.models import load_spec

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="CPU-pinned fio sweeps against Ceph Crimson and classic OSDs.",
)
console = Console(stderr=True)


def _topology(lscpu_json: Path | None) -> Topology:
    if lscpu_json is not None:
        return parse_lscpu_json(lscpu_json.read_text())
    from crimsonbench.local.topology_probe import local_topology

    return local_topology()


def _fail(exc: CrimsonBenchError) -> None:
    console.print(f"[bold red]error:[/] {exc}")
    raise typer.Exit(2 if isinstance(exc, InvalidSpec) else 1)


def plan_table(plan: RunPlan) -> Table:
    table = Table(title=f"CPU plan ({plan.cpu.policy}, hyper-threads {plan.cpu.hyper_threads})")
    table.add_column("OSD")
    table.add_column("reactors / affinity")
    table.add_column("count", justify="right")
    table.add_column("alien")
    for osd in plan.cpu.osds:
        table.add_row(
            f"osd.{osd.osd_id}", osd.cpuset, str(len(osd.reactors)), osd.alien_cpuset or "-"
        )
    table.add_row("fio", plan.cpu.client_cpuset, str(len(plan.cpu.client)), "")
    return table


@app.command()
def plan(
    spec_file: Path = typer.Argument(..., exists=True, help="BenchmarkRun YAML"),
    lscpu_json: Path | None = typer.Option(
        None, help="Plan for another machine: output of `lscpu -e --json` taken there."
    ),
    ceph_version: str | None = typer.Option(None, help="Ceph version of the target."),
) -> None:
    """Show what a run would do: CPU layout, Ceph options, steps. Touches nothing."""
    try:
        name, spec = load_spec(spec_file)
        run_plan = build_plan(name, spec, _topology(lscpu_json), ceph_version)
    except CrimsonBenchError as exc:
        _fail(exc)
        return
    out = Console()
    out.print(plan_table(run_plan))
    for section, options in run_plan.ceph.config.items():
        for key, value in options.items():
            out.print(f"ceph config set {section} {key} {value}")
    for cmd in run_plan.ceph.commands:
        out.print("ceph " + " ".join(cmd))
    per_step = len(run_plan.steps[0].jobs) if run_plan.steps else 0
    step_s = spec.sweep.runtime_seconds + spec.sweep.ramp_seconds
    out.print(
        f"{len(run_plan.steps)} steps x {per_step} fio processes, "
        f"at least {len(run_plan.steps) * step_s / 60:.1f} min of fio"
    )


@app.command()
def crd() -> None:
    """Print the BenchmarkRun CRD (generated from the models)."""
    from crimsonbench.spec.crd import render_crd

    sys.stdout.write(render_crd())


@app.callback()
def main(verbose: bool = typer.Option(False, "--verbose", "-v")) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


@contextmanager
def _metrics(port: int | None, results_dir: Path) -> Iterator[None]:
    """Serve /metrics from the results directory while the run goes on."""
    if port is None:
        yield
        return
    from prometheus_client import start_http_server

    from crimsonbench.metrics import RunCollector, new_registry, state_from_store

    registry = new_registry(RunCollector(lambda: state_from_store(results_dir)))
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    console.print(f"metrics: http://127.0.0.1:{server.server_port}/metrics")
    try:
        yield
    finally:
        server.shutdown()
        thread.join(timeout=5)


@app.command()
def run(
    spec_file: Path = typer.Argument(..., exists=True, help="BenchmarkRun YAML (target.local)"),
    results: Path | None = typer.Option(
        None, help="Results directory; default results/<name>. Finished steps are kept."
    ),
    fresh: bool = typer.Option(False, help="Delete earlier results in the directory first."),
    metrics_port: int | None = typer.Option(
        None, help="Serve Prometheus metrics on this port while running (0 = any free port)."
    ),
) -> None:
    """Run the sweep on this machine against a throwaway real Ceph cluster."""
    from crimsonbench.local.runner import LocalRun
    from crimsonbench.progress import RichEvents
    from crimsonbench.reports.report import write_report

    try:
        name, spec = load_spec(spec_file)
        results_dir = results or Path("results") / name
        with RichEvents(console) as events:
            runner = LocalRun(name, spec, results_dir, events, fresh=fresh)
            with _metrics(metrics_port, results_dir):
                outcome = runner.execute()
    except CrimsonBenchError as exc:
        _fail(exc)
        return
    if outcome.results:
        paths = write_report(outcome.results_dir)
        console.print(f"report: {outcome.results_dir / 'report'} ({len(paths)} files)")
        summary = outcome.results_dir / "report" / "summary.md"
        if summary.exists():
            from rich.markdown import Markdown

            Console().print(Markdown(summary.read_text()))
    if outcome.phase.value != "Completed":
        raise typer.Exit(130 if "interrupted" in outcome.message else 1)


@app.command()
def report(results_dir: Path = typer.Argument(..., exists=True, file_okay=False)) -> None:
    """Recompute tables, CSV/JSON and plots from a results directory (no cluster needed)."""
    from crimsonbench.reports.report import write_report

    for path in write_report(results_dir):
        typer.echo(path)


@app.command()
def compare(
    results_dirs: list[Path] = typer.Argument(..., exists=True, file_okay=False),
    out: Path = typer.Option(Path("comparison"), help="Output directory."),
) -> None:
    """Compare two or more runs side by side (policy vs policy, backend vs backend)."""
    from crimsonbench.reports.report import write_comparison

    if len(results_dirs) < 2:
        raise typer.BadParameter("give at least two results directories")
    for path in write_comparison(results_dirs, out):
        typer.echo(path)


if __name__ == "__main__":
    app()
