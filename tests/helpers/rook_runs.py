"""BenchmarkRuns against Rook on the kind stack (e2e/harness/kind_bench.py), watched from
outside the operator: the run's status and conditions, the pods and fio processes it made,
and what "the cluster is as it was" means, checked against Rook, Ceph and the API."""

from __future__ import annotations

import base64
import json
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any, Self

import kubernetes.client
import kubernetes.config
from fio_processes import FioProcesses
from harness.kind_bench import OPERATOR_NS, RUN_NS, BenchStack
from harness.kind_rook import NAMESPACE as ROOK_NS
from harness.kind_rook import TOOLBOX
from harness.waiting import pod_ready
from kubernetes import watch
from polling import poll_until

from crimsonbench.manifests.naming import child_name, label_value, owner_tag
from crimsonbench.manifests.rbac import ALL_RULES
from crimsonbench.manifests.results import read_stored, results_selector
from crimsonbench.results.types import StepResult
from crimsonbench.spec.api import GROUP, PLURAL, VERSION

LABEL_RUN, LABEL_ROLE = f"{GROUP}/run", f"{GROUP}/role"


def osd_resources_of(pod_spec: dict[str, Any]) -> dict[str, dict[str, str]]:
    """requests/limits of the osd container of a pod spec (a pod's, or a Deployment's
    template's); an absent section is {}."""
    c = next(c for c in pod_spec["containers"] if c["name"] == "osd")
    res = c.get("resources") or {}
    return {k: dict(res.get(k) or {}) for k in ("requests", "limits")}


def toolbox(s: BenchStack, *cmd: str, timeout: float = 300) -> str:
    """CMD in Rook's toolbox pod (the host cannot reach pod or Service IPs); its stdout."""
    return s.kind.kubectl("-n", ROOK_NS, "exec", f"deploy/{TOOLBOX}", "--", *cmd,
                          timeout=timeout)  # fmt: skip


