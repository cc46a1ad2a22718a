"""The operator's RBAC: a ServiceAccount, a least-privilege ClusterRole and its binding.

    python -m crimsonbench.manifests.rbac [NAMESPACE] > manifests/rbac.yaml

regenerates the checked-in file (tests/manifests/test_rbac.py fails when they differ).
No wildcards and no cluster-admin: every resource and verb the operator (and kopf) uses
is listed with the reason. ClusterRole because runs live in any namespace and the Rook
cluster in its own; Secrets are only ever read (`get`, never list/watch).
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

from crimsonbench.manifests.naming import APP, LABEL_NAME
from crimsonbench.spec.api import GROUP, PLURAL

DEFAULT_NAMESPACE = "crimsonbench"
DEFAULT_NAME = "crimsonbench-operator"

READ = ["get", "list", "watch"]

# (apiGroup, resources, verbs, why)
RULES: tuple[tuple[str, tuple[str, ...], list[str], str], ...] = (
    (GROUP, (PLURAL,), [*READ, "patch", "update"],
     "the runs: watch them, add/remove the finalizer"),
    (GROUP, (f"{PLURAL}/status",), ["get", "patch", "update"],
     "progress, results and conditions"),
    (GROUP, (f"{PLURAL}/finalizers",), ["update"],
     "owner references with blockOwnerDeletion on children"),
    ("ceph.rook.io", ("cephclusters",), [*READ, "patch"],
     "read the cluster, patch cephConfig/resources/placement and restore them"),
    ("ceph.rook.io", ("cephclients", "cephblockpools"), ["create", "delete", *READ],
     "the run's pool-limited cephx user and its size-1 pool"),
    ("batch", ("jobs",), ["create", "delete", *READ],
     "topology probe, fio servers and driver, image and config Jobs"),
    ("batch", ("jobs/status",), ["get"], "whether a Job succeeded"),
    ("", ("pods",), READ, "the pods of those Jobs"),
    ("", ("pods/log",), ["get"], "lscpu's output and the cluster's facts come through the log"),
    ("", ("configmaps",), ["create", "update", "patch", "delete", "deletecollection", *READ],
     "results, topology cache, the original CephCluster spec"),
    ("", ("secrets",), ["get"], "Rook's mon secret and external keyrings (read only)"),
    ("", ("events",), ["create", "patch"], "events on runs (kopf)"),
    ("", ("nodes",), ["get", "list"], "client and OSD nodes exist and are ready"),
    ("", ("namespaces",), ["list", "watch"], "kopf: which namespaces to serve"),
    ("apiextensions.k8s.io", ("customresourcedefinitions",), ["list", "watch"],
     "kopf: find the BenchmarkRun CRD"),
    ("kopf.dev", ("clusterkopfpeerings", "kopfpeerings"), ["get", "list", "watch", "patch"],
     "kopf: peering between operator replicas"),
    ("coordination.k8s.io", ("leases",), ["get", "create", "update", "delete"],
     "one run per Ceph cluster at a time"),
    ("metrics.k8s.io", ("pods",), ["get", "list"],
     "OSD and fio CPU/memory while a step runs (metrics-server)"),
)  # fmt: skip

# Granted only in the namespaces where the fio pods run (Rook's, for Rook targets): exec
# reaches any pod of a namespace, so no ClusterRole carries it. `create` is what the
# websocket exec is authorized as on current API servers, `get` on older ones.
FIO_NAMESPACE_RULES: tuple[tuple[str, tuple[str, ...], list[str], str], ...] = (
    ("", ("pods/exec",), ["create", "get"],
     "every step's fio client runs in the run's fio driver pod, by exec"),
    ("", ("pods",), ["delete"],
     "a crimson OSD reads its reactor layout only at start: after the restore its pod is "
     "restarted (Rook's Deployment recreates it on its node)"),
)  # fmt: skip
DEFAULT_FIO_NAMESPACES = ("rook-ceph",)


def _rules(rules: tuple[tuple[str, tuple[str, ...], list[str], str], ...]) -> list[dict]:
    return [
        {"apiGroups": [group], "resources": list(resources), "verbs": list(verbs)}
        for group, resources, verbs, _why in rules
    ]


def operator_rbac(
    namespace: str = DEFAULT_NAMESPACE,
    name: str = DEFAULT_NAME,
    fio_namespaces: tuple[str, ...] = DEFAULT_FIO_NAMESPACES,
) -> list[dict[str, Any]]:
    """ServiceAccount `name` in `namespace`, ClusterRole `name`, ClusterRoleBinding `name`,
    then a Role and RoleBinding `name`-fio in each of fio_namespaces."""
    labels = {LABEL_NAME: APP, "app.kubernetes.io/component": "operator"}
    subject = {"kind": "ServiceAccount", "name": name, "namespace": namespace}
    fio_rbac: list[dict[str, Any]] = []
    for ns in fio_namespaces:
        meta = {"name": f"{name}-fio", "namespace": ns, "labels": dict(labels)}
        fio_rbac += [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": meta, "rules": _rules(FIO_NAMESPACE_RULES)},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": dict(meta),
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                         "name": f"{name}-fio"},
             "subjects": [dict(subject)]},
        ]  # fmt: skip
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": dict(labels)},
            "rules": _rules(RULES),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": dict(labels)},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [dict(subject)],
        },
        *fio_rbac,
    ]


def render(namespace: str = DEFAULT_NAMESPACE, name: str = DEFAULT_NAME) -> str:
    header = (
        "# Generated by `python -m crimsonbench.manifests.rbac > manifests/rbac.yaml`;\n"
        "# edit crimsonbench/manifests/rbac.py instead.\n"
        "# Why each rule exists:\n"
        + "".join(
            f"#   {group or 'core'}/{','.join(res)}: {why}\n"
            for group, res, _v, why in (*RULES, *FIO_NAMESPACE_RULES)
        )
    )
    body = yaml.safe_dump_all(operator_rbac(namespace, name), sort_keys=False, explicit_start=True)
    return header + body


if __name__ == "__main__":
    sys.stdout.write(render(*sys.argv[1:2]))
