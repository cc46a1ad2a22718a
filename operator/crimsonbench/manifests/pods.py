"""The pod shape every Job of a run shares.

Every pod: restartPolicy Never in a Job with backoffLimit 0 (a failed step is recorded,
not retried behind the operator's back), an activeDeadlineSeconds, no service account
token, non-root (uid/gid 167, the `ceph` user of Ceph's images), no privilege
escalation, all capabilities dropped, RuntimeDefault seccomp, Guaranteed resources.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from crimsonbench.manifests.ceph_access import (
    CephAccess,
    ceph_access_env,
    ceph_access_mounts,
    ceph_access_volumes,
)
from crimsonbench.manifests.naming import metadata

CEPH_UID = 167  # the `ceph` user and group of Ceph's container images


@dataclass(frozen=True)
class PodOptions:
    """What the operator's settings say about every pod it makes."""

    image: str  # the fio runner image (fio with the rbd engine, ceph CLI, lscpu)
    image_pull_policy: str = "IfNotPresent"
    host_network: bool = False  # for Ceph clusters only the host reaches, nodes without CNI
    tolerations: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class ScriptJob:
    """A Job with one container running a shell script; with `access` it reaches Ceph
    (the script must start with ceph_config_script), without it holds no Ceph secret."""

    name: str
    namespace: str
    labels: dict[str, str]
    script: str
    access: CephAccess | None
    cpu: str
    memory: str
    deadline_s: int
    node: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[Mapping[str, Any], ...] = ()
    volumes: tuple[Mapping[str, Any], ...] = ()
    mounts: tuple[Mapping[str, Any], ...] = ()
    ports: tuple[Mapping[str, Any], ...] = ()
    readiness: Mapping[str, Any] | None = None


def script_job(j: ScriptJob, opts: PodOptions) -> dict[str, Any]:
    if j.access is not None and j.access.namespace != j.namespace:
        raise ValueError(f"a pod reading {j.access.secret_name} must run in {j.access.namespace}")
    env = ceph_access_env(j.access) if j.access else []
    mounts = ceph_access_mounts(j.access) if j.access else []
    volumes = ceph_access_volumes(j.access) if j.access else []
    container: dict[str, Any] = {
        "name": "fio",
        "image": opts.image,
        "imagePullPolicy": opts.image_pull_policy,
        "command": ["sh", "-c", j.script, "crimsonbench", *j.args],
        "env": [*env, *map(dict, j.env)],
        "resources": guaranteed(j.cpu, j.memory),
        "volumeMounts": [*mounts, *map(dict, j.mounts)],
        "securityContext": container_security(),
    }
    if not container["env"]:
        del container["env"]
    if j.ports:
        container["ports"] = [dict(p) for p in j.ports]
    if j.readiness is not None:
        container["readinessProbe"] = dict(j.readiness)
    pod = pod_spec([container], [*volumes, *map(dict, j.volumes)], j.node, opts, opts.tolerations)
    return job(j.name, j.namespace, j.labels, pod, j.deadline_s)


def job(
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


def pod_spec(
    containers: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
    node: str | None,
    opts: PodOptions,
    tolerations: Sequence[Mapping[str, Any]],
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
    if opts.host_network:
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


def container_security() -> dict[str, Any]:
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def guaranteed(cpu: str, memory: str) -> dict[str, Any]:
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}
