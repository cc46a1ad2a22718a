"""What a done step's output says (the driver's sections: fio's JSON, its messages, the
IOPS logs) and what its client nodes' CPU logs say: the parts of step_decide's verdict on
an attempt that read its output."""

from __future__ import annotations

from collections.abc import Mapping

from crimsonbench.errors import CrimsonBenchError, ExecutionError
from crimsonbench.manifests.fio_driver import StepReport
from crimsonbench.plan.types import RunPlan
from crimsonbench.results import step_log
from crimsonbench.results.fio_doc import find_json_document
from crimsonbench.results.fio_json import JobStats, parse_fio_json
from crimsonbench.results.node_cpu import load_in_window
from crimsonbench.results.validity import CpuSetLoad, time_based_runtime

OSD_NODES_NOT_SAMPLED = (
    "interference and steal on the OSD nodes: not measured by the operator (no sampler "
    "runs beside Rook's OSDs; local mode measures them); the client nodes' are"
)


def client_loads(
    plan: RunPlan, node_cpu: Mapping[str, str | None] | None, r: StepReport
) -> tuple[tuple[CpuSetLoad, ...] | None, list[str]]:
    """What else ran on each client node's planned CPUs while the step was measured (its
    last `runtime` seconds before the driver saw fio end, when time-based), from the fio
    servers' CPU logs; and why, where it cannot be said. The node's clock is taken as the
    driver's (a cluster's nodes keep time together)."""
    if node_cpu is None:
        return None, ["interference on the client nodes: their CPU logs were not read"]
    runtime = time_based_runtime(plan)
    start = r.ended - runtime if runtime else r.started
    loads, notes = [], []
    for c in plan.clients:
        text = node_cpu.get(c.name)
        if text is None:
            notes.append(f"client {c.name}: its fio server's CPU log could not be read")
            continue
        got = load_in_window(f"client {c.name}", c.cpus, text, start, r.ended)
        if isinstance(got, str):
            notes.append(got)
        else:
            loads.append(got)
    return (tuple(loads) if loads else None), notes


def failure_text(sections: Mapping[str, str], output: str) -> str:
    """What a failed step said: fio's own messages when it printed some (a fio client's
    JSON says nothing about why), else the output's tail."""
    said = sections.get(step_log.FIO_MESSAGES, "").strip()
    doc = find_json_document(sections.get(step_log.FIO_OUTPUT, "")) or {}
    errors = [
        f"{j.get('jobname')} on {j.get('hostname')}: error {j.get('error')}"
        for j in doc.get("client_stats", doc.get("jobs", []))
        if j.get("error")
    ]
    if said or errors:
        return "fio said: " + "; ".join(errors) + (f"\n{said[-1500:]}" if said else "")
    return f"output tail:\n{output[-1500:] or '(empty)'}"


def unparsable(output: str) -> str:
    try:
        step_log.parse_sections(output)
    except CrimsonBenchError as exc:
        return str(exc)
    return "no output"


def fio_jobs(sections: Mapping[str, str], servers: Mapping[str, str]) -> dict[str, list[JobStats]]:
    """fio's jobs per client, by the server (host:port) that ran each."""
    by_addr = {addr: client for client, addr in servers.items()}
    out: dict[str, list[JobStats]] = {}
    for job in parse_fio_json(step_log.fio_output(sections)):
        client = by_addr.get(job.host)
        if client is None:
            raise ExecutionError(f"fio reported a job from unknown server {job.host}")
        out.setdefault(client, []).append(job)
    return out
