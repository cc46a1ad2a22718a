"""batch/v1 Jobs of a run (topology probe, prefill, one fio Job per step and client node),
the ConfigMaps carrying their fio job files, how their pods reach Ceph, and the Rook
CephClient / CephBlockPool of the benchmark pool.

Every pod: restartPolicy Never in a Job with backoffLimit 0 (a failed step is recorded,
not retried behind the operator's back), activeDeadlineSeconds = fio runtime + ramp +
grace, no ttlSecondsAfterFinished (the operator reads the log, then deletes the Job), no
service account token, non-root (uid/gid 167, the `ceph` user of Ceph's images), no
privilege escalation, all capabilities dropped, RuntimeDefault seccomp. fio's
cpus_allowed (in the job file) and taskset pin fio; no extra capability needed.

fio results travel through the pod log: the container prints each fio JSON file between
`==> <job>.json <==` delimiter lines once every fio process has ended (parse_step_log
reads them back). The kubelet keeps one log file of containerLogMaxSize (10 MiB by
default); a step's JSON is a few KiB per fio process, so far below that.

Pods that use Ceph must run in the namespace of the Secret they read: the Rook cluster's
namespace for Rook (where rook-ceph-mon lives), the BenchmarkRun's for external clusters.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crimsonbench.errors import InvalidSpec, ParseError
from crimsonbench.manifests.naming import GROUP, dns_name, labels, metadata
from crimsonbench.plan.topology import LSCPU_COMMAND
from crimsonbench.plan.types import FioJob, RunPlan, Step
from crimsonbench.results.fio_json import find_json_document
from crimsonbench.spec.cpuset import parse_cpuset
from crimsonbench.spec.models import BenchmarkRunSpec, ExternalTarget, size_bytes

CEPH_UID = 167  # the `ceph` user and group of Ceph's container images
CEPH_CONF = "/etc/ceph/ceph.conf"
JOBS_DIR = "/jobs"
RESULTS_DIR = "/results"
SECRET_DIR = "/var/lib/crimsonbench"  # the cephx key (Rook) or keyring (external)
MON_ENDPOINTS_DIR = "/etc/rook"  # as in Rook's toolbox-job example

DEFAULT_GRACE_SECONDS = 120  # beyond fio runtime + ramp: pull, connect, write the output
PREFILL_DEADLINE_SECONDS = 6 * 3600  # default; prefill_deadline_seconds() is tighter
MIN_PREFILL_MIB_S = 5.0  # slowest prefill rate before we call it hung (as local mode)
FIO_MEMORY_BASE_MIB = 128
FIO_MEMORY_PER_PROCESS_MIB = 256  # librbd + fio buffers of one fio process
ROLE_RBD_CLEANUP = "rbd-cleanup"  # the one Job of a run that outlives the run's other Jobs
CONFIGMAP_LIMIT = 1_000_000  # keys + values; the API server allows 1 MiB per ConfigMap

_JOB_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")  # ConfigMap keys; also safe in the sh script
_DELIMITER = re.compile(r"^==> (?P<name>[A-Za-z0-9_.-]+) <==$", re.MULTILINE)

# Written into the pod's ceph.conf (which beats the mon database for this client only):
# the librbd settings local mode sets, so Rook and local runs measure the same client.
CLIENT_OPTIONS = {"rbd_cache": "false", "rbd_io_scheduler": "none"}


# ---------------------------------------------------------------- reaching Ceph


@dataclass(frozen=True)
class CephAccess:
    """How a pod reaches Ceph: the monitors, a cephx user and its secret.

    The Secret holds either the bare cephx key (secret_is_keyring=False; a keyring is
    written from it, as Rook's toolbox does) or a whole keyring file. The user name comes
    literally (username) or from a key of the same Secret (username_key); "client." is
    added when missing. The monitors come literally (mon_host) or from Rook's endpoints
    ConfigMap ("a=10.0.0.1:6789,b=..."; mon names are stripped, as toolbox.sh does).
    """

    namespace: str  # the pods' namespace: Secrets and ConfigMaps are only mounted from it
    secret_name: str
    secret_key: str
    secret_is_keyring: bool = False
    username: str | None = None
    username_key: str | None = None
    mon_host: str | None = None
    mon_endpoints_configmap: str | None = None
    mon_endpoints_key: str = "data"

    def __post_init__(self) -> None:
        if (self.username is None) == (self.username_key is None):
            raise ValueError("CephAccess needs exactly one of username and username_key")
        if (self.mon_host is None) == (self.mon_endpoints_configmap is None):
            raise ValueError("CephAccess needs exactly one of mon_host and mon_endpoints_configmap")


def rook_access(namespace: str = "rook-ceph") -> CephAccess:
    """The Rook cluster's admin credentials, as Rook's toolbox-job example uses them:
    Secret rook-ceph-mon (ceph-username, ceph-secret), ConfigMap rook-ceph-mon-endpoints."""
    return CephAccess(
        namespace=namespace,
        secret_name="rook-ceph-mon",
        secret_key="ceph-secret",
        username_key="ceph-username",
        mon_endpoints_configmap="rook-ceph-mon-endpoints",
    )


def rook_client_access(namespace: str, client_name: str) -> CephAccess:
    """The user of a Rook CephClient named client_name: Rook writes Secret
    rook-ceph-client-<name> with userID (the name) and userKey (the cephx key). fio's
    clientname (spec.client.user) must then be that name."""
    return CephAccess(
        namespace=namespace,
        secret_name=f"rook-ceph-client-{client_name}",
        secret_key="userKey",
        username_key="userID",
        mon_endpoints_configmap="rook-ceph-mon-endpoints",
    )


def external_access(namespace: str, target: ExternalTarget) -> CephAccess:
    """An external cluster: mon_host from the spec, a keyring file from keyringSecret (in
    the BenchmarkRun's namespace, which is therefore where the pods run)."""
    if target.keyring_secret is None:
        raise InvalidSpec(
            "spec.target.external.keyringSecret",
            "the operator reads the keyring from a Secret; create one "
            "(kubectl create secret generic NAME --from-file=keyring=...) and name it here",
        )
    return CephAccess(
        namespace=namespace,
        secret_name=target.keyring_secret.name,
        secret_key=target.keyring_secret.key,
        secret_is_keyring=True,
        username=target.user,
        mon_host=target.mon_host,
    )


def ceph_access_for(spec: BenchmarkRunSpec, run_namespace: str) -> CephAccess:
    """The default access of a spec: Rook's admin credentials or the external keyring."""
    if spec.target.rook is not None:
        return rook_access(spec.target.rook.namespace)
    if spec.target.external is not None:
        return external_access(run_namespace, spec.target.external)
    raise InvalidSpec("spec.target", "local targets run without Kubernetes; no pod reaches them")


# The first part of every Ceph-using container: writes /etc/ceph/ceph.conf and a keyring
# from the mounted Secret/ConfigMap (the entrypoint does what the toolbox's init container
# does, so the pod has one container to size).
CEPH_CONFIG_SCRIPT = f"""\
set -eu
umask 077
if [ -n "${{CEPH_MON_HOST:-}}" ]; then
  mon_host="$CEPH_MON_HOST"
else
  mon_host=$(sed -E 's/[a-z0-9_-]+=//g' {MON_ENDPOINTS_DIR}/mon-endpoints)
fi
user="$CEPH_USERNAME"
case "$user" in client.*) ;; *) user="client.$user" ;; esac
if [ -f {SECRET_DIR}/keyring ]; then
  keyring={SECRET_DIR}/keyring
else
  keyring=/etc/ceph/keyring
  printf '[%s]\\nkey = %s\\n' "$user" "$(cat {SECRET_DIR}/secret)" > "$keyring"
fi
cat > {CEPH_CONF} <<EOF
[global]
mon_host = $mon_host
keyring = $keyring

[client]
{chr(10).join(f"{k} = {v}" for k, v in CLIENT_OPTIONS.items())}
EOF
"""


def ceph_access_volumes(access: CephAccess) -> list[dict[str, Any]]:
    path = "keyring" if access.secret_is_keyring else "secret"
    items = [{"key": access.secret_key, "path": path}]
    volumes: list[dict[str, Any]] = [
        {"name": "ceph-config", "emptyDir": {}},
        {
            "name": "ceph-secret",
            # 0440 + fsGroup: readable by the non-root ceph group, by nobody else
            "secret": {"secretName": access.secret_name, "items": items, "defaultMode": 0o440},
        },
    ]
    if access.mon_endpoints_configmap is not None:
        volumes.append(
            {
                "name": "mon-endpoints",
                "configMap": {
                    "name": access.mon_endpoints_configmap,
                    "items": [{"key": access.mon_endpoints_key, "path": "mon-endpoints"}],
                },
            }
        )
    return volumes


def ceph_access_mounts(access: CephAccess) -> list[dict[str, Any]]:
    mounts: list[dict[str, Any]] = [
        {"name": "ceph-config", "mountPath": "/etc/ceph"},
        {"name": "ceph-secret", "mountPath": SECRET_DIR, "readOnly": True},
    ]
    if access.mon_endpoints_configmap is not None:
        mounts.append({"name": "mon-endpoints", "mountPath": MON_ENDPOINTS_DIR, "readOnly": True})
    return mounts


def ceph_access_env(access: CephAccess) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": "CEPH_CONF", "value": CEPH_CONF}]
    if access.username_key is not None:
        ref = {"name": access.secret_name, "key": access.username_key}
        env.append({"name": "CEPH_USERNAME", "valueFrom": {"secretKeyRef": ref}})
    else:
        env.append({"name": "CEPH_USERNAME", "value": access.username})
    if access.mon_host is not None:
        env.append({"name": "CEPH_MON_HOST", "value": access.mon_host})
    return env


# ---------------------------------------------------------------- names


def step_job_name(run: str, step_id: str, node: str) -> str:
    return dns_name(run, step_id, node)


def prefill_job_name(run: str) -> str:
    return dns_name(run, "prefill")


def probe_job_name(run: str, node: str) -> str:
    return dns_name(run, "lscpu", node)


def jobs_configmap_name(run: str, step_id_or_prefill: str) -> str:
    return dns_name(run, "fio", step_id_or_prefill)


# ---------------------------------------------------------------- ConfigMaps of job files


def fio_jobs_configmap(
    run: str, step_or_prefill: Step | Sequence[FioJob], *, namespace: str | None = None
) -> dict[str, Any]:
    """The job files of a step (or of the prefill: pass plan.prefill_jobs), one key per
    fio process: `<job name>.fio`. Mounted at /jobs by the step's (prefill's) Jobs."""
    if isinstance(step_or_prefill, Step):
        key, jobs, step_label = step_or_prefill.id, step_or_prefill.jobs, step_or_prefill.id
        role = "fio"
    else:
        key, jobs, step_label, role = "prefill", tuple(step_or_prefill), None, "prefill"
    data = {f"{_checked_name(j.name)}.fio": j.job_file for j in jobs}
    size = sum(len(k) + len(v.encode()) for k, v in data.items())
    if size > CONFIGMAP_LIMIT:
        raise InvalidSpec(
            "spec.client.images",
            f"the {len(jobs)} fio job files of {key} take {size} bytes, more than a ConfigMap "
            "holds (1 MiB); use fewer images or processesPerImage",
        )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(
            jobs_configmap_name(run, key), namespace, labels(run, role, step_label), None
        ),
        "data": data,
    }


def _checked_name(name: str) -> str:
    if not _JOB_NAME.match(name):
        raise ValueError(f"fio job name {name!r} is not a valid file or ConfigMap key name")
    return name


# ---------------------------------------------------------------- Jobs


# Prefill only, before FIO_SCRIPT: create the images that do not exist yet (CB_IMAGES,
# space separated; names are [A-Za-z0-9_.-]) as the cephx user of the pod.
IMAGES_SCRIPT = """\
for img in ${CB_IMAGES:-}; do
  rbd --name "$user" info "$CB_POOL/$img" > /dev/null 2>&1 \\
    || rbd --name "$user" create --size "${CB_IMAGE_BYTES}B" "$CB_POOL/$img"
done
"""

# Runs after CEPH_CONFIG_SCRIPT. "$@" are the job names; one fio per job file, in parallel.
# CB_CPUS (a step's client CPU set) pins each whole fio process, as local mode does: the
# job files' cpus_allowed pins only the job processes, not fio's own main thread.
FIO_SCRIPT = f"""\
pin=""
if [ -n "${{CB_CPUS:-}}" ]; then pin="taskset -c $CB_CPUS"; fi
pids=""
for name in "$@"; do
  $pin fio --output-format=json --output="{RESULTS_DIR}/$name.json" "{JOBS_DIR}/$name.fio" \\
    > "{RESULTS_DIR}/$name.log" 2>&1 &
  pids="$pids $!"
done
rc=0
for pid in $pids; do
  wait "$pid" || rc=$?
done
for name in "$@"; do
  if [ -s "{RESULTS_DIR}/$name.log" ]; then
    echo "==> $name.log <=="
    cat "{RESULTS_DIR}/$name.log"
  fi
done
for name in "$@"; do
  echo "==> $name.json <=="
  cat "{RESULTS_DIR}/$name.json" 2>/dev/null || true
  echo
done
exit "$rc"
"""


def fio_step_job(
    run: str,
    step: Step,
    node: str,
    image: str,
    ceph_access: CephAccess,
    cpus: str,
    *,
    jobs: Sequence[FioJob] | None = None,
    memory: str | None = None,
    grace_seconds: int = DEFAULT_GRACE_SECONDS,
    image_pull_policy: str = "IfNotPresent",
    host_network: bool = False,
    tolerations: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The Job running one step's fio processes on one client node.

    cpus: the client CPU set (plan.cpu.client_cpuset); the container asks for that many
    whole CPUs with requests == limits (Guaranteed). jobs: the subset of step.jobs this
    node runs when a step is spread over several client nodes (default: all of them).
    """
    chosen = tuple(step.jobs if jobs is None else jobs)
    if not chosen:
        raise ValueError(f"step {step.id} has no fio jobs for node {node}")
    seconds = max(_fio_seconds(j.job_file) for j in chosen)
    return _fio_job(
        name=step_job_name(run, step.id, node),
        labels_=labels(run, "fio", step.id, node),
        configmap=jobs_configmap_name(run, step.id),
        names=[_checked_name(j.name) for j in chosen],
        node=node,
        image=image,
        access=ceph_access,
        cpu_count=len(parse_cpuset(cpus)),
        memory=memory or _fio_memory(len(chosen)),
        deadline=seconds + grace_seconds,
        image_pull_policy=image_pull_policy,
        host_network=host_network,
        tolerations=tolerations,
        extra_env=[{"name": "CB_CPUS", "value": cpus}],
    )


def prefill_job(
    run: str,
    plan: RunPlan,
    image: str,
    ceph_access: CephAccess,
    *,
    spec: BenchmarkRunSpec | None = None,
    node: str | None = None,
    deadline_seconds: int | None = None,
    memory: str | None = None,
    image_pull_policy: str = "IfNotPresent",
    host_network: bool = False,
    tolerations: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The Job writing every image once (plan.prefill_jobs, all in parallel; job files in
    fio_jobs_configmap(run, plan.prefill_jobs)). With `spec`, it first creates the
    images of plan.images that do not exist yet (spec.client.pool, imageSize), so it is
    needed even when client.prefill is false, and its deadline defaults to
    prefill_deadline_seconds(spec). The pool must exist (cephblockpool). The job files pin
    fio to the client CPU set, so pass the client node when there is one."""
    if not plan.prefill_jobs and spec is None:
        raise ValueError("nothing to do: the plan has no prefill jobs and no spec was given")
    if deadline_seconds is None:
        deadline_seconds = (
            prefill_deadline_seconds(spec) if spec is not None else PREFILL_DEADLINE_SECONDS
        )
    env: list[dict[str, Any]] = []
    if spec is not None:
        env = [
            {"name": "CB_POOL", "value": spec.client.pool},
            {"name": "CB_IMAGES", "value": " ".join(_checked_name(i) for i in plan.images)},
            {"name": "CB_IMAGE_BYTES", "value": str(size_bytes(spec.client.image_size))},
        ]
    if plan.cpu.client_cpuset:  # pinned like the steps: prefill shares the node with the OSDs
        env.append({"name": "CB_CPUS", "value": plan.cpu.client_cpuset})
    return _fio_job(
        name=prefill_job_name(run),
        labels_=labels(run, "prefill", None, node),
        configmap=jobs_configmap_name(run, "prefill"),
        names=[_checked_name(j.name) for j in plan.prefill_jobs],
        node=node,
        image=image,
        access=ceph_access,
        cpu_count=max(1, len(plan.cpu.client)),
        memory=memory or _fio_memory(max(1, len(plan.prefill_jobs))),
        deadline=deadline_seconds,
        image_pull_policy=image_pull_policy,
        host_network=host_network,
        tolerations=tolerations,
        extra_env=env,
        script=CEPH_CONFIG_SCRIPT + (IMAGES_SCRIPT if spec is not None else "") + FIO_SCRIPT,
    )


def ceph_commands_job(
    run: str,
    purpose: str,
    commands: Sequence[Sequence[str]],
    image: str,
    ceph_access: CephAccess,
    *,
    deadline_seconds: int = 300,
    image_pull_policy: str = "IfNotPresent",
    host_network: bool = False,
    tolerations: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """A Job running `ceph <args>` for each command, in order, as the access's user: the
    crimson prerequisites before OSDs roll out (`osd set-allow-crimson`) and the
    `config rm` cleanup Rook does not do when cephConfig keys are removed."""
    if not commands:
        raise ValueError("no ceph commands to run")
    lines = [
        'ceph --name "$user" ' + " ".join(shlex.quote(str(a)) for a in cmd) for cmd in commands
    ]
    return _maintenance_job(
        dns_name(run, "ceph", purpose),
        labels(run, f"ceph-{purpose}"),
        CEPH_CONFIG_SCRIPT + "set -x\n" + "\n".join(lines) + "\n",
        image,
        ceph_access,
        deadline_seconds=deadline_seconds,
        image_pull_policy=image_pull_policy,
        host_network=host_network,
        tolerations=tolerations,
    )


def _maintenance_job(
    name: str,
    labels_: dict[str, str],
    script: str,
    image: str,
    access: CephAccess,
    *,
    deadline_seconds: int,
    env: Sequence[dict[str, Any]] = (),
    **pod: Any,
) -> dict[str, Any]:
    """A one-CPU Job running `script` against Ceph, outside any step. It outlives the run's
    other Jobs (e.g. cleanup after the run is gone), so nobody deletes it: the TTL does."""
    job = _fio_job(
        name=name,
        labels_=labels_,
        configmap="",
        names=[],
        node=None,
        image=image,
        access=access,
        cpu_count=1,
        memory="256Mi",
        deadline=deadline_seconds,
        extra_env=env,
        script=script,
        **pod,
    )
    job["spec"]["ttlSecondsAfterFinished"] = 3600
    return job


# Removes the run's images (CB_IMAGES) from CB_POOL; absent ones are fine. fio pods of a
# deleted Job may still hold a watch for a few seconds, so `rbd rm` is retried for a while.
REMOVE_IMAGES_SCRIPT = """\
for img in ${CB_IMAGES:-}; do
  tries=0
  while rbd --name "$user" info "$CB_POOL/$img" > /dev/null 2>&1; do
    rbd --name "$user" rm --no-progress "$CB_POOL/$img" && break
    tries=$((tries + 1))
    [ "$tries" -lt 30 ] || exit 1
    sleep 2
  done
done
"""


def remove_images_job(
    run: str,
    pool: str,
    images: Sequence[str],
    image: str,
    ceph_access: CephAccess,
    *,
    deadline_seconds: int = 300,
    image_pull_policy: str = "IfNotPresent",
    host_network: bool = False,
    tolerations: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """A Job removing the run's RBD images: on external clusters nothing else does (on Rook
    the run's CephBlockPool goes, and its images with it)."""
    if not images:
        raise ValueError("no images to remove")
    return _maintenance_job(
        dns_name(run, "rbd", "cleanup"),
        labels(run, ROLE_RBD_CLEANUP),
        CEPH_CONFIG_SCRIPT + REMOVE_IMAGES_SCRIPT,
        image,
        ceph_access,
        env=[
            {"name": "CB_POOL", "value": pool},
            {"name": "CB_IMAGES", "value": " ".join(_checked_name(i) for i in images)},
        ],
        deadline_seconds=deadline_seconds,
        image_pull_policy=image_pull_policy,
        host_network=host_network,
        tolerations=tolerations,
    )


def prefill_deadline_seconds(
    spec: BenchmarkRunSpec, grace_seconds: int = DEFAULT_GRACE_SECONDS
) -> int:
    """Time for writing every image at MIN_PREFILL_MIB_S in total, plus grace."""
    mib = spec.client.images * size_bytes(spec.client.image_size) / 2**20
    return math.ceil(mib / MIN_PREFILL_MIB_S) + grace_seconds


def topology_probe_job(
    run: str,
    node: str,
    image: str,
    *,
    namespace: str | None = None,
    image_pull_policy: str = "IfNotPresent",
    deadline_seconds: int = 300,
    host_network: bool = False,
    tolerations: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """A Job printing `lscpu -e=CPU,NODE,SOCKET,CORE,ONLINE --json` on `node` (its log is
    the JSON parse_lscpu_json reads). It tolerates every taint: storage nodes are often
    tainted, and the node is chosen explicitly (`tolerations` are accepted for a uniform
    call, and ignored). No privilege: /sys shows the host's CPUs to any container; the host
    network only where pods have no other (host_network)."""
    container = {
        "name": "lscpu",
        "image": image,
        "imagePullPolicy": image_pull_policy,
        "command": shlex.split(LSCPU_COMMAND),
        "resources": _guaranteed("100m", "64Mi"),
        "securityContext": _container_security(),
    }
    del tolerations  # already tolerates everything
    pod = _pod_spec([container], [], node, host_network, [{"operator": "Exists"}])
    name = probe_job_name(run, node)
    return _job(name, namespace, labels(run, "probe", None, node), pod, deadline_seconds)


def _fio_job(
    *,
    name: str,
    labels_: dict[str, str],
    configmap: str,
    names: list[str],
    node: str | None,
    image: str,
    access: CephAccess,
    cpu_count: int,
    memory: str,
    deadline: int,
    image_pull_policy: str,
    host_network: bool,
    tolerations: Sequence[Mapping[str, Any]],
    extra_env: Sequence[dict[str, Any]] = (),
    script: str = CEPH_CONFIG_SCRIPT + FIO_SCRIPT,
) -> dict[str, Any]:
    mounts = ceph_access_mounts(access)
    volumes = ceph_access_volumes(access)
    if names:  # no job files, no ConfigMap to wait for
        mounts.append({"name": "jobs", "mountPath": JOBS_DIR, "readOnly": True})
        volumes.append({"name": "jobs", "configMap": {"name": configmap}})
    mounts.append({"name": "results", "mountPath": RESULTS_DIR})
    volumes.append({"name": "results", "emptyDir": {}})
    container = {
        "name": "fio",
        "image": image,
        "imagePullPolicy": image_pull_policy,
        "command": ["sh", "-c", script, "crimsonbench-fio", *names],
        "env": [*ceph_access_env(access), *extra_env],
        "resources": _guaranteed(str(cpu_count), memory),
        "volumeMounts": mounts,
        "securityContext": _container_security(),
    }
    pod = _pod_spec([container], volumes, node, host_network, list(tolerations))
    return _job(name, access.namespace, labels_, pod, deadline)


def _job(
    name: str, namespace: str | None, labels_: dict[str, str], pod: dict[str, Any], deadline: int
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(name, namespace, labels_, None),
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": int(deadline),
            "template": {"metadata": {"labels": dict(labels_)}, "spec": pod},
        },
    }


def _pod_spec(
    containers: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
    node: str | None,
    host_network: bool,
    tolerations: list[Mapping[str, Any]],
) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
    }
    if node is not None:
        # matchFields on metadata.name: the node's exact name, through the scheduler (unlike
        # nodeName, resources are still checked); the hostname label may differ from it
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        pod["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
    if host_network:
        pod["hostNetwork"] = True
        pod["dnsPolicy"] = "ClusterFirstWithHostNet"
    if tolerations:
        pod["tolerations"] = [dict(t) for t in tolerations]
    pod["securityContext"] = {
        "runAsNonRoot": True,
        "runAsUser": CEPH_UID,
        "runAsGroup": CEPH_UID,
        "fsGroup": CEPH_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    pod["containers"] = containers
    if volumes:
        pod["volumes"] = volumes
    return pod


def _container_security() -> dict[str, Any]:
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def _guaranteed(cpu: str, memory: str) -> dict[str, Any]:
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}


def _fio_memory(processes: int) -> str:
    return f"{FIO_MEMORY_BASE_MIB + FIO_MEMORY_PER_PROCESS_MIB * processes}Mi"


def _fio_seconds(job_file: str) -> int:
    """runtime + ramp_time of a time-based job file (the planner always writes both)."""
    values = dict(re.findall(r"^(runtime|ramp_time)=(\d+)\s*$", job_file, re.MULTILINE))
    if "runtime" not in values:
        raise ValueError("fio job file has no runtime=; a step's jobs are time based")
    return int(values["runtime"]) + int(values.get("ramp_time", 0))


# ---------------------------------------------------------------- the pod log


def parse_step_log(text: str, expected: Iterable[str] | None = None) -> dict[str, str]:
    """Job name -> fio's JSON output (as fio wrote it, notes before the JSON included), from
    the log of a fio_step_job / prefill_job pod. Raises ParseError when there is no
    delimiter, when a job's section holds no JSON object, or when an expected job is
    missing."""
    matches = list(_DELIMITER.finditer(text))
    if not matches:
        head = text.strip()[:200] or "(empty log)"
        raise ParseError(
            f"no '==> <job>.json <==' delimiter in the fio pod log; it starts with: {head}"
        )
    sections: dict[str, str] = {}
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        name = match["name"]
        if name in sections:
            raise ParseError(f"the fio pod log has two sections {name}")
        sections[name] = text[match.end() : end].strip("\n")
    out: dict[str, str] = {}
    for name, body in sections.items():
        if not name.endswith(".json"):
            continue
        job = name[: -len(".json")]
        if find_json_document(body) is None:
            log = sections.get(f"{job}.log", "").strip()
            why = f"; fio said: {log[-500:]}" if log else ""
            raise ParseError(f"fio wrote no JSON for job {job}{why}")
        out[job] = body + "\n"
    missing = sorted(set(expected or ()) - set(out))
    if missing:
        raise ParseError(f"the fio pod log has no output for job(s) {', '.join(missing)}")
    if not out:
        raise ParseError("the fio pod log has no '==> <job>.json <==' section")
    return out


def format_step_log(outputs: Mapping[str, str], logs: Mapping[str, str] | None = None) -> str:
    """What the fio container prints (for tests and fakes): the inverse of parse_step_log."""
    parts = [f"==> {name}.log <==\n{text.rstrip(chr(10))}\n" for name, text in (logs or {}).items()]
    parts += [f"==> {name}.json <==\n{text.rstrip(chr(10))}\n\n" for name, text in outputs.items()]
    return "".join(parts)


# ---------------------------------------------------------------- Rook client and pool


def ceph_client(run: str, pool: str, *, namespace: str | None = None) -> dict[str, Any]:
    """A Rook CephClient named after the run (cephx user client.<run>) that can use RBD
    images in the benchmark pool and nothing else. Rook stores its key in Secret
    rook-ceph-client-<run> (rook_client_access)."""
    return {
        "apiVersion": "ceph.rook.io/v1",
        "kind": "CephClient",
        "metadata": metadata(run, namespace, labels(run, "client"), None),
        "spec": {"caps": {"mon": "profile rbd", "osd": f"profile rbd pool={pool}"}},
    }


# Why a CephBlockPool and not `ceph osd pool create` from a Job:
# - the pool is created by Rook with its own admin key; our pods never need rights to
#   create or delete pools, so fio can run as the pool-limited CephClient above;
# - it is declarative: Rook creates the CRUSH rule for failureDomain osd, applies size 1
#   (`--yes-i-really-mean-it` included) and the parameters, and keeps them;
# - deleting the CR deletes the pool (with images when rook.io/force-deletion is set),
#   so cleanup is one API call that survives an operator restart.
# The costs: Rook adopts an existing Ceph pool of the same name and sets it to size 1, so
# the operator must check that spec.client.pool does not exist yet (`ceph osd pool ls`)
# before creating this; and the Ceph pool is named after the CR (Rook's CRD allows
# spec.name only for .mgr, .nfs and .rgw.root), so the pool name must be a valid object
# name (lower case, no `_`) on Rook.
FORCE_DELETION = "rook.io/force-deletion"
_OBJECT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def cephblockpool(
    run: str, spec: BenchmarkRunSpec, *, namespace: str | None = None
) -> dict[str, Any]:
    """A size-1 replicated pool named spec.client.pool (the CR has the pool's name) with a
    fixed PG count (autoscaler off), like local mode's pool, labelled with the run. Unless
    keepImages, deleting the CR also deletes the images in it."""
    pool = spec.client.pool
    if not _OBJECT_NAME.match(pool) or len(pool) > 253:
        raise InvalidSpec(
            "spec.client.pool",
            f"{pool!r}: on Rook the pool is a CephBlockPool named like the pool, so use lower "
            "case letters, digits, '-' and '.' only (e.g. rbd-bench)",
        )
    pg = str(spec.client.pg_num)
    annotations = None if spec.keep_images else {FORCE_DELETION: "true"}
    return {
        "apiVersion": "ceph.rook.io/v1",
        "kind": "CephBlockPool",
        "metadata": metadata(pool, namespace, labels(run, "pool"), annotations),
        "spec": {
            "failureDomain": "osd",
            "replicated": {"size": 1, "requireSafeReplicaSize": False},
            "parameters": {"pg_autoscale_mode": "off", "pg_num": pg, "pgp_num": pg},
        },
    }


__all__ = [
    "CEPH_CONFIG_SCRIPT",
    "FIO_SCRIPT",
    "GROUP",
    "IMAGES_SCRIPT",
    "CephAccess",
    "ceph_access_env",
    "ceph_access_for",
    "ceph_access_mounts",
    "ceph_access_volumes",
    "ceph_client",
    "cephblockpool",
    "external_access",
    "fio_jobs_configmap",
    "fio_step_job",
    "format_step_log",
    "parse_step_log",
    "prefill_deadline_seconds",
    "prefill_job",
    "rook_access",
    "rook_client_access",
    "topology_probe_job",
]