class RunBench:
    """The kind stack's API through the kubernetes client (its kubeconfig reaches the API
    server through docker's port on 127.0.0.1), its Rook, and the runs of RUN_NS."""

    def __init__(self, s: BenchStack) -> None:
        self.s, self.rook = s, s.rook
        # Any: the client's generated types mark every field Optional
        self.api: Any = kubernetes.config.new_client_from_config(str(s.kind.kubeconfig))
        self.core: Any = kubernetes.client.CoreV1Api(self.api)
        self.batch: Any = kubernetes.client.BatchV1Api(self.api)
        self.custom: Any = kubernetes.client.CustomObjectsApi(self.api)
        self.net: Any = kubernetes.client.NetworkingV1Api(self.api)
        self.uids: dict[str, str] = {}  # run name -> its uid, from its creation

    # ------------------------------------------------------------------ runs

    def create(self, body: dict[str, Any]) -> None:
        made = self.custom.create_namespaced_custom_object(GROUP, VERSION, RUN_NS, PLURAL, body)
        self.uids[body["metadata"]["name"]] = made["metadata"]["uid"]

    def uid(self, name: str) -> str | None:
        """The run's uid (kept from its creation: it outlives the run's deletion)."""
        if name not in self.uids and (run := self.run(name)) is not None:
            self.uids[name] = run["metadata"]["uid"]
        return self.uids.get(name)

    def child(self, name: str) -> str:
        """What the operator names the run's Jobs, pool, cephx user and images after, and
        the run label they carry (manifests.naming.child_name)."""
        uid = self.uid(name)
        assert uid, f"run {name} was never seen: no uid to name its children"
        return child_name(name, uid)

    def pool_of(self, name: str, pool: str) -> str:
        """The Ceph pool a Rook run creates for spec.client.pool (plan.build.pool_name)."""
        uid = self.uid(name)
        assert uid, name
        return f"{pool}-{owner_tag(uid)}"

    def delete(self, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, RUN_NS, PLURAL, name)

    def run(self, name: str) -> dict[str, Any] | None:
        try:
            got = self.custom.get_namespaced_custom_object(GROUP, VERSION, RUN_NS, PLURAL, name)
        except kubernetes.client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return dict(got)

    def status(self, name: str) -> dict[str, Any]:
        return dict((self.run(name) or {}).get("status") or {})

    def stored_results(self, name: str) -> dict[str, StepResult]:
        """step id -> the result the run stored (its results ConfigMaps, as fetch reads
        them); every page readable."""
        sel = results_selector(name)
        cms = self.core.list_namespaced_config_map(RUN_NS, label_selector=sel).items
        stored = read_stored([self.api.sanitize_for_serialization(c) for c in cms])
        assert stored.unreadable == [], stored.unreadable
        return {r.step_id: r for r in stored.results}

    def conditions(self, name: str) -> dict[str, dict[str, Any]]:
        return {c["type"]: c for c in self.status(name).get("conditions") or []}

    def wait(self, what: str, probe: Callable[[], Any], timeout: float, run: str = "") -> Any:
        """Poll PROBE until truthy; AssertionError with the run's status, our operator's
        log and Rook's diagnostics otherwise."""

        def explain() -> str:
            status = json.dumps(self.status(run))[:3000] if run else ""
            return (f"status: {status}\n{self.s.operator_logs(60)[-6000:]}\n"
                    f"{self.rook.diagnostics()}")  # fmt: skip

        return poll_until(what, probe, timeout, explain, interval=1)

    def wait_finished(self, name: str, timeout: float = 1800) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            st = self.status(name)
            return st if st.get("phase") in ("Completed", "Failed") else None

        result: dict[str, Any] = self.wait(f"run {name} finished", done, timeout, name)
        return result

    def delete_and_wait(self, name: str, timeout: float = 600) -> None:
        self.delete(name)
        self.wait(f"run {name} deleted", lambda: self.run(name) is None, timeout, name)

    def operator_pods(self) -> list[Any]:
        pods = self.core.list_namespaced_pod(OPERATOR_NS).items
        return [p for p in pods if not p.metadata.deletion_timestamp]

    # ------------------------------------------------------------------ the cluster

    def snapshot(self) -> dict[str, Any]:
        """What a run must leave as it was."""
        cluster = self.rook.cluster()
        return {
            "spec_json": json.dumps(cluster["spec"]),
            "generation": cluster["metadata"]["generation"],
            "osd_nodes": self.rook.osd_nodes(),
            "osd_resources": self.osd_resources(),
            "config": self.config_dump(),
            "pools": self.pools(),
        }

    def pools(self) -> list[str]:
        return sorted(self.rook.ceph("osd", "pool", "ls").split())

    def osd_resources(self) -> dict[int, dict[str, dict[str, str]]]:
        """OSD id -> requests/limits of the osd container of its running pod."""
        pods = self.rook.osd_pods()
        return {osd_id: osd_resources_of(pod["spec"]) for osd_id, pod in pods.items()}

    def config_dump(self) -> list[tuple[str, str, str]]:
        return sorted((e["section"], e["name"], str(e["value"]))
                      for e in self.rook.ceph_json("config", "dump"))  # fmt: skip

    def osds_ready(self) -> bool:
        pods = self.rook.osd_pods()
        return sorted(pods) == self.rook.osd_ids() and all(pod_ready(p) for p in pods.values())

    def cephx_user_key(self, user: str) -> str:
        """The key Rook made for a CephClient, from the Secret it writes (userKey)."""
        secret = self.core.read_namespaced_secret(f"rook-ceph-client-{user}", ROOK_NS)
        return base64.b64decode(secret.data["userKey"]).decode()

    def rados_as(self, user: str, key: str, *args: str) -> subprocess.CompletedProcess[str]:
        """`rados` in the toolbox as client.<user> with its key (and nothing of the admin's:
        `--key` is the only secret it gets)."""
        k = self.s.kind
        cmd = [str(k.kubectl_bin), "--kubeconfig", str(k.kubeconfig), "-n", ROOK_NS, "exec",
               f"deploy/{TOOLBOX}", "--", "rados", "--id", user, "--key", key,
               "--keyring", "/dev/null", "--client_mount_timeout", "20", *args]  # fmt: skip
        return subprocess.run(cmd, env=k.env, capture_output=True, text=True, timeout=120,
                              check=False)  # fmt: skip

    def run_objects(self, name: str) -> dict[str, list[str]]:
        """Every object of a kind the operator may create, labelled with the run, per
        namespace (empty lists left out), and our operator's leases."""
        # objects, not subresources (pods/exec: an exec leaves nothing behind)
        creatable = {res for r in ALL_RULES if "create" in r.verbs for res in r.resources
                     if "/" not in res}  # fmt: skip
        unchecked = creatable - {"jobs", "configmaps", "pods", "leases", "events",
                                 "cephclients", "cephblockpools", "networkpolicies",
                                 PLURAL}  # fmt: skip
        assert not unchecked, f"the operator may create {unchecked}: check them here too"
        # what it makes beside Rook carries the child name; its records beside the run, the
        # run's name (that namespace is the run's own)
        sel = f"{LABEL_RUN}={label_value(self.child(name))}"
        found: dict[str, list[str]] = {}
        records = self.core.list_namespaced_config_map(
            RUN_NS, label_selector=f"{LABEL_RUN}={label_value(name)}").items  # fmt: skip
        if records:
            found[f"records/{RUN_NS}"] = [o.metadata.name for o in records]
        for ns in (RUN_NS, ROOK_NS, OPERATOR_NS):
            for kind, items in (
                ("jobs", self.batch.list_namespaced_job(ns, label_selector=sel).items),
                ("pods", self.core.list_namespaced_pod(ns, label_selector=sel).items),
                ("configmaps", self.core.list_namespaced_config_map(ns, label_selector=sel).items),
                (
                    "networkpolicies",
                    self.net.list_namespaced_network_policy(ns, label_selector=sel).items,
                ),
            ):
                found[f"{kind}/{ns}"] = [o.metadata.name for o in items]
        # BenchmarkRuns: only a study makes them (labelled with it), none left of NAME's
        studied = self.custom.list_namespaced_custom_object(
            GROUP, VERSION, RUN_NS, PLURAL, label_selector=f"{GROUP}/study={label_value(name)}"
        )["items"]
        found["benchmarkruns"] = [o["metadata"]["name"] for o in studied]
        for plural in ("cephblockpools", "cephclients"):
            items = self.custom.list_namespaced_custom_object(
                "ceph.rook.io", "v1", ROOK_NS, plural, label_selector=sel)["items"]  # fmt: skip
            found[plural] = [o["metadata"]["name"] for o in items]
        coordination: Any = kubernetes.client.CoordinationV1Api(self.api)
        leases = [le for ns in (OPERATOR_NS, ROOK_NS)
                  for le in coordination.list_namespaced_lease(ns).items]  # fmt: skip
        found["leases"] = [le.metadata.name for le in leases
                           if le.metadata.name.startswith("crimsonbench-")]  # fmt: skip
        return {k: sorted(v) for k, v in found.items() if v}

    def assert_restored(self, before: dict[str, Any], name: str, pool: str,
                        keys: tuple[str, ...] = ()) -> None:  # fmt: skip
        """The cluster as `before` (snapshot()): the spec byte for byte, the OSDs on their
        nodes with their resources and Ready, the mon database (none of the run's KEYS
        left), the pools, no cephx user of the run, and nothing of run NAME but the records
        and results ConfigMaps the run keeps while it exists."""
        assert json.dumps(self.rook.cluster()["spec"]) == before["spec_json"]
        self.wait("the OSDs back as they were, Ready",
                  lambda: self.osds_ready() and self.rook.osd_nodes() == before["osd_nodes"]
                  and self.osd_resources() == before["osd_resources"]
                  and not self.rook.not_ready_reason(), 900, name)  # fmt: skip
        now = self.config_dump()
        leftover = [e for e in now if e[1] in keys]
        assert not leftover, f"run options left in the mon database: {leftover}"
        assert now == before["config"], sorted(set(now) ^ set(before["config"]))
        assert self.pools() == before["pools"], (self.pools(), before["pools"])
        assert self.pool_of(name, pool) not in before["pools"]
        users = [e["entity"] for e in self.rook.ceph_json("auth", "ls")["auth_dump"]]
        assert f"client.{self.child(name)}-fio" not in users, users
        left = self.run_objects(name)
        kept = left.pop(f"records/{RUN_NS}", [])  # the records and results, while it exists
        assert all(c == f"{name}-run" or c.startswith((f"{name}-results-", f"{name}-step-"))
                   for c in kept), kept  # fmt: skip
        assert left == {}, left


