"""What a step's actions carry, rendered before they are carried out: the driver's start
request, the label selectors a usage sample reads, the fio servers' Jobs whose CPU logs a
done step's verdict reads. The step loop sends these as they are; it renders nothing."""

from __future__ import annotations

from collections.abc import Mapping

from crimsonbench.controller.decisions.node_room import OSD_APP
from crimsonbench.manifests import fio, fio_driver
from crimsonbench.manifests.fio_driver import StartRequest
from crimsonbench.manifests.naming import LABEL_ROLE, LABEL_RUN, label_value
from crimsonbench.plan.types import BarrierAddress, RunPlan, Step

# the CPU log's lines beyond the step's deadline: fio's own few, and then some
CPU_LOG_MARGIN_LINES = 30


def start_request(
    plan: RunPlan, step: Step | None, key: str, deadline_s: int, servers: Mapping[str, str],
    osds: Mapping[str, str], meet: BarrierAddress | None,
) -> StartRequest:  # fmt: skip
    """A step with several clients meets at a start barrier in the driver pod (`meet`: its
    address and this attempt's own token, manifests/start_barrier.py; None for the prefill
    and a single client); a step keeps the OSDs' incarnations with it, and on crimson
    samples the planned OSDs' reactors."""
    crimson = step is not None and plan.flavor == "crimson" and bool(plan.osds)
    return StartRequest(
        key, fio.client_job_files(plan, step, meet), dict(servers), deadline_s,
        osds=osds if step is not None else None,
        reactors=(plan.sample_interval_s, [o.osd_id for o in plan.osds]) if crimson else None,
        barrier=fio_driver.barrier_files(plan, meet) if meet is not None else None,
    )  # fmt: skip


def fio_server_selector(run: str) -> str:
    """The run's fio servers (they run every job of a step)."""
    return f"{LABEL_RUN}={label_value(run)},{LABEL_ROLE}={fio.ROLE_SERVER}"


def osd_selector(plan: RunPlan) -> str | None:
    """The planned OSDs' pods on Rook; None when the plan names none."""
    ids = ",".join(str(o.osd_id) for o in plan.osds)
    return f"app={OSD_APP},ceph-osd-id in ({ids})" if ids else None


def cpu_log_jobs(plan: RunPlan, run: str) -> dict[str, str]:
    """client -> the Job of its fio server, whose container log its CPU sampler writes."""
    return {c.name: fio.server_job_name(run, c.name) for c in plan.clients}


def cpu_log_lines(deadline_s: int) -> int:
    """A line a second: the whole step and then some."""
    return deadline_s + CPU_LOG_MARGIN_LINES
