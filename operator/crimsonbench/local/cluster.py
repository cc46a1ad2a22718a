"""A throwaway real Ceph cluster on 127.0.0.1: 1 mon, 1 mgr, N OSDs, all state in one dir.

Like vstart.sh, but every daemon is our foreground child in its own process group (teardown
can always find and kill it); the monitor port is reserved (two clusters run side by side).
"""

from __future__ import annotations

import logging
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from crimsonbench.errors import ExecutionError, InvalidSpec
from crimsonbench.local import bootstrap as bs
from crimsonbench.local import crimson_checks, osds, procs
from crimsonbench.local.aio import AioLimit, aio_needed
from crimsonbench.local.ceph_cli import CephCli, ClientConf, run
from crimsonbench.local.claims import RunRecord
from crimsonbench.local.cleanup import destroy, remove_dir
from crimsonbench.local.cluster_prep import BenchPrep
from crimsonbench.local.ports import PortLease, reserve_port
from crimsonbench.local.readiness import missing, wait_until
from crimsonbench.local.signals import deferred, shield
from crimsonbench.local.userland import CephRoot, userland_for
from crimsonbench.plan.types import CephSetup, OsdCpus
from crimsonbench.spec.models import Flavor, LocalTarget, ObjectStore, OsdSpec, size_bytes

log = logging.getLogger(__name__)

__all__ = ["BASE_CONFIG", "ClientConf", "LocalCluster", "destroy"]

# Mon-db settings every local cluster gets before its OSDs exist (tunables, not ceph.conf).
BASE_CONFIG: dict[str, dict[str, str]] = {
    "global": {
        "mon_allow_pool_size_one": "true",
        "mon_warn_on_pool_no_redundancy": "false",
        "osd_pool_default_size": "1",
        "osd_pool_default_min_size": "1",
        "osd_pool_default_pg_autoscale_mode": "off",
        "auth_allow_insecure_global_id_reclaim": "false",
    },
    # Ceph may pin an OSD to a NUMA node on its own; the plan's affinity must win.
    "osd": {"osd_numa_auto_affinity": "false"},
    # PG states reach the mgr every mgr_stats_period (5 s): readiness would lag by that.
    "mgr": {"mgr_stats_period": "1"},
    # Each osdmap change (pool set, osd set) waits for the next proposal (1 s by default).
    "mon": {"paxos_propose_interval": "0.1"},
}
STOP_ORDER = ("osd", "mgr", "mon")
MOUNT_NOTE = "ceph-root-mount"  # where the Ceph root is mounted for this cluster
IN_MEMORY = (
    ObjectStore.MEMSTORE,
    ObjectStore.CYANSTORE,
)  # OSDs first so they can still tell the mon they go


