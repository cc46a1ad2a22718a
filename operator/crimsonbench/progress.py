"""Rich live display for local runs: phase, step i/n, live IOPS, and a row per step.

Messages and notes quote what the user wrote (names, paths, values) and what tools said:
they are printed as Text, literally, never parsed as rich markup."""

from __future__ import annotations

import shlex

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from crimsonbench.plan.types import RunPlan, Step
from crimsonbench.results.types import StepResult
from crimsonbench.spec.status import Phase


class RichEvents:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("{task.description}", style="bold", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[live]}", markup=False),
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
        self.console.print(Text(phase.value, style=style) + ": " + Text(message))

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
            self.console.print(Text(f"  {step.id}: {note}"))
            return
        self.progress.advance(self.task)
        f, r = result.fio, result.resources
        line = Text(
            f"  {step.id}: {f.iops:,.0f} IOPS {f.bw_mib_s:,.1f} MiB/s clat {f.clat_mean_ms:.3f}"
            f"±{f.clat_stdev_ms:.3f} ms p99 {f.clat_p99_ms:.3f} ms | OSD {r.osd_cpu:.0f}% "
            f"{r.osd_mem_mib:.0f} MiB | fio {r.fio_cpu:.0f}%"
        )
        if note:
            line += Text("  ") + Text(note, style="yellow")
        self.console.print(line)


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


def plan_table(plan: RunPlan) -> Table:
    first = plan.hosts[0].cpu
    table = Table(title=f"CPU plan ({first.policy}, hyper-threads {first.hyper_threads})")
    table.add_column("node")
    table.add_column("who")
    table.add_column("reactors / affinity")
    table.add_column("count", justify="right")
    table.add_column("alien")
    for host in plan.hosts:
        for osd in host.cpu.osds:
            table.add_row(
                *map(
                    Text,  # cells are plain text, never markup (node names come from users)
                    (
                        host.node or "this machine",
                        f"osd.{osd.osd_id}",
                        osd.cpuset,
                        str(len(osd.reactors)),
                        osd.alien_cpuset or "-",
                    ),
                )
            )
    for client in plan.clients:
        images = f"{len(client.images)} images"
        row = (client.node or "this machine", f"fio {client.name}", client.cpuset,
               str(len(client.cpus)), images)  # fmt: skip
        table.add_row(*map(Text, row))
    return table


def ceph_lines(plan: RunPlan) -> list[str]:
    """The plan's Ceph settings as shell lines to paste: every word quoted for sh."""
    lines = [
        shlex.join(["ceph", "config", "set", section, key, str(value)])
        for section, options in plan.ceph.config.items()
        for key, value in options.items()
    ]
    lines += [shlex.join(["ceph", *map(str, cmd)]) for cmd in plan.ceph.commands]
    return lines
