"""Rich live display for local runs: phase, step i/n, live IOPS, and a row per step."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from crimsonbench.plan.types import Step
from crimsonbench.results.types import StepResult
from crimsonbench.spec.status import Phase


class RichEvents:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[live]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.task = self.progress.add_task("starting", total=None, live="")

    def __enter__(self) -> RichEvents:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def phase(self, phase: Phase, message: str) -> None:
        style = {"Failed": "red", "Completed": "green"}.get(phase.value, "cyan")
        self.console.print(f"[{style}]{phase.value}[/]: {message}")

    def step_started(self, step: Step, done: int, total: int) -> None:
        self.progress.update(
            self.task,
            description=f"{step.workload} qd={step.iodepth}",
            completed=done,
            total=total,
            live="",
        )

    def live(self, iops: float) -> None:
        self.progress.update(self.task, live=f"{iops:,.0f} IOPS")

    def step_finished(self, step: Step, result: StepResult | None, note: str) -> None:
        if result is None:
            self.console.print(f"  {step.id}: {note}")
            return
        self.progress.advance(self.task)
        f, r = result.fio, result.resources
        self.console.print(
            f"  {step.id}: {f.iops:,.0f} IOPS {f.bw_mib_s:,.1f} MiB/s clat {f.clat_mean_ms:.3f}"
            f"±{f.clat_stdev_ms:.3f} ms p99 {f.clat_p99_ms:.3f} ms | OSD {r.osd_cpu:.0f}% "
            f"{r.osd_mem_mib:.0f} MiB | fio {r.fio_cpu:.0f}%"
            + (f"  [yellow]{note}[/]" if note else "")
        )


class QuietEvents:
    """For tests and scripts: remember what happened, print nothing."""

    def __init__(self) -> None:
        self.phases: list[tuple[Phase, str]] = []
        self.notes: list[tuple[str, str]] = []

    def phase(self, phase: Phase, message: str) -> None:
        self.phases.append((phase, message))

    def step_started(self, step: Step, done: int, total: int) -> None:
        pass

    def live(self, iops: float) -> None:
        pass

    def step_finished(self, step: Step, result: StepResult | None, note: str) -> None:
        self.notes.append((step.id, note))