class PodWatch:
    """Every pod of a run seen from outside (a watch: a pod however short-lived is seen):
    job name -> pod uids and nodes (the run's fio servers and driver each have one pod);
    and every fio process on this host (kind's nodes are containers: their processes are
    the host's; a step whose fio client ran twice shows two)."""

    def __init__(self, bench: RunBench, run: str) -> None:
        self.bench, self.run = bench, run
        self.pods_by_job: dict[str, set[str]] = defaultdict(set)
        self.node_of_job: dict[str, set[str]] = defaultdict(set)
        self.fio = FioProcesses()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._watch, daemon=True)]

    def __enter__(self) -> Self:
        self.fio.__enter__()
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.fio.__exit__()
        for t in self._threads:
            t.join(timeout=15)

    def _watch(self) -> None:
        while not self._stop.is_set() and self.bench.uid(self.run) is None:
            time.sleep(0.2)  # the run's pods carry its child name: known once it exists
        if self._stop.is_set():
            return
        sel = f"{LABEL_RUN}={label_value(self.bench.child(self.run))}"
        while not self._stop.is_set():
            try:
                for ev in watch.Watch().stream(self.bench.core.list_namespaced_pod, ROOK_NS,
                                               label_selector=sel, timeout_seconds=2):  # fmt: skip
                    pod = ev["object"]
                    job = (pod.metadata.labels or {}).get("job-name")
                    if job:
                        self.pods_by_job[job].add(pod.metadata.uid)
                        if pod.spec.node_name:
                            self.node_of_job[job].add(pod.spec.node_name)
            except Exception:  # noqa: S112 - the API may blip; the watch starts again
                time.sleep(1)


