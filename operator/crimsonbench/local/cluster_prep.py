"""What a benchmark does on a running cluster before its steps: pool, images, prefill."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from crimsonbench.errors import ExecutionError
from crimsonbench.local import rbd
from crimsonbench.local.ceph_cli import CephCli
from crimsonbench.plan.fio_jobs import RBD_CLIENT_OPTIONS


class BenchPrep:
    """LocalCluster's benchmark preparation (its CLI, its pool, its readiness wait)."""

    cli: CephCli
    pool: str | None
    timings: dict[str, float]

    def wait_ready(self, timeout: float | None = None) -> None:
        raise NotImplementedError

    def ceph_version(self) -> str:
        """Version the running daemons report, e.g. "16.2.15"."""
        overall = self.cli.ceph_json("versions").get("overall", {})
        for text in overall:
            parts = text.split()
            if parts[:2] == ["ceph", "version"] and len(parts) > 2:
                return parts[2].split("-")[0].split("+")[0]
        raise ExecutionError(f"`ceph versions` named no version: {overall}")

    def create_pool(
        self, name: str, pg_num: int, client_options: Mapping[str, str] | None = None
    ) -> None:
        """Size-1 rbd pool, no autoscale/balancer/scrub, librbd client settings; waits
        until its PGs are active+clean."""
        rbd.create_pool(self.cli, name, pg_num)
        rbd.configure_clients(self.cli, client_options or RBD_CLIENT_OPTIONS)
        self.pool = name
        self.wait_ready()

    def create_images(self, names: Sequence[str], size_bytes: int, pool: str | None = None) -> None:
        rbd.create_images(self.cli, self._pool(pool), names, size_bytes)

    def prefill(
        self,
        names: Sequence[str],
        size_bytes: int,
        deadline_s: float | None = None,
        block_size: int = 65536,
        pool: str | None = None,
    ) -> float:
        """Write every image once (64K sequential); returns the seconds it took."""
        took = rbd.prefill(
            self.cli, self._pool(pool), names, size_bytes, block_size, timeout=deadline_s
        )
        self.timings["prefill_s"] = took
        return took

    def rbd_du(self, pool: str | None = None) -> dict[str, int]:
        """image -> bytes used."""
        return rbd.du(self.cli, self._pool(pool))

    def _pool(self, pool: str | None) -> str:
        if pool is None and self.pool is None:
            raise ExecutionError("no pool yet: call create_pool() first or pass pool=")
        return pool or str(self.pool)
