"""spec + what the executor observed -> RunPlan. The one entry point executors call."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from crimsonbench.plan.ceph_options import ceph_setup, family_from_known_options, option_family
from crimsonbench.plan.fio_jobs import RBD_CLIENT_OPTIONS, fio_plan, prefill_jobs, start_barrier
from crimsonbench.plan.hosts import ClusterLayout, plan_hosts
from crimsonbench.plan.resources import osd_resources
from crimsonbench.plan.steps import expand_steps
from crimsonbench.plan.types import (
    CephSetup,
    ClientPlan,
    CpuPlan,
    HostPlan,
    PoolPlan,
    PrefillPlan,
    RunPlan,
    StepTiming,
    Topology,
)
from crimsonbench.spec.models import BenchmarkRunSpec, Flavor, block_size_bytes, size_bytes

# beyond runtime + ramp before a step counts as hung: connecting to the cluster, opening
# the images, a pod starting, fio writing its output
DEFAULT_GRACE_S = 120
# the slowest prefill rate (all images together) before the prefill counts as hung
MIN_PREFILL_MIB_S = 5.0


def build_plan(
    name: str,
    spec: BenchmarkRunSpec,
    layout: ClusterLayout | Topology,
    *,
    ceph_version: str | None = None,
    known_options: Collection[str] | None = None,
    option_family: str | None = None,
    grace_s: int = DEFAULT_GRACE_S,
    owner: str = "",
) -> RunPlan:
    """Raises InvalidSpec (naming the field) when the spec cannot run on this layout.

    layout: what the executor observed; a bare Topology means one machine with every
    OSD and client (local mode, or `crimsonbench plan` for a host's lscpu).
    Crimson option names, most reliable first: option_family (the executor already
    decided it from the cluster), known_options (the names the target's mons know,
    `ceph config ls`), else the Ceph version (offline).
    owner: the run's tag (the operator's runs: from its uid) in the names of the pool it
    creates on Rook and of its images, so they are the run's alone ("": local mode, whose
    cluster is the run's own)."""
    if not isinstance(layout, ClusterLayout):
        layout = ClusterLayout.single(layout, spec)
    hosts, clients = plan_hosts(spec, layout, owner)
    family = option_family or _family(spec, ceph_version, known_options)
    c = spec.client
    user = fio_user(name, spec)
    pool = _pool_plan(spec, clients, user, owner)
    return RunPlan(
        name=name,
        flavor=spec.osd.flavor.value,
        hosts=hosts,
        clients=clients,
        ceph=ceph_setup(_merged(hosts), spec.osd, family) if hosts else CephSetup(),
        pool=pool,
        prefill=PrefillPlan(
            prefill_jobs(spec, clients),
            math.ceil(len(pool.images) * pool.image_size_bytes / 2**20 / MIN_PREFILL_MIB_S)
            + grace_s,
            block_size_bytes(c.prefill_block_size),
        ),
        steps=expand_steps(spec),
        fio=fio_plan(spec, clients, user, pool_name(spec, owner)),
        timing=StepTiming(
            spec.sweep.runtime_seconds,
            spec.sweep.ramp_seconds,
            grace_s,
            *start_barrier(clients, c.processes_per_image, c.num_jobs),
        ),
        sweep=spec.sweep,
        sample_interval_s=spec.sweep.sample_interval_seconds,
        osd_resources=osd_resources(spec, hosts),
        client_options=dict(RBD_CLIENT_OPTIONS),
        fio_numjobs=c.num_jobs,
        bandwidth_workloads=frozenset(w.key for w in spec.workloads if w.reports_bandwidth),
    )


def _pool_plan(
    spec: BenchmarkRunSpec, clients: Sequence[ClientPlan], user: str, owner: str
) -> PoolPlan:
    """The run's pool (named from its owner tag on Rook), its cephx user and its images."""
    c = spec.client
    images = tuple(sorted(i for client in clients for i in client.images))
    return PoolPlan(pool_name(spec, owner), c.pg_num, user, images, size_bytes(c.image_size),
                    spec.keep_images)  # fmt: skip


def fio_user(name: str, spec: BenchmarkRunSpec) -> str:
    """The cephx user fio runs as (without "client."). On Rook, the run's own CephClient,
    whose caps cover the run's pool only; on an external cluster the keyring's user (the
    only key the run has there); locally client.user."""
    if spec.target.rook is not None:
        return f"{name}-fio"
    if spec.target.external is not None:
        return spec.target.external.user
    return spec.client.user


def pool_name(spec: BenchmarkRunSpec, owner: str = "") -> str:
    """The pool of the run's images: on Rook the pool the run creates, named from its owner
    tag (never one that exists: Rook would adopt it); elsewhere client.pool."""
    if owner and spec.target.rook is not None:
        return f"{spec.client.pool}-{owner}"
    return spec.client.pool


def _family(spec: BenchmarkRunSpec, ceph_version: str | None, known: Collection[str] | None) -> str:
    if spec.osd.flavor != Flavor.CRIMSON or spec.target.external is not None:
        return "classic"  # external clusters are benchmarked as found: no options set
    if known is not None and spec.osd.option_naming.value == "auto":
        return family_from_known_options(known)
    return option_family(spec.osd.option_naming, spec.osd.ceph_version or ceph_version)


def _merged(hosts: tuple[HostPlan, ...]) -> CpuPlan:
    """Every host's OSDs in one CpuPlan, for the per-OSD Ceph options."""
    first = hosts[0].cpu
    osds = tuple(o for h in hosts for o in h.cpu.osds)
    return CpuPlan(first.policy, first.hyper_threads, osds, first.client, first.alien_threads)