class LaggyPgWatch:
    """Ceph reef 18.2.7 can leave PGs `active+clean+laggy` after an OSD restarts with I/O
    in flight: their ops wait "for readable" until that OSD restarts again (Ceph tracker
    80404, ceph/ceph#71663; seen here twice, 26+ min). Not what a test of ours is about, and
    nothing a benchmark can fix: while the watch runs, PGs laggy for LAGGY_S in a row get
    their primary OSD's pod deleted once (Rook starts it again), said on stdout, so the
    test knows its step ran one more time and why."""

    LAGGY_S = 30.0

    def __init__(self, bench: RunBench) -> None:
        self.bench = bench
        self.restarted: list[int] = []  # OSDs restarted to clear the wedge
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=120)

    def _laggy_primaries(self) -> set[int]:
        try:
            got = self.bench.rook.ceph_json("pg", "dump", "pgs_brief", timeout=30)
        except (RuntimeError, ValueError, subprocess.SubprocessError):
            return set()  # the mon busy or restarting: ask again
        stats = got.get("pg_stats", []) if isinstance(got, dict) else got
        return {
            int(pg["acting_primary"])
            for pg in stats
            if "laggy" in str(pg.get("state", "")) and pg.get("acting_primary", -1) >= 0
        }

    def _watch(self) -> None:
        since: dict[int, float] = {}
        while not self._stop.wait(5):
            laggy = self._laggy_primaries()
            now = time.monotonic()
            since = {osd: since.get(osd, now) for osd in laggy}
            for osd, t0 in since.items():
                if now - t0 >= self.LAGGY_S and osd not in self.restarted:
                    pod = self.bench.rook.osd_pods().get(osd)
                    if pod is None:
                        continue
                    print(f"\nLaggyPgWatch: PGs of osd.{osd} laggy for {now - t0:.0f} s "
                          "(Ceph tracker 80404): restarting it once", flush=True)  # fmt: skip
                    self.bench.core.delete_namespaced_pod(pod["metadata"]["name"], ROOK_NS)
                    self.restarted.append(osd)
