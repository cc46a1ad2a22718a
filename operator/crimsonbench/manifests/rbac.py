"""The operator's RBAC: a ServiceAccount, a least-privilege ClusterRole and Roles, scoped by
the trust boundary the chart's `targets` values draw (manifests/targets.py's TargetPolicy).

    python -m crimsonbench.manifests.rbac [NAMESPACE] > manifests/rbac.yaml

regenerates the checked-in file (with the chart's default targets), and
`render_chart_rules()` the chart's templates/_rbac-rules.tpl (tests fail when either
differs). No wildcards, no cluster-admin, no Secrets at all (Jobs mount them; the operator
never reads one). Every rule says why it exists, in one of five scopes:

- cluster-wide: only what runs in any namespace and kopf need (runs, events, nodes);
- the operator's own namespace: external clusters' leases, the node topology cache, the
  topology probe's Jobs;
- run namespaces (a listed cluster's own, its allowedNamespaces, externalNamespaces):
  the run's record and results ConfigMaps;
- job namespaces (the listed clusters' and externalNamespaces): the run's Jobs, their
  pods, logs, exec and metrics;
- Rook namespaces (the listed clusters'): the cluster's lease, the named CephClusters only
  (resourceNames), the run's pool and cephx user, OSD pod restarts.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

import yaml

from crimsonbench.manifests.naming import APP, LABEL_NAME
from crimsonbench.manifests.targets import TargetPolicy
from crimsonbench.spec.api import GROUP, PLURAL, STUDY_PLURAL

DEFAULT_NAMESPACE = "crimsonbench"
DEFAULT_NAME = "crimsonbench-operator"


@dataclass(frozen=True)
class Rule:
    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str
    # limited to the named CephClusters of the namespace (resourceNames)
    named_clusters: bool = False


CLUSTER_RULES = (
    Rule(GROUP, (PLURAL,), ("get", "list", "watch", "patch", "update"),
         "the runs, in any namespace: watch them, add/remove the finalizer (a run whose "
         "target is not allowed is failed through its status, nothing else)"),
    Rule(GROUP, (f"{PLURAL}/status",), ("get", "patch", "update"),
         "progress, results and conditions"),
    Rule(GROUP, (f"{PLURAL}/finalizers",), ("update",),
         "owner references with blockOwnerDeletion on children"),
    Rule(GROUP, (PLURAL,), ("create",),
         "a study's runs, one at a time, owned by the study (the targets admission policy "
         "judges each as it would a user's)"),
    Rule(GROUP, (STUDY_PLURAL,), ("get", "list", "watch", "patch", "update"),
         "the studies, in any namespace: watch them, kopf's finalizer"),
    Rule(GROUP, (f"{STUDY_PLURAL}/status",), ("get", "patch", "update"),
         "a study's progress and its runs"),
    Rule("", ("events",), ("create", "patch"), "events on runs (kopf, refusals)"),
    Rule("", ("nodes",), ("get", "list"), "client and OSD nodes exist and are ready"),
    Rule("", ("pods",), ("list",),
         "preflight: what the pods on the run's nodes request, against each node's "
         "allocatable (Rook resizes every OSD pod; listed by node, never read one by one)"),
    Rule("", ("namespaces",), ("list", "watch"), "kopf: which namespaces to serve"),
    Rule("apiextensions.k8s.io", ("customresourcedefinitions",), ("list", "watch"),
         "kopf: find the BenchmarkRun CRD"),
    Rule("kopf.dev", ("clusterkopfpeerings", "kopfpeerings"), ("get", "list", "watch", "patch"),
         "kopf: peering between operator replicas"),
)  # fmt: skip

OPERATOR_NAMESPACE_RULES = (
    Rule("coordination.k8s.io", ("leases",), ("get", "create", "update", "delete"),
         "one run per external Ceph cluster at a time (named by its fsid)"),
    Rule("", ("configmaps",), ("get", "create", "update", "patch", "delete"),
         "node topology cache"),
    Rule("batch", ("jobs",), ("create", "delete", "get", "list"),
         "the topology probe (lscpu on each node)"),
    Rule("batch", ("jobs/status",), ("get",), "whether a probe succeeded"),
    Rule("", ("pods",), ("get", "list"), "the probe's pod"),
    Rule("", ("pods/log",), ("get",), "lscpu's output comes through the log"),
)  # fmt: skip

RUN_NAMESPACE_RULES = (
    Rule("", ("configmaps",), ("get", "list", "create", "update", "patch"),
         "the run's record and results, beside the run (removed with it: owner references)"),
)  # fmt: skip

JOB_NAMESPACE_RULES = (
    Rule("batch", ("jobs",), ("create", "delete", "get", "list"),
         "cluster facts, fio servers and driver, image and config Jobs (they mount the "
         "cluster's key: Secrets mount only in their own namespace)"),
    Rule("batch", ("jobs/status",), ("get",), "whether a Job succeeded"),
    Rule("", ("pods",), ("get", "list"), "the pods of those Jobs; Rook's OSD pods"),
    Rule("", ("pods/log",), ("get",), "the cluster's facts come through the log"),
    Rule("", ("pods/exec",), ("create", "get"),
         "every step's fio client runs in the run's fio driver pod, by exec (`create` on "
         "current API servers, `get` on older ones)"),
    Rule("metrics.k8s.io", ("pods",), ("get", "list"),
         "OSD and fio CPU/memory while a step runs (metrics-server)"),
    Rule("networking.k8s.io", ("networkpolicies",), ("create", "delete", "list"),
         "the run's NetworkPolicies: only its fio driver reaches its fio servers, only they "
         "reach its start barrier (made with the servers, deleted at cleanup)"),
)  # fmt: skip

ROOK_NAMESPACE_RULES = (
    Rule("coordination.k8s.io", ("leases",), ("get", "create", "update", "delete"),
         "one run per Rook cluster at a time, beside it (named by its uid): every install "
         "acting on it sees the same lease"),
    Rule("ceph.rook.io", ("cephclusters",), ("get", "patch"),
         "the named CephClusters only: read, patch cephConfig/resources, restore",
         named_clusters=True),
    Rule("ceph.rook.io", ("cephclients", "cephblockpools"), ("create", "delete", "get"),
         "the run's pool-limited cephx user and its size-1 pool"),
    Rule("", ("pods",), ("delete",),
         "a crimson OSD reads its reactor layout only at start: it is restarted after the "
         "patch and the restore (Rook's Deployment recreates it on its node)"),
)  # fmt: skip

ALL_RULES = (*CLUSTER_RULES, *OPERATOR_NAMESPACE_RULES, *RUN_NAMESPACE_RULES,
             *JOB_NAMESPACE_RULES, *ROOK_NAMESPACE_RULES)  # fmt: skip
_RBAC = "rbac.authorization.k8s.io/v1"


def _rules(rules: tuple[Rule, ...], clusters: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for r in rules:
        rule: dict[str, Any] = {"apiGroups": [r.group], "resources": list(r.resources)}
        if r.named_clusters:
            rule["resourceNames"] = list(clusters)
        rule["verbs"] = list(r.verbs)
        out.append(rule)
    return out


def scoped_roles(policy: TargetPolicy) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(role name suffix, namespace, rules) of every Role beyond the operator namespace's,
    in the chart's order."""
    out = [("-runs", ns, _rules(RUN_NAMESPACE_RULES)) for ns in policy.run_namespaces]
    out += [("-jobs", ns, _rules(JOB_NAMESPACE_RULES)) for ns in policy.job_namespaces]
    for ns in policy.rook_namespaces:
        names = tuple(g.name for g in policy.rook if g.namespace == ns)
        out.append(("-rook", ns, _rules(ROOK_NAMESPACE_RULES, names)))
    return out


