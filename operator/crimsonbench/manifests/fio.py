"""fio on Kubernetes, in fio's own client/server mode.

- One fio server per client node (a Job that lives for the run): `fio --server` pinned with
  taskset to the client's CPUs, with /etc/ceph for the rbd engine. Its jobs fork from it,
  so they inherit the pinning; the job files' cpus_allowed pins them again.
- One fio client per step (and one for the prefill): a small Job that sends every server
  its job files (`--client=ip:ADDR,PORT a.fio b.fio --client=...`), so every server starts
  at once, and prints the combined JSON and the per-job IOPS logs between
  `==> name <==` delimiter lines (results.step_log reads them back). It holds no Ceph
  secret: the servers do the I/O.

Long-lived servers remove the per-step pod start from every step; only the client's
small pod starts per step.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from crimsonbench.errors import InvalidSpec
from crimsonbench.manifests.ceph_access import CephAccess, ceph_config_script
from crimsonbench.manifests.naming import dns_name, labels, metadata
from crimsonbench.manifests.pods import PodOptions, ScriptJob, script_job
from crimsonbench.plan.types import ClientPlan, FioJob, RunPlan

FIO_PORT = 8765  # fio's default server port
JOBS_DIR = "/jobs"
RESULTS_DIR = "/results"
FIO_OUTPUT = "fio.json"
CONFIGMAP_LIMIT = 1_000_000  # keys + values; the API server allows 1 MiB per ConfigMap
FIO_MEMORY_BASE_MIB = 128
FIO_MEMORY_PER_JOB_MIB = 256  # librbd + fio buffers of one job
ROLE_SERVER, ROLE_CLIENT = "fio-server", "fio"

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")  # ConfigMap keys; also safe in the sh script


def server_job_name(run: str, client: str) -> str:
    return dns_name(run, "fio-server", client)


def client_job_name(run: str, key: str) -> str:
    """key: a step id, or "prefill"."""
    return dns_name(run, key)


def jobs_configmap_name(run: str, key: str) -> str:
    return dns_name(run, "fio", key)


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


def fio_jobs_configmap(
    run: str, key: str, jobs: Sequence[FioJob], namespace: str, *, user: str | None = None
) -> dict[str, Any]:
    """The job files of a step (or of the prefill), `<job name>.fio` each, mounted at /jobs
    by the fio client Job.

    user: the cephx user the fio servers hold a key for (the plan's pool.user), named in
    every job's `clientname`. On Rook that is the run's own CephClient, while the planner
    (plan/fio_jobs.py) writes spec.client.user there; librbd then asks for client.admin,
    whose key the servers do not have, and every job fails (seen on live Rook). A no-op
    once the planner names the plan's user itself."""
    data = {f"{checked_name(j.name)}.fio": _named_user(j.job_file, user) for j in jobs}
    size = sum(len(k) + len(v.encode()) for k, v in data.items())
    if size > CONFIGMAP_LIMIT:
        raise InvalidSpec(
            "spec.client.images",
            f"the {len(jobs)} fio job files of {key} take {size} bytes, more than a ConfigMap "
            "holds (1 MiB); use fewer images or processesPerImage",
        )
    role = "prefill" if key == "prefill" else ROLE_CLIENT
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(
            jobs_configmap_name(run, key), namespace, labels(run, role, key), None
        ),
        "data": data,
    }


# ---------------------------------------------------------------- the client of a step

# "$@": --client=ip:ADDR,PORT /jobs/a.fio ... per server. fio writes the IOPS logs in its
# working directory (<job>_iops.<n>.log.<server>), printed after the JSON.
CLIENT_SCRIPT = f"""\
cd {RESULTS_DIR}
rc=0
fio --output-format=json+ --output={FIO_OUTPUT} "$@" > fio.log 2>&1 || rc=$?
if [ -s fio.log ]; then echo "==> fio.log <=="; cat fio.log; fi
echo "==> {FIO_OUTPUT} <=="
cat {FIO_OUTPUT} 2>/dev/null || true
echo
for f in *_iops.*.log*; do
  [ -e "$f" ] || continue
  echo "==> $f <=="
  cat "$f"
done
exit "$rc"
"""


def _named_user(job_file: str, user: str | None) -> str:
    if user is None:
        return job_file
    checked_name(user)  # a cephx user name: no newline or '=' can get into the file
    return _CLIENTNAME.sub(f"clientname={user}", job_file)


def client_args(jobs: Sequence[FioJob], servers: Mapping[str, str]) -> list[str]:
    """`--client=ip:ADDR,PORT` and that client's job files, for every client with jobs.
    servers: client name -> "ADDR:PORT" of its fio server."""
    args: list[str] = []
    for client in sorted({j.client for j in jobs}):
        host, _, port = servers[client].rpartition(":")
        args.append(f"--client=ip:{host},{port}")
        args += [f"{JOBS_DIR}/{checked_name(j.name)}.fio" for j in jobs if j.client == client]
    return args


def fio_client_job(
    run: str,
    key: str,
    jobs: Sequence[FioJob],
    servers: Mapping[str, str],
    namespace: str,
    opts: PodOptions,
    *,
    deadline_s: int,
    node: str | None = None,
) -> dict[str, Any]:
    """The fio client of a step or of the prefill (key "prefill"). It needs no Ceph
    access; its CPU use is the status exchange with the servers."""
    if not jobs:
        raise ValueError(f"{key} has no fio jobs")
    role = "prefill" if key == "prefill" else ROLE_CLIENT
    return script_job(
        ScriptJob(
            name=client_job_name(run, key),
            namespace=namespace,
            labels=labels(run, role, None if role == "prefill" else key),
            script=CLIENT_SCRIPT,
            access=None,
            cpu="100m",
            memory="128Mi",
            deadline_s=deadline_s,
            node=node,
            args=tuple(client_args(jobs, servers)),
            volumes=(
                {"name": "jobs", "configMap": {"name": jobs_configmap_name(run, key)}},
                {"name": "results", "emptyDir": {}},
            ),
            mounts=(
                {"name": "jobs", "mountPath": JOBS_DIR, "readOnly": True},
                {"name": "results", "mountPath": RESULTS_DIR},
            ),
        ),
        opts,
    )
