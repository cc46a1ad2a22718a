"""fio on Kubernetes, in fio's own client/server mode.

- One fio server per client node (a Job that lives for the run): `fio --server` pinned with
  taskset to the client's CPUs, with /etc/ceph for the rbd engine. Its jobs fork from it,
  so they inherit the pinning; the job files' cpus_allowed pins them again.
- One `fio --client` per step (and one for the prefill), run by exec in the run's fio
  driver pod (manifests/fio_driver.py): it sends every server its job files
  (`--client=ip:ADDR,PORT a.fio b.fio --client=...`), so every server starts at once.

Long-lived servers and driver: no pod starts per step.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from crimsonbench.manifests.ceph_access import CephAccess, ceph_config_script
from crimsonbench.manifests.naming import dns_name, labels
from crimsonbench.manifests.pods import PodOptions, ScriptJob, script_job
from crimsonbench.plan.types import ClientPlan, FioJob, RunPlan

FIO_PORT = 8765  # fio's default server port
FIO_OUTPUT = "fio.json"
FIO_MEMORY_BASE_MIB = 128
FIO_MEMORY_PER_JOB_MIB = 256  # librbd + fio buffers of one job
ROLE_SERVER = "fio-server"

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")  # ConfigMap keys; also safe in the sh script


def server_job_name(run: str, client: str) -> str:
    return dns_name(run, "fio-server", client)


def checked_name(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"name {name!r} is not a valid file or ConfigMap key name")
    return name


# ---------------------------------------------------------------- servers

# After ceph_config_script. taskset pins the server: every job it forks inherits the set.
SERVER_SCRIPT = """\
exec taskset -c "$CB_CPUS" fio --server="ip:0.0.0.0,$CB_PORT"
"""


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
    jobs = len(client.images) * _jobs_per_image(plan)
    return script_job(
        ScriptJob(
            name=server_job_name(run, client.name),
            namespace=access.namespace,
            labels=labels(run, ROLE_SERVER, None, client.node),
            script=ceph_config_script(plan.client_options) + SERVER_SCRIPT,
            access=access,
            cpu=str(len(client.cpus)),
            memory=f"{FIO_MEMORY_BASE_MIB + FIO_MEMORY_PER_JOB_MIB * jobs}Mi",
            deadline_s=run_deadline_s(plan),
            node=client.node,
            env=(
                {"name": "CB_CPUS", "value": client.cpuset},
                {"name": "CB_PORT", "value": str(port)},
            ),
            ports=({"name": "fio", "containerPort": port},),
            readiness={"tcpSocket": {"port": port}, "periodSeconds": 1},
        ),
        opts,
    )


def _jobs_per_image(plan: RunPlan) -> int:
    per_step = max((len(s.jobs) for s in plan.steps), default=1)
    return max(1, math.ceil(per_step / max(1, len(plan.images)))) * plan.fio_numjobs


# ---------------------------------------------------------------- job files


_CLIENTNAME = re.compile(r"^clientname=.*$", re.MULTILINE)


def job_files(jobs: Sequence[FioJob], user: str | None = None) -> dict[str, str]:
    """The job files of a step (or of the prefill), `<job name>.fio` each.

    user: the cephx user the fio servers hold a key for (the plan's pool.user), named in
    every job's `clientname`. On Rook that is the run's own CephClient, while the planner
    (plan/fio_jobs.py) writes spec.client.user there; librbd then asks for client.admin,
    whose key the servers do not have, and every job fails (seen on live Rook). A no-op
    once the planner names the plan's user itself."""
    return {f"{checked_name(j.name)}.fio": _named_user(j.job_file, user) for j in jobs}


def _named_user(job_file: str, user: str | None) -> str:
    if user is None:
        return job_file
    checked_name(user)  # a cephx user name: no newline or '=' can get into the file
    return _CLIENTNAME.sub(f"clientname={user}", job_file)


def client_args(
    jobs: Sequence[FioJob], servers: Mapping[str, str], *, jobs_dir: str = "."
) -> list[str]:
    """`--client=ip:ADDR,PORT` and that client's job files, for every client with jobs.
    servers: client name -> "ADDR:PORT" of its fio server."""
    args: list[str] = []
    for client in sorted({j.client for j in jobs}):
        host, _, port = servers[client].rpartition(":")
        args.append(f"--client=ip:{host},{port}")
        args += [f"{jobs_dir}/{checked_name(j.name)}.fio" for j in jobs if j.client == client]
    return args