def operator_rbac(
    namespace: str = DEFAULT_NAMESPACE,
    name: str = DEFAULT_NAME,
    policy: TargetPolicy | None = None,
) -> list[dict[str, Any]]:
    """ServiceAccount `name` in `namespace`, ClusterRole and ClusterRoleBinding `name`, a
    Role and RoleBinding `name` in `namespace`, then `name`-runs, -jobs and -rook Roles
    and bindings in the namespaces policy (default: the chart's default targets) names."""
    policy = policy or TargetPolicy()
    labels = {LABEL_NAME: APP, "app.kubernetes.io/component": "operator"}
    subject = {"kind": "ServiceAccount", "name": name, "namespace": namespace}

    def role(role_name: str, ns: str, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        meta = {"name": role_name, "namespace": ns, "labels": dict(labels)}
        return [
            {"apiVersion": _RBAC, "kind": "Role", "metadata": meta, "rules": rules},
            {"apiVersion": _RBAC, "kind": "RoleBinding", "metadata": dict(meta),
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                         "name": role_name},
             "subjects": [dict(subject)]},
        ]  # fmt: skip

    out: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)}},
        {"apiVersion": _RBAC, "kind": "ClusterRole",
         "metadata": {"name": name, "labels": dict(labels)}, "rules": _rules(CLUSTER_RULES)},
        {"apiVersion": _RBAC, "kind": "ClusterRoleBinding",
         "metadata": {"name": name, "labels": dict(labels)},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": name},
         "subjects": [dict(subject)]},
        *role(name, namespace, _rules(OPERATOR_NAMESPACE_RULES)),
    ]  # fmt: skip
    for suffix, ns, rules in scoped_roles(policy):
        out += role(f"{name}{suffix}", ns, rules)
    return out