class LocalCluster(BenchPrep):
    """`with LocalCluster(target, osd, osd_cpus, setup) as c:` brings the cluster up and waits
    until it is ready; leaving the block (also by exception or Ctrl-C) tears it down."""

    def __init__(
        self,
        target: LocalTarget,
        osd: OsdSpec,
        osd_cpus: Sequence[OsdCpus] = (),
        setup: CephSetup | None = None,
        root: Path | None = None,
        ready_timeout: float = 180.0,
        stop_grace: float = 20.0,
        owner: Mapping[str, str] | None = None,
    ) -> None:
        """owner: who runs it (run name, results directory), for its record."""
        self.target, self.osd, self.setup = target, osd, setup or CephSetup()
        self.crimson = osd.flavor == Flavor.CRIMSON
        # the programs' userland: checked now, mounted in start(), unmounted in teardown()
        self.userland = userland_for(target.ceph_root, self.crimson, target.ceph_bin_dir)
        self.binary = osds.find_osd_binary(osd, target, self.userland)  # before anything exists
        osds.check_store_size(osd, target)
        self.cpus = osds.check_cpus(osd_cpus, osd.count)
        self.ready_timeout, self.stop_grace = ready_timeout, stop_grace
        self._root_arg = root
        self._made_root = False
        self.layout = bs.Layout(Path("/nonexistent"))
        self.cli = CephCli(self.layout.conf, self.userland)
        self.store_option = "osd_objectstore"  # crimson's: asked of the programs at bring-up
        self.fsid = str(uuid.uuid4())
        self._aio = AioLimit()
        self._lease: PortLease | None = None
        self.mon_port = 0
        self._daemons: dict[str, procs.Daemon] = {}
        self._loops: dict[int, str] = {}
        self.pool: str | None = None
        self.timings: dict[str, float] = {}
        self.owner = dict(owner or {})
        self._record: RunRecord | None = None

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.target.keep_cluster:
            log.warning(
                "keepCluster: leaving %s running in %s; stop it with "
                "crimsonbench.local.cluster.destroy(root)",
                self.pids(),
                self.layout.root,
            )
            self._release_port()
            if self._record is not None:  # the cluster is the user's now: never reaped
                self._record.close(keep=False)
                self._record = None
            return
        leftovers = self.teardown()
        if leftovers and exc_type is None:
            raise ExecutionError("teardown left behind: " + "; ".join(leftovers))

    def start(self) -> None:
        """Bring the cluster up and wait until it is ready; on any failure, tear down."""
        t0 = time.monotonic()
        try:
            if isinstance(self.userland, CephRoot):
                self.userland.open()
            self._create_root()
            self._bootstrap_mon()
            self.apply_config(BASE_CONFIG)
            self.apply_config(self.setup.config)  # OSDs read it at boot: no restart needed
            if self.crimson:  # reactor options and allow-crimson must precede OSD creation
                self.run_commands(self.setup.commands)
                self._aio.ensure(aio_needed(self.osd))
                if self._aio.changed and self._record is not None:
                    self._record.note(aio=list(self._aio.changed))
            conf = str(self.layout.conf)
            self._spawn("mgr." + bs.MGR_ID, ["ceph-mgr", "-c", conf, "-i", bs.MGR_ID, "-f"])
            for osd_id in range(self.osd.count):
                self._create_osd(osd_id)
            if not self.crimson:  # classic: commands may address the OSDs (ceph tell ...)
                self.run_commands(self.setup.commands)
            self.wait_ready()
            self.pin_threads()
            if self.crimson:
                self.verify_crimson()
        except BaseException:
            log.error("bring-up of %s failed; tearing down", self.layout.root)
            self.teardown(keep_dir=self.target.keep_cluster)  # keepCluster keeps the logs
            raise
        self.timings["bring_up_s"] = time.monotonic() - t0
        log.info("cluster %s up in %.1f s", self.layout.root, self.timings["bring_up_s"])

    def _create_root(self) -> None:
        root = self._root_arg
        if root is None and self.target.work_dir:
            root = Path(self.target.work_dir) / "cluster"
        if root is None:
            root, self._made_root = Path(tempfile.mkdtemp(prefix="cbc-")), True
        elif root.exists() and any(root.iterdir()):
            raise InvalidSpec(
                "spec.target.local.workDir",
                f"{root} is not empty; remove it or choose another directory",
            )
        else:
            self._made_root = not root.exists()
        self.layout = bs.layout_for(root.resolve())
        # on record before anything runs: a run killed from here on is cleaned up by the next
        self._record = RunRecord(
            {"root": str(self.layout.root), "made_root": self._made_root, **self.owner}
        )
        self.cli = CephCli(self.layout.conf, self.userland)
        self.layout.make_dirs()
        if isinstance(self.userland, CephRoot) and self.userland.root is not None:
            self.userland.share(self.layout.root)  # the same paths inside the root
            if self.layout.run_alias is not None:
                self.userland.link(self.layout.run_alias, self.layout.root / "run")
            # destroy() finds the root's mounts of a cluster left running (keepCluster)
            (self.layout.root / MOUNT_NOTE).write_text(f"{self.userland.root}\n")

    def _bootstrap_mon(self) -> None:
        self._lease = reserve_port()
        port, lay = self._lease.port, self.layout
        self.mon_port = port
        extra = {}
        if self.crimson:  # needed before crimson-osd can read the mon db at all
            extra["enable_experimental_unrecoverable_data_corrupting_features"] = "crimson"
        self.store_option = crimson_checks.store_option(self.userland, self.setup, self.crimson)
        sections = {i: self._store_options(i) for i in range(self.osd.count)}
        lay.conf.write_text(bs.render_conf(lay, self.fsid, port, sections, extra))
        lay.client_conf.write_text(bs.render_client_conf(lay, self.fsid, port))
        bs.make_keyrings(lay, self.userland)
        bs.mkfs_mon(lay, self.fsid, port, self.userland)
        self._spawn("mon." + bs.MON_ID, ["ceph-mon", "-c", str(lay.conf), "-i", bs.MON_ID, "-f"])
        wait_until("monitor answering", self._mon_answers, 60.0, str(lay.root))

    def _store_options(self, osd_id: int) -> dict[str, str]:
        dev = None
        if osds.uses_loop(self.osd, self.target):
            size = size_bytes(self.target.bluestore_size)
            with deferred():  # attached and known to the teardown, no stop signal between
                dev = bs.losetup(self.layout.block_file(osd_id), size)
                self._loops[osd_id] = dev
        opts = osds.store_options(self.osd, self.target, dev, self.store_option)
        classes = osds.class_dir(self.userland) if self.crimson else None
        if classes is not None:
            opts["osd_class_dir"] = classes
        return opts

    def _mon_answers(self) -> list[str]:
        self._check_daemons()
        try:
            self.cli.ceph("mon", "stat", timeout=10)
        except ExecutionError as exc:
            return [str(exc)[-200:]]
        return []

    def _create_osd(self, osd_id: int) -> None:
        """`ceph osd new` with a fresh cephx secret, mkfs, start (what vstart.sh does)."""
        lay, conf = self.layout, str(self.layout.conf)
        lay.osd_data(osd_id).mkdir(parents=True, exist_ok=True)
        osd_uuid, secret = str(uuid.uuid4()), bs.gen_key(self.userland)
        spec = bs.new_osd_json(lay, osd_id, secret)
        self.cli.ceph("osd", "new", osd_uuid, str(osd_id), "-i", str(spec))
        spec.unlink()
        bs.write_osd_keyring(lay, osd_id, secret)
        if self.osd.object_store == ObjectStore.SEASTORE and osd_id < len(self.osd.devices):
            (lay.osd_data(osd_id) / "block").symlink_to(self.osd.devices[osd_id])
        cpus = self.cpus.get(osd_id)
        mkfs = osds.mkfs_argv(self.binary, conf, osd_id, osd_uuid, secret)
        run(mkfs, timeout=300, userland=self.userland)
        argv = osds.osd_argv(self.binary, conf, osd_id, self.crimson)
        # Classic: taskset pins at exec. Crimson: Seastar pins its reactors itself.
        pin = cpus.reactors if cpus is not None and not self.crimson else ()
        self._spawn(f"osd.{osd_id}", argv, pin)

    def _spawn(self, name: str, argv: list[str], cpus: Iterable[int] = ()) -> None:
        out = self.layout.log / f"{name}.stdout"
        full, _, _ = self.userland.wrap(argv)
        with deferred():  # a stop signal once the daemon is known to the teardown
            self._daemons[name] = procs.spawn(name, full, out, cpus)

    def teardown(self, keep_dir: bool = False) -> list[str]:
        """Stop every daemon (SIGTERM, SIGKILL after stop_grace), detach loop devices,
        remove the directory, and check nothing is left. Returns what was left behind
        (empty when clean). Stop signals wait until it is done (signals.shield); each part
        is forgotten once undone, so a second call finishes what a failed one left."""
        if not (
            self._daemons
            or self._loops
            or self._lease
            or self._record
            or self.layout.root.exists()
            or self.userland.root is not None
        ):
            return []  # never started, or already torn down
        t0 = time.monotonic()
        log.info("tearing down %s", self.layout.root)
        with shield(f"the teardown of {self.layout.root}"):
            left = self._teardown(keep_dir)
        self.timings["teardown_s"] = time.monotonic() - t0
        log.info("teardown of %s took %.1f s", self.layout.root, self.timings["teardown_s"])
        for item in left:
            log.error("teardown left behind: %s", item)
        if self._record is not None:  # what is left stays on record for the next run
            self._record.close(keep=bool(left) and not keep_dir)
            self._record = None
        return left

    def _teardown(self, keep_dir: bool) -> list[str]:
        for group in STOP_ORDER:
            grace = self.stop_grace
            if group == "osd" and not keep_dir and self.osd.object_store in IN_MEMORY:
                grace = 0  # a clean stop would save every byte to osd_data, deleted next
            names = [n for n in self._daemons if n.startswith(group)]
            procs.stop([self._daemons[n] for n in names], grace)
            for name in names:
                del self._daemons[name]
        left: list[str] = []
        for osd_id, dev in list(self._loops.items()):
            left.extend(bs.detach_loop(dev, self.layout.block_file(osd_id)))
            del self._loops[osd_id]
        root = self.layout.root
        if self.layout.run_alias is not None:
            self.layout.run_alias.unlink(missing_ok=True)
        if root.exists():
            left.extend(
                f"process {p} still uses {root}" for p in procs.processes_mentioning(str(root))
            )
            if not keep_dir:
                remove_dir(root, self._made_root)
                if root.exists() and any(root.iterdir()):
                    left.append(f"directory {root} could not be emptied")
        self._release_port()
        left.extend(self._aio.restore())
        left.extend(self.userland.close())  # every daemon is stopped: unmount the root
        return left

    def _release_port(self) -> None:
        if self._lease is not None:
            self._lease.release()
            self._lease = None

    # ------------------------------------------------------------ readiness and health

    def wait_ready(self, timeout: float | None = None) -> None:
        """Active mgr, all OSDs up+in, all PGs active+clean. NotReady lists what is missing;
        ExecutionError if a daemon died meanwhile."""
        wait_until(
            "cluster ready", self._not_ready, timeout or self.ready_timeout, str(self.layout.root)
        )

    def _not_ready(self) -> list[str]:
        self._check_daemons()
        status = self.cli.ceph_json("status", timeout=30)
        dump = self.cli.ceph_json("osd", "dump", timeout=30)
        return missing(status, dump, self.osd.count)

    def health_check(self) -> None:
        """Raise ExecutionError naming the daemon (e.g. osd.1) if any process of ours died."""
        self._check_daemons()

    def _check_daemons(self) -> None:
        for d in self._daemons.values():
            status = d.exit_status()
            if status is not None:
                raise ExecutionError(
                    f"{d.name} (pid {d.pid}) died: {status}. Log: "
                    f"{self.layout.log}/ceph-{d.name}.log; last output:\n{d.tail()}"
                )

    # ------------------------------------------------------------ processes and CPUs

    def pids(self) -> dict[str, int]:
        """daemon name ("mon.a", "osd.0") -> pid."""
        return {name: d.pid for name, d in self._daemons.items()}

    @property
    def cluster_log(self) -> Path:
        """The mons' cluster log (bootstrap sets mon_cluster_log_file)."""
        return self.layout.log / "cluster.log"

    def osd_pids(self) -> dict[int, int]:
        return {int(n[4:]): d.pid for n, d in self._daemons.items() if n.startswith("osd.")}

    def pin_threads(self) -> None:
        """Re-apply each classic OSD's CPUs to all its threads (crimson pins itself)."""
        if self.crimson:
            return
        for osd_id, pid in self.osd_pids().items():
            cpus = self.cpus.get(osd_id)
            if cpus is not None:
                n = procs.set_thread_affinity(pid, cpus.reactors)
                log.debug("osd.%d: %d threads pinned to %s", osd_id, n, cpus.cpuset)

    def verify_crimson(self) -> None:
        """Every OSD is crimson with the planned store, its reactors one per planned CPU."""
        ids = sorted(self.osd_pids())
        crimson_checks.check_identity(self.cli, self.layout.run, ids, self.osd.object_store.value,
                                      self.store_option)  # fmt: skip
        _, problems = self.crimson_threads()
        if problems:
            raise ExecutionError("crimson threads not where planned: " + "; ".join(problems))

    def crimson_threads(self) -> tuple[dict[str, dict[str, str]], list[str]]:
        return crimson_checks.thread_report(self.osd_pids(), self.cpus)

    def reactor_utilization(self) -> dict[int, list[float]]:
        """osd id -> its reactors' Seastar utilization % now, from the admin sockets."""
        return crimson_checks.reactor_utilization(self.layout.run, sorted(self.osd_pids()))

    # ------------------------------------------------------------ config and CLI

    def apply_config(self, config: Mapping[str, Mapping[str, str]]) -> None:
        """section ("global", "osd", "osd.3", "client") -> key -> value into the mon db."""
        self.cli.set_config(config)

    def run_commands(self, cmds: Iterable[Sequence[str]]) -> None:
        """ceph CLI argument lists, e.g. ("osd", "set-allow-crimson", "--yes-i-really-mean-it").
        A leading "ceph" is accepted and dropped."""
        for cmd in cmds:
            self.cli.ceph(*(cmd[1:] if cmd and cmd[0] == "ceph" else cmd))

    @property
    def mon_addr(self) -> str:
        return f"v2:127.0.0.1:{self.mon_port}"

    def client_conf(self) -> ClientConf:
        return ClientConf(self.layout.client_conf, self.layout.admin_keyring)
