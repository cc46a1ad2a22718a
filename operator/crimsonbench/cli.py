"""crimsonbench: the command line. Thin: parse, call the planner/runner/reports, print.

Every failure the user can cause (a bad spec, a bad path, an unreachable cluster) ends in
one readable message and a non-zero exit: 2 for bad input, 1 for a run that failed,
130 for an interrupted run. Tracebacks are for bugs only.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from crimsonbench import cli_inputs as given
from crimsonbench.cli_common import EXIT_BAD_INPUT, Output, console, kube_api
from crimsonbench.cli_common import guard as _guard
from crimsonbench.cli_common import literal_error as _literal_error
from crimsonbench.cli_common import stdout as _stdout
from crimsonbench.cli_inputs import BadInput
from crimsonbench.cli_study import fetch_study, study
from crimsonbench.errors import ExecutionError
from crimsonbench.plan.build import build_plan
from crimsonbench.progress import ceph_lines, plan_table
from crimsonbench.results.store import NotAResultsDirectory, ResultStore
from crimsonbench.spec.models import load_spec, validate_name
from crimsonbench.spec.names import validate_namespace

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="CPU-pinned fio sweeps against Ceph Crimson and classic OSDs.",
)
app.command()(study)
app.command(name="fetch-study")(fetch_study)


@app.command()
def plan(
    spec_file: Path = typer.Argument(..., help="BenchmarkRun YAML"),
    lscpu_json: Path | None = typer.Option(
        None, help="Plan for another machine: output of `lscpu -e --json` taken there."
    ),
    ceph_version: str | None = typer.Option(None, help="Ceph version of the target."),
) -> None:
    """Show what a run would do: CPU layout, Ceph options, steps. Touches nothing."""
    with _guard():
        name, spec = load_spec(spec_file)
        ceph_version = given.ceph_version(ceph_version)
        here = lscpu_json is None  # else another machine: its memory and disks are unknown
        if ceph_version is None and here:
            ceph_version = given.local_version(spec)
        run_plan = build_plan(name, spec, given.topology(lscpu_json), ceph_version=ceph_version)
        given.capacity(spec, here)
    out = _stdout()
    out.print(plan_table(run_plan))
    for line in ceph_lines(run_plan):
        out.print(line, markup=False, highlight=False)
    per_step = len(run_plan.fio.jobs) * run_plan.fio_numjobs
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
def _metrics(port: int | None, results_dir: Path, address: str = "127.0.0.1") -> Iterator[None]:
    """Serve /metrics from the results directory while the run goes on (on loopback
    unless told otherwise: a run's names and figures are not for the whole network)."""
    if port is None:
        yield
        return
    from prometheus_client import start_http_server

    from crimsonbench.metrics import RunCollector, new_registry, state_from_store

    registry = new_registry(RunCollector(lambda: state_from_store(results_dir)))
    try:
        server, thread = start_http_server(port, addr=address, registry=registry)
    except OSError as exc:
        raise BadInput(f"--metrics-port {port} --metrics-address {address}: {exc}") from exc
    host = f"[{address}]" if ":" in address else address
    console.print(f"metrics: http://{host}:{server.server_port}/metrics", markup=False)
    try:
        yield
    finally:
        server.shutdown()
        thread.join(timeout=5)


def _print_table(store: ResultStore, output: Output, written: list[Path]) -> None:
    """The final table on stdout in the chosen format (paths: the files written)."""
    from crimsonbench.reports.report import final_table

    if output == Output.PATHS:
        for path in written:
            typer.echo(path)
        return
    text = final_table(store.root, output.value)
    if output == Output.MARKDOWN and sys.stdout.isatty():
        from rich.markdown import Markdown

        Console().print(Markdown(text))
    else:
        sys.stdout.write(text)


@app.command()
def run(
    spec_file: Path = typer.Argument(..., help="BenchmarkRun YAML (target.local)"),
    results: Path | None = typer.Option(
        None, help="Results directory; default results/<name>. Finished steps are kept."
    ),
    fresh: bool = typer.Option(False, help="Delete earlier results in the directory first."),
    metrics_port: int | None = typer.Option(
        None, help="Serve Prometheus metrics on this port while running (0 = any free port)."
    ),
    metrics_address: str = typer.Option(
        "127.0.0.1", help="Address the metrics are served on (0.0.0.0: every interface)."
    ),
    wait_cpus: float = typer.Option(
        0.0,
        min=0.0,
        help="Wait up to this many seconds for CPUs another run pins (queue); "
        "default: refuse at once, naming that run.",
    ),
    output: Output = typer.Option(Output.MARKDOWN, help="How to print the final table."),
) -> None:
    """Run the sweep on this machine against a throwaway real Ceph cluster."""
    from crimsonbench.local.runner import LocalRun
    from crimsonbench.local.signals import stop_exits
    from crimsonbench.progress import RichEvents

    # outside the run's own handlers (before its cluster exists, or once it is gone)
    with _guard(), stop_exits(130):
        name, spec = load_spec(spec_file)
        results_dir = results or Path("results") / name
        if results_dir.exists() and not results_dir.is_dir():
            raise BadInput(f"--results {results_dir} is a file, not a directory")
        with RichEvents(console) as events:
            runner = LocalRun(name, spec, results_dir, events, fresh=fresh,
                              spec_file=spec_file.absolute(), cpu_wait_s=wait_cpus)  # fmt: skip
            with _metrics(metrics_port, results_dir, metrics_address):
                outcome = runner.execute()
        if outcome.results:
            _report_of_run(outcome.results_dir, output)
        if outcome.phase.value != "Completed":
            raise typer.Exit(130 if "interrupted" in outcome.message else 1)


def _report_of_run(results_dir: Path, output: Output) -> None:
    """The report of what a run kept. A full disk or a Ctrl-C here leaves the results as
    they are: `crimsonbench report` makes it from them later."""
    from crimsonbench.reports.report import write_report

    later = f"crimsonbench report {results_dir} makes it from the results alone"
    with _guard():  # the run's own files, but read as untrusted as any others
        try:
            paths = write_report(results_dir)
        except OSError as exc:  # a full disk: the run's own message said so already
            raise ExecutionError(f"the report was not written ({exc}); {later}") from exc
        console.print(f"report: {results_dir / 'report'} ({len(paths)} files)", markup=False)
        _print_table(ResultStore(results_dir), output, paths)


@app.command()
def report(
    results_dir: Path = typer.Argument(..., help="A results directory (run or fetch wrote it)."),
    output: Output = typer.Option(Output.PATHS, help="What to print on stdout."),
) -> None:
    """Recompute tables, CSV/JSON and plots from a results directory (no cluster needed).
    An unusable file in it (each one listed) or a link inside it is refused, exit 2, and
    nothing is written."""
    from crimsonbench.reports.report import write_report

    with _guard():
        store = given.store(results_dir)
        try:
            written = write_report(store.root)
        except NotAResultsDirectory as exc:  # names files and values: printed literally
            _literal_error(str(exc), EXIT_BAD_INPUT)
        except OSError as exc:
            raise BadInput(f"cannot write the report of {store.root}: {exc}") from exc
        unfinished = store.scan_steps().unfinished
        if unfinished:
            console.print(
                f"note: {len(unfinished)} unfinished step(s) (no result.json) left out: "
                + ", ".join(unfinished),
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        _print_table(store, output, written)


@app.command()
def compare(
    results_dirs: list[Path] = typer.Argument(
        ..., help="BASE then one or more NEW results directories."
    ),
    out: Path = typer.Option(Path("comparison"), help="Output directory."),
    threshold: float = typer.Option(
        5.0, min=0.0, help="A regression is worse by more than this many % (and significant)."
    ),
    alpha: float = typer.Option(0.05, min=0.0001, max=0.5, help="Significance level."),
    allow_untested: bool = typer.Option(
        False,
        help="Let rows that cannot be tested (one repeat and too short or no per-second IOPS "
        "series, a step only in NEW) pass the gate, listed as such. Missing steps, missing "
        "figures and regressions still fail.",
    ),
    allow_suspect: bool = typer.Option(
        False,
        help="Judge rows whose steps are suspect (interference, unsteady, jobs apart, a "
        "fault: see README) like any other; without it such a row is untested.",
    ),
) -> None:
    """Compare runs with the first (policy vs policy, backend vs backend): peaks side by
    side, curves overlaid, and a verdict per workload and iodepth. A CI job can gate on
    it: exit 1, listing every reason, when NEW is worse than BASE beyond --threshold
    (significantly), lacks a step BASE has, has a figure that is not a number, or has a
    row that could not be tested; exit 2 (one error naming the files) when a results
    directory cannot be read."""
    from crimsonbench.reports.report import write_comparison

    with _guard():
        if len(results_dirs) < 2:
            raise BadInput("compare needs at least two results directories")
        stores = [given.store(d) for d in results_dirs]
        given.comparison_dir(out, stores)
        try:
            done = write_comparison([s.root for s in stores], out, threshold, alpha,
                                    allow_untested, allow_suspect)  # fmt: skip
        except NotAResultsDirectory as exc:  # names files and values: printed literally
            _literal_error(str(exc), EXIT_BAD_INPUT)
        except OSError as exc:
            raise BadInput(f"cannot write the comparison into --out {out}: {exc}") from exc
    for path in done.written:
        console.print(str(path), markup=False, highlight=False, soft_wrap=True)
    sys.stdout.write(done.verdicts)
    if done.allowed:
        console.print(
            f"note: {len(done.allowed)} untested row(s) allowed by --allow-untested",
            markup=False,
            highlight=False,
        )
    if done.failures:
        console.print(f"[bold red]gate failed[/] ({len(done.failures)}):", soft_wrap=True)
        for name, failure in done.failures:
            console.print(
                f"  {name}: {failure.line()}", markup=False, highlight=False, soft_wrap=True
            )
        raise typer.Exit(1)


@app.command()
def fetch(
    run_name: str = typer.Argument(..., metavar="RUN", help="BenchmarkRun name (or ns/name)."),
    namespace: str = typer.Option("default", "--namespace", "-n"),
    results: Path | None = typer.Option(None, help="Results directory; default results/<run>."),
    kubeconfig: Path | None = typer.Option(None, help="Default: $KUBECONFIG or ~/.kube/config."),
    context: str | None = typer.Option(None, help="kubeconfig context."),
) -> None:
    """Write a Kubernetes run's results as a local results directory (for report/compare)."""
    with _guard():
        if "/" in run_name:
            namespace, run_name = run_name.split("/", 1)
        # Names as the API server allows them: the run's name becomes results/<run>.
        validate_name(run_name, field="RUN")
        validate_namespace(namespace, field="--namespace")
        try:
            from crimsonbench.controller.fetch import FetchError, fetch_run, write_results_dir
        except ImportError as exc:
            raise BadInput(
                f"fetch needs the kubernetes client ({exc.name}): "
                "pip install 'crimsonbench[operator]'"
            ) from exc
        api = kube_api("fetch", kubeconfig, context)
        with api:
            try:
                fetched = fetch_run(api, namespace, run_name)
            except FetchError as exc:
                raise BadInput(str(exc)) from exc
            except OSError as exc:  # urllib3 wraps connection errors in these
                raise BadInput(f"cannot reach the API server: {exc}") from exc
        target = results or Path("results") / run_name
        store = ResultStore(target)
        if store.read_spec() not in (None, fetched.spec):
            raise BadInput(f"{target} holds results of another spec; pick another --results")
        write_results_dir(fetched, store)
    if fetched.note:
        console.print(Text("warning:", style="yellow") + " " + Text(fetched.note))
    done = f"{len(fetched.results)} steps of {namespace}/{run_name} in {target}"
    console.print(done, markup=False)
    typer.echo(target)


@app.command(name="operator")
def run_operator(
    namespace: list[str] = typer.Option(
        [], "--namespace", "-n", help="Watch these namespaces (default: all)."
    ),
    liveness: str | None = typer.Option(None, help="e.g. http://0.0.0.0:8080/healthz"),
) -> None:
    """Run the operator in this process against the kubeconfig's cluster (development;
    the image runs `kopf run -m crimsonbench.controller.main`)."""
    with _guard():
        try:
            from crimsonbench.controller.main import run_here  # registers the handlers
        except ImportError as exc:
            raise BadInput(
                f"the operator needs {exc.name}: pip install 'crimsonbench[operator]'"
            ) from exc
    run_here(namespace, liveness)


def entry() -> None:
    """The `crimsonbench` command. Once it is done, a late Ctrl-C cannot turn its exit
    status into a traceback while the interpreter shuts down."""
    try:
        app()
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


if __name__ == "__main__":
    entry()