def render(namespace: str = DEFAULT_NAMESPACE, name: str = DEFAULT_NAME) -> str:
    header = (
        "# Generated by `python -m crimsonbench.manifests.rbac > manifests/rbac.yaml`;\n"
        "# edit crimsonbench/manifests/rbac.py instead. The Rook cluster the operator may\n"
        "# act on: rook-ceph/rook-ceph, for runs in rook-ceph (the chart's default targets).\n"
        "# Why each rule exists:\n"
        + "".join(f"#   {r.group or 'core'}/{','.join(r.resources)}: {r.why}\n" for r in ALL_RULES)
    )
    body = yaml.safe_dump_all(operator_rbac(namespace, name), sort_keys=False, explicit_start=True)
    return header + body


# ---------------------------------------------------------------- the chart's rules


def _tpl_rule(r: Rule) -> str:
    named = "  resourceNames: {{ toJson .clusters }}\n" if r.named_clusters else ""
    return (
        f"# {r.group or 'core'}/{','.join(r.resources)}: {r.why}\n"
        f"- apiGroups: {json.dumps([r.group])}\n"
        f"  resources: {json.dumps(list(r.resources))}\n"
        + named
        + f"  verbs: {json.dumps(list(r.verbs))}\n"
    )


CHART_DEFINES = (
    ("crimsonbench.clusterRules", CLUSTER_RULES),
    ("crimsonbench.namespaceRules", OPERATOR_NAMESPACE_RULES),
    ("crimsonbench.runNamespaceRules", RUN_NAMESPACE_RULES),
    ("crimsonbench.jobNamespaceRules", JOB_NAMESPACE_RULES),
    # called with (dict "clusters" (list of the namespace's CephCluster names))
    ("crimsonbench.rookNamespaceRules", ROOK_NAMESPACE_RULES),
)


def render_chart_rules() -> str:
    """templates/_rbac-rules.tpl: the rules above as named templates; templates/rbac.yaml
    puts each in its scope from the `targets` values (e2e/chart_rbac.py writes it)."""
    return (
        "{{/*\n"
        "Generated by `python e2e/chart_rbac.py > templates/_rbac-rules.tpl` from\n"
        "operator/crimsonbench/manifests/rbac.py. Do not edit: change the rules there and\n"
        "regenerate (tests/chart fails when this file drifts).\n"
        "*/}}\n"
        + "\n".join(
            f'{{{{- define "{define}" }}}}\n'
            + "".join(_tpl_rule(r) for r in rules)
            + "{{- end }}\n"
            for define, rules in CHART_DEFINES
        )
    )


if __name__ == "__main__":
    sys.stdout.write(render(*sys.argv[1:2]))
