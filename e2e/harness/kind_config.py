"""e2e/kind/kind-config.yaml, rendered for one cluster."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from harness.builds import REPO

CONFIG = REPO / "e2e" / "kind" / "kind-config.yaml"


class MissingHostPath(RuntimeError):
    """A mount's host path does not exist (docker would create it: never change the host)."""


def render_config(
    node_image_labels: dict[str, str],
    workers: int,
    host_dev: bool,
    cpu_manager: bool,
    worker_mounts: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """e2e/kind/kind-config.yaml for this run: the etcd tag the node image carries, WORKERS
    workers like the file's first, host /dev in the workers (loop devices attached later
    appear in them), the static CPU manager patch dropped if not wanted, WORKER_MOUNTS
    (kind extraMounts) added to every worker."""
    cfg: dict[str, Any] = yaml.safe_load(CONFIG.read_text())
    etcd_tag = node_image_labels.get("crimsonbench.etcd-image-tag")
    if not etcd_tag:
        raise RuntimeError("node image has no crimsonbench.etcd-image-tag label")
    patches = []
    for p in cfg.get("kubeadmConfigPatches", []):
        doc = yaml.safe_load(p)
        if doc.get("kind") == "ClusterConfiguration" and "etcd" in doc:
            doc["etcd"]["local"]["imageTag"] = etcd_tag
        patches.append(yaml.safe_dump(doc))
    cfg["kubeadmConfigPatches"] = patches
    nodes = cfg["nodes"]
    control = [n for n in nodes if n["role"] == "control-plane"]
    worker = dict(next(n for n in nodes if n["role"] == "worker"))
    if not cpu_manager:
        worker.pop("kubeadmConfigPatchesJSON6902", None)
    if host_dev:
        worker["extraMounts"] = [*worker.get("extraMounts", []),
                                 {"hostPath": "/dev", "containerPath": "/dev"}]  # fmt: skip
    if worker_mounts:
        worker["extraMounts"] = [*worker.get("extraMounts", []), *map(dict, worker_mounts)]
    for m in worker.get("extraMounts", []):
        # docker would create a missing host path: never let it change the host
        if not Path(m["hostPath"]).exists():
            raise MissingHostPath(f"extraMounts: {m['hostPath']} does not exist on this host")
    cfg["nodes"] = [*control, *[copy.deepcopy(worker) for _ in range(workers)]]
    return cfg
