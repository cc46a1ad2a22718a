"""A real kind cluster from our own images: nodes, system pods, pod networking and
kube-proxy across the workers, the static CPU manager, image loading, and the host left
alone (global sysctls, iptables) while it runs. The session fixture's teardown asserts the
host is clean after `kind delete cluster` (tests/kind/conftest.py)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from harness.dockerd import SUBNET
from harness.host import HostState
from harness.images import PAUSE_IMAGE, pause_archive
from harness.kind import K8S_VERSION, KindCluster

pytestmark = pytest.mark.kind

NS = "kind-e2e"


def _wait(what: str, probe: Any, timeout: float = 180, every: float = 2) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"{what}: not after {timeout}s (last: {last!r})")


def _pod(name: str, node: str, image: str, command: list[str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": name}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "main", "image": image, "imagePullPolicy": "Never", "command": command}
            ],
            **spec,
        },
    }


def _running(k: KindCluster, name: str) -> bool:
    pod = k.kubectl_json("-n", NS, "get", "pod", name)
    conds = {c["type"]: c["status"] for c in pod["status"].get("conditions", [])}
    return pod["status"].get("phase") == "Running" and conds.get("Ready") == "True"


@pytest.fixture(scope="module")
def toolbox(kind: KindCluster) -> str:
    labels = json.loads(
        kind.docker("image", "inspect", "--format", "{{json .Config.Labels}}", kind.node_image)
    )
    kind.kubectl("create", "namespace", NS)
    return str(labels["crimsonbench.toolbox-image"])


def test_three_nodes_ready_at_our_version(kind: KindCluster) -> None:
    nodes = kind.kubectl_json("get", "nodes")["items"]
    assert sorted(n["metadata"]["name"] for n in nodes) == sorted(kind.nodes)
    assert len(kind.workers) == 2
    for n in nodes:
        conds = {c["type"]: c["status"] for c in n["status"]["conditions"]}
        assert conds["Ready"] == "True", (n["metadata"]["name"], conds)
        assert n["status"]["nodeInfo"]["kubeletVersion"] == K8S_VERSION
        assert n["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
        ip = next(a["address"] for a in n["status"]["addresses"] if a["type"] == "InternalIP")
        assert ip.startswith(SUBNET.rsplit(".", 1)[0] + "."), ip  # our docker network
    workers = [n for n in nodes if n["metadata"]["name"] in kind.workers]
    assert all(n["metadata"]["labels"].get("crimsonbench.io/storage") == "true" for n in workers)


def test_system_pods_running(kind: KindCluster) -> None:
    def by_app() -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for p in kind.kubectl_json("-n", "kube-system", "get", "pods")["items"]:
            labels = p["metadata"].get("labels", {})
            app = labels.get("k8s-app") or labels.get("component") or p["metadata"]["name"]
            out.setdefault(app, []).append(p)
        return out

    def all_running() -> dict[str, list[dict[str, Any]]] | None:
        pods = by_app()
        for group in pods.values():
            for p in group:
                ready = all(c.get("ready") for c in p["status"].get("containerStatuses", []))
                if p["status"].get("phase") != "Running" or not ready:
                    return None
        return pods

    pods = _wait("kube-system pods Running and Ready", all_running, timeout=240)
    per_node = {"kube-proxy": 3, "kindnet": 3, "kube-network-policies": 3}
    for app, count in per_node.items():
        nodes = sorted(p["spec"]["nodeName"] for p in pods.get(app, []))
        assert nodes == sorted(kind.nodes), (app, nodes)
        assert len(nodes) == count
    assert len(pods.get("kube-dns", [])) == 2  # coredns
    for component in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        assert [p["spec"]["nodeName"] for p in pods[component]] == [kind.control_plane]
    # our images' daemons never restarted (control-plane pods may, once, during bootstrap)
    restarts = {
        p["metadata"]["name"]: c["restartCount"]
        for app in ("kindnet", "kube-network-policies", "kube-proxy", "kube-dns")
        for p in pods[app]
        for c in p["status"]["containerStatuses"]
        if c["restartCount"]
    }
    assert not restarts, restarts


def test_pods_on_each_worker_reach_a_service_on_the_other(kind: KindCluster, toolbox: str) -> None:
    """Pod networking (our CNI agent: routes between the workers' pod CIDRs) and kube-proxy
    (nftables: Service VIPs), and CoreDNS (Service names)."""
    a, b = kind.workers[:2]
    serve = ["sh", "-c", "mkdir -p /www && hostname > /www/index.html && "
             "exec busybox httpd -f -p 8080 -h /www"]  # fmt: skip
    objs: list[dict[str, Any]] = []
    for name, node in (("web-a", a), ("web-b", b)):
        objs.append(_pod(name, node, toolbox, serve))
        objs.append({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]},
        })  # fmt: skip
    kind.apply(objs)
    for name in ("web-a", "web-b"):
        _wait(f"pod {name} Running", lambda n=name: _running(kind, n))
    pods = {p["metadata"]["name"]: p for p in kind.kubectl_json("-n", NS, "get", "pods")["items"]}
    assert pods["web-a"]["spec"]["nodeName"] == a
    assert pods["web-b"]["spec"]["nodeName"] == b
    assert pods["web-a"]["status"]["podIP"] != pods["web-b"]["status"]["podIP"]

    def fetch(src: str, url: str) -> str:
        out = kind.kubectl(
            "-n", NS, "exec", src, "--", "curl", "-sS", "--max-time", "5", url, check=False
        )
        return out.strip()

    for src, dst in (("web-a", "web-b"), ("web-b", "web-a")):
        pod_ip = pods[dst]["status"]["podIP"]
        assert fetch(src, f"http://{pod_ip}:8080/") == dst, f"{src} -> pod IP of {dst}"
        # Service by DNS name: CoreDNS, then kube-proxy's VIP to the pod on the other worker
        url = f"http://{dst}.{NS}.svc.cluster.local/"
        assert _wait(f"{src} -> service {dst}", lambda s=src, u=url: fetch(s, u) or None,
                     timeout=60) == dst  # fmt: skip


def test_network_policies_are_enforced(kind: KindCluster, toolbox: str) -> None:
    """kube-network-policies (beside our CNI agent) enforces NetworkPolicy: a server that
    a policy opens to one labelled client only is reached by that client (on the other
    worker) and by nobody else (on its own worker): that connect times out, dropped, while
    the same intruder is refused at once by a port nothing listens on of an unguarded pod."""
    a, b = kind.workers[:2]
    serve = ["sh", "-c", "mkdir -p /www && hostname > /www/index.html && "
             "exec busybox httpd -f -p 8080 -h /www"]  # fmt: skip
    idle = ["sleep", "3600"]
    server, friend = _pod("np-server", a, toolbox, serve), _pod("np-friend", b, toolbox, idle)
    friend["metadata"]["labels"]["np-role"] = "friend"
    policy = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
              "metadata": {"name": "np-server-in", "namespace": NS},
              "spec": {"podSelector": {"matchLabels": {"app": "np-server"}},
                       "policyTypes": ["Ingress"],
                       "ingress": [{"from": [{"podSelector": {"matchLabels": {
                           "np-role": "friend"}}}], "ports": [{"protocol": "TCP",
                                                               "port": 8080}]}]}}  # fmt: skip
    kind.apply([server, friend, _pod("np-intruder", a, toolbox, idle), policy])
    for name in ("np-server", "np-friend", "np-intruder"):
        _wait(f"pod {name} Running", lambda n=name: _running(kind, n))
    ip = kind.kubectl_json("-n", NS, "get", "pod", "np-server")["status"]["podIP"]
    intruder = kind.kubectl_json("-n", NS, "get", "pod", "np-intruder")["status"]["podIP"]

    def curl_rc(src: str, url: str) -> int:
        """curl's exit code: 0 fetched, 7 refused, 28 timed out."""
        out = kind.kubectl("-n", NS, "exec", src, "--", "sh", "-c",
                           f"curl -sS -o /dev/null --connect-timeout 3 {url}; echo rc=$?",
                           check=False)  # fmt: skip
        return int(out.rsplit("rc=", 1)[1].split()[0])

    # the agent programs the node a moment after the policy: until the intruder is dropped
    _wait("the policy enforced", lambda: curl_rc("np-intruder", f"http://{ip}:8080/") == 28,
          timeout=60)  # fmt: skip
    assert curl_rc("np-friend", f"http://{ip}:8080/") == 0  # across the workers
    assert curl_rc("np-intruder", f"http://{ip}:8080/") == 28  # dropped: no answer at all
    assert curl_rc("np-server", f"http://{intruder}:9/") == 7  # unguarded: refused at once


def test_static_cpu_manager_gives_a_guaranteed_pod_exclusive_cpus(
    kind: KindCluster, toolbox: str
) -> None:
    node = kind.workers[0]
    state = json.loads(kind.exec(node, "cat", "/var/lib/kubelet/cpu_manager_state").stdout)
    assert state["policyName"] == "static"
    res = {"cpu": "1", "memory": "64Mi"}
    show = ["sh", "-c", "grep Cpus_allowed_list /proc/self/status; exec sleep 3600"]
    gpod = _pod("guaranteed", node, toolbox, show)
    gpod["spec"]["containers"][0]["resources"] = {"requests": res, "limits": res}
    bpod = _pod("besteffort", node, toolbox, show)
    kind.apply([gpod, bpod])
    for name in ("guaranteed", "besteffort"):
        _wait(f"pod {name} Running", lambda n=name: _running(kind, n))
    qos = kind.kubectl("-n", NS, "get", "pod", "guaranteed", "-o", "jsonpath={.status.qosClass}")
    assert qos == "Guaranteed"

    def cpus(pod: str) -> set[int]:
        line = kind.kubectl("-n", NS, "logs", pod).strip().split(":", 1)[1]
        out: set[int] = set()
        for part in line.strip().split(","):
            lo, _, hi = part.partition("-")
            out |= set(range(int(lo), int(hi or lo) + 1))
        return out

    exclusive, shared = cpus("guaranteed"), cpus("besteffort")
    assert len(exclusive) == 1, exclusive
    assert not exclusive & shared, (exclusive, shared)
    # the kubelet's own record agrees
    state = json.loads(kind.exec(node, "cat", "/var/lib/kubelet/cpu_manager_state").stdout)
    assigned = [c for entries in state.get("entries", {}).values() for c in entries.values()]
    assert assigned == [",".join(map(str, sorted(exclusive)))], state


def test_load_image_archive_into_the_nodes(kind: KindCluster) -> None:
    kind.load_image_archive(pause_archive())
    for node in kind.nodes:
        images = kind.exec(node, "crictl", "images", "-o", "json").stdout
        tags = {t for i in json.loads(images)["images"] for t in i.get("repoTags") or []}
        assert PAUSE_IMAGE in tags, (node, sorted(tags))


def test_loop_device_attached_on_the_host_appears_in_the_workers(
    kind: KindCluster, tmp_path: Path
) -> None:
    img = tmp_path / "disk.img"
    with img.open("wb") as f:
        f.truncate(64 << 20)
    dev = subprocess.run(
        ["losetup", "-f", "--show", str(img)], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        for node in kind.workers:
            size = kind.exec(node, "blockdev", "--getsize64", dev).stdout.strip()
            assert size == str(64 << 20), (node, dev, size)
    finally:
        subprocess.run(["losetup", "-d", dev], check=True)


def test_host_untouched_while_the_cluster_runs(kind: KindCluster) -> None:
    """The kubelets and systemd in the nodes wrote their global sysctls into the shields
    (e2e/kind/base/crimsonbench-entrypoint), dockerd added no iptables rules."""
    before = kind.host_before
    assert before is not None
    now = HostState.snapshot()
    assert not now.sysctls_changed_since(before)
    docker_rules = [r for r in now.iptables - before.iptables if "DOCKER" in r]
    assert not docker_rules, docker_rules
    for node in kind.nodes:
        shielded = kind.exec(node, "ls", "/kind/sysctl-shield").stdout.split()
        assert "vm.overcommit_memory" in shielded and "fs.file-max" in shielded, shielded
        # the kubelet did write its value: into the node's copy
        assert kind.exec(node, "cat", "/proc/sys/vm/overcommit_memory").stdout.strip() == "1"


def test_a_cluster_left_by_a_killed_run_is_deleted_not_fatal(
    kind: KindCluster, tmp_path: Path
) -> None:
    """A machine restarted mid-test keeps our dockerd's data root (under the cache) with the
    cluster's stopped node containers in it; CI once failed every kind test on such a
    remnant ("already exists"). The next run deletes it, and nothing else of ours."""
    from harness.dockerd import Dockerd
    from harness.kind import CLUSTER_LABEL, _remove_stale_cluster

    stale = "crimsonbench-killed"
    for node in (f"{stale}-control-plane", f"{stale}-worker"):  # as `kind create` labels them
        kind.docker("create", "--name", node, "--label", f"{CLUSTER_LABEL}={stale}",
                    "--entrypoint", "true", kind.node_image)  # fmt: skip
    try:
        _remove_stale_cluster(Dockerd(env=kind.env, started=False), stale, kind.kind_bin,
                              tmp_path / "kubeconfig")  # fmt: skip
        left = kind.docker("ps", "-aq", "--filter", f"label={CLUSTER_LABEL}={stale}").split()
        assert not left, left
        ours = kind.docker("ps", "-q", "--filter", f"label={CLUSTER_LABEL}={kind.name}").split()
        assert len(ours) == len(kind.nodes), ours  # the live cluster untouched
    finally:
        kind.docker("rm", "-f", f"{stale}-control-plane", f"{stale}-worker", check=False)
