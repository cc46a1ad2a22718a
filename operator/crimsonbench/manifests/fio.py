"""fio on Kubernetes, in fio's own client/server mode.

- One fio server per client node (a Job that lives for the run): `fio --server` pinned with
  taskset to the client's CPUs, with /etc/ceph for the rbd engine. Its jobs fork from it,
  so they inherit the pinning; the job files' cpus_allowed pins them again. Beside it a
  sampler logs the node's planned CPUs once a second, so a step's verdict can say what else
  ran on them (results/node_cpu.py).
- One `fio --client` per step (and one for the prefill), run by exec in the run's fio
  driver pod (manifests/fio_driver.py): it sends every server its one job file
  (`--client=ip:ADDR,PORT a.fio --client=...`), so every server starts at once, and every
  job of a server's file runs at once (the same file local mode runs).

Long-lived servers and driver: no pod starts per step.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

from crimsonbench.manifests.ceph_access import CephAccess, ceph_config_script
from crimsonbench.manifests.naming import dns_name, labels
from crimsonbench.manifests.pods import PodOptions, ScriptJob, script_job
from crimsonbench.plan.fio_jobs import prefill_job_file, step_job_files
from crimsonbench.plan.types import BarrierAddress, ClientPlan, RunPlan, Step

FIO_PORT = 8765  # fio's default server port
BARRIER_PORT = 8766  # the step's start barrier, in the fio driver pod (start_barrier.py)
FIO_OUTPUT = "fio.json"
FIO_MEMORY_BASE_MIB = 128
FIO_MEMORY_PER_JOB_MIB = 256  # librbd + fio buffers of one job
ROLE_SERVER = "fio-server"
CPU_SAMPLER = "cpu-sampler.sh"  # beside this file, sourced into the server's script

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")  # ConfigMap keys; also safe in the sh script


def server_job_name(run: str, client: str) -> str:
    return dns_name(run, "fio-server", client)


def checked_name(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"name {name!r} is not a valid file or ConfigMap key name")
    return name


# ---------------------------------------------------------------- servers

# After ceph_config_script. taskset pins the server: every job it forks inherits the set.
# in /tmp: a step's start barrier (exec_prerun) writes <job>.prerun.txt where fio runs
# It listens on the pod's own address only (CB_POD_IP, from the API), not 0.0.0.0.
# The CPU sampler (cpu-sampler.sh) logs the node's planned CPUs for the step's verdict on
# the container's log (the operator reads it with pods/log: exec only reaches the driver).
SERVER_START = """\
cd /tmp
cpu_sampler "$CB_CPU_LIST" < /dev/null 2> /dev/null &
case "$CB_POD_IP" in *:*) proto=ip6 ;; *) proto=ip ;; esac
exec taskset -c "$CB_CPUS" fio --server="$proto:$CB_POD_IP,$CB_PORT"
"""


@functools.cache
def cpu_sampler_script() -> str:
    """The sampler's shell function, `cpu_sampler "CPU CPU ..."`, without the file's
    header (the pod spec carries the code, the file explains it)."""
    text = resources.files("crimsonbench.manifests").joinpath(CPU_SAMPLER).read_text()
    return "".join(ln for ln in text.splitlines(keepends=True) if not ln.startswith("#"))


def server_script() -> str:
    return cpu_sampler_script() + SERVER_START


def run_deadline_s(plan: RunPlan) -> int:
    """How long a server may live: the prefill and every step at their deadlines."""
    return plan.prefill.deadline_s + len(plan.steps) * (plan.timing.deadline_s + 60)


def fio_server_job(
    run: str,
    client: ClientPlan,
    plan: RunPlan,
    access: CephAccess,
    opts: PodOptions,
    *,
    port: int = FIO_PORT,
) -> dict[str, Any]:
    """The fio server of one client node: Guaranteed with the client's CPU count (a
    kubelet with the static CPU manager grants that many exclusive CPUs, which must then
    be the plan's), Ready once it accepts connections."""
    if client.node is None:
        raise ValueError(f"client {client.name} has no node; local clients need no server")
    jobs = len(plan.fio.jobs_of(client.name)) * plan.fio_numjobs
    return script_job(
        ScriptJob(
            name=server_job_name(run, client.name),
            namespace=access.namespace,
            labels=labels(run, ROLE_SERVER, None, client.node),
            script=ceph_config_script(plan.client_options) + server_script(),
            access=access,
            cpu=str(len(client.cpus)),
            memory=f"{FIO_MEMORY_BASE_MIB + FIO_MEMORY_PER_JOB_MIB * jobs}Mi",
            deadline_s=run_deadline_s(plan),
            node=client.node,
            env=(
                {"name": "CB_CPUS", "value": client.cpuset},
                {"name": "CB_CPU_LIST", "value": " ".join(map(str, client.cpus))},
                {"name": "CB_PORT", "value": str(port)},
                {"name": "CB_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            ),
            ports=({"name": "fio", "containerPort": port},),
            readiness={"tcpSocket": {"port": port}, "periodSeconds": 1},
        ),
        opts,
    )


# ---------------------------------------------------------------- job files


def client_job_files(
    plan: RunPlan, step: Step | None, meet: BarrierAddress | None = None
) -> dict[str, str]:
    """client name -> its job file, for a step or (step None) the prefill: every client
    with jobs gets one file, rendered now (plan/fio_jobs.py), the same text local mode runs.
    meet: where a step's jobs meet before they start (its start barrier, if it has one)."""
    if step is None:
        clients = sorted({j.client for j in plan.prefill.jobs})
        return {c: prefill_job_file(plan, c) for c in clients}
    return step_job_files(plan, step, meet)


def job_file_name(client: str) -> str:
    return f"{checked_name(client)}.fio"


def client_args(
    clients: Iterable[str], servers: Mapping[str, str], *, jobs_dir: str = "."
) -> list[str]:
    """`--client=ip:ADDR,PORT` and that client's one job file, for every client.
    servers: client name -> "ADDR:PORT" of its fio server."""
    args: list[str] = []
    for client in sorted(clients):
        host, _, port = servers[client].rpartition(":")
        args += [f"--client=ip:{host},{port}", f"{jobs_dir}/{job_file_name(client)}"]
    return args
