"""The run's NetworkPolicies (manifests/network.py) select exactly the pods the run's fio
Jobs make, and let in only each other, on the right port; the driver's name keeps the end
the chart's admission policy recognises (naming.suffixed_name). On a real API server:
tests/k8s/test_reach.py; enforced by a real network plugin: tests/kind/test_kind_netpol.py.
"""

from __future__ import annotations

import re
from typing import Any

from manifest_inputs import bluestore_8x5, plan_of

from crimsonbench.manifests import fio, fio_driver
from crimsonbench.manifests.ceph_access import rook_client_access
from crimsonbench.manifests.naming import JOB_NAME_KEPT_IN_PODS, dns_name, suffixed_name
from crimsonbench.manifests.network import fio_network_policies
from crimsonbench.manifests.pods import PodOptions

RUN = "netpol-run"
OPTS = PodOptions(image="crimsonbench-fio:test")


def _selects(selector: dict[str, Any], pod_labels: dict[str, str]) -> bool:
    """A label selector's matchLabels and In expressions, as the API server applies them."""
    labels_ok = all(pod_labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())
    exprs_ok = all(pod_labels.get(e["key"]) in e["values"]
                   for e in selector.get("matchExpressions", []))  # fmt: skip
    return labels_ok and exprs_ok


def _pods() -> dict[str, dict[str, str]]:
    """role -> pod template labels of the run's fio server and driver, and of another
    run's server."""
    _, plan = plan_of(RUN, bluestore_8x5("socket"))
    user = rook_client_access("rook-ceph", plan.pool.user)
    server = fio.fio_server_job(RUN, plan.clients[0], plan, user, OPTS)
    driver = fio_driver.fio_driver_job(RUN, "rook-ceph", OPTS, node="n", lifetime_s=60)
    other = fio.fio_server_job("other-run", plan.clients[0], plan, user, OPTS)
    jobs = {"server": server, "driver": driver, "other": other}
    return {name: job["spec"]["template"]["metadata"]["labels"] for name, job in jobs.items()}


def test_only_the_runs_driver_reaches_its_servers_and_only_they_its_barrier() -> None:
    pods = _pods()
    servers, driver = fio_network_policies(RUN, "rook-ceph", fio_port=8765, barrier_port=8766)
    for policy, guarded, source, port in ((servers, "server", "driver", 8765),
                                          (driver, "driver", "server", 8766)):  # fmt: skip
        spec = policy["spec"]
        assert spec["policyTypes"] == ["Ingress"]  # egress open: the mons and OSDs
        assert [r for r, labels in pods.items() if _selects(spec["podSelector"], labels)] == [
            guarded
        ]
        (rule,) = spec["ingress"]
        assert rule["ports"] == [{"protocol": "TCP", "port": port}]
        (peer,) = rule["from"]
        assert list(peer) == ["podSelector"]  # no namespaceSelector: its own namespace only
        assert [r for r, labels in pods.items() if _selects(peer["podSelector"], labels)] == [
            source
        ]
        assert policy["metadata"]["namespace"] == "rook-ceph"


def test_the_policies_carry_what_the_admission_policy_asks() -> None:
    """templates/reachpolicy.yaml lets the operator create and delete only NetworkPolicies
    labelled as a run's network policies, selecting a run's fio pods by matchLabels."""
    for policy in fio_network_policies(RUN, "ns", fio_port=1, barrier_port=2):
        labels = policy["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "crimsonbench-operator"
        assert labels["bench.crimson.ceph.io/role"] == "fio-network"
        assert labels["bench.crimson.ceph.io/run"] == RUN
        selected = policy["spec"]["podSelector"]["matchLabels"]
        assert selected["bench.crimson.ceph.io/run"] == RUN
        assert selected["bench.crimson.ceph.io/role"] in ("fio-server", "fio-driver")


def test_driver_names_keep_their_end_in_their_pods_names() -> None:
    """Names that fit are what they were (a run in flight across an upgrade keeps its
    driver); longer ones are hashed before the suffix, never cut through it, and stay
    apart; every pod name the Job controller makes from them matches the policy's."""
    assert fio_driver.driver_job_name("quick") == dns_name("quick", "fio-driver")
    assert fio_driver.driver_job_name("r" * 46) == "r" * 46 + "-fio-driver"
    names = {fio_driver.driver_job_name(run) for run in ("x" * 47, "x" * 48, "x" * 50, "y" * 50)}
    assert len(names) == 4
    for name in names | {fio_driver.driver_job_name("a")}:
        assert len(name) <= JOB_NAME_KEPT_IN_PODS and name.endswith("-fio-driver")
        pod = f"{name}-"[: JOB_NAME_KEPT_IN_PODS + 1] + "bcd5f"  # generateName, cut to 58
        assert re.fullmatch(fio_driver.DRIVER_POD_NAME_RE.strip("^$"), pod), pod
    assert suffixed_name("Run.A", "s") != suffixed_name("run-a", "s")
