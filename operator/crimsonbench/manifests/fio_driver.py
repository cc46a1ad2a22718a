"""The run's fio driver: one long-lived pod from which the operator runs every step's
`fio --client` by exec, so no pod starts per step.

A Job per step cost a pod start, the Job controller's completion and a reconcile tick on
every step (8.4 s beyond runtime + ramp on two kind workers). The driver pod starts once,
with the fio servers; a step is then three execs of the driver script (fio-driver.sh,
beside this file: the protocol's other side, every reply a line of JSON first):

- start: writes the step's job files into the step's directory and launches the step in
  a session of its own (it outlives the exec and the operator: an operator restarted
  mid-step finds it running). `mkdir` makes the start happen once per attempt.
- poll: the step's state (StepReport), optionally waiting in the pod up to W seconds for
  its end (one exec instead of a poll loop), and when done its output: fio's JSON, fio's
  messages and the IOPS logs between `==> name <==` lines (results.step_log reads them),
  plus the files the operator left with the start (the OSD incarnations).
- end: drops a step's attempt (kills what still runs, moves its directory aside) so the
  step can run again, or marks it stored once the operator holds its result.

The directory of a step is the whole state: what the operator needs to resume is in the
pod, not in the operator's memory.

Which copy of the script runs: the runner image ships it (Dockerfile, stage fio), and
the driver pod takes the image's copy when it is byte for byte this one (CB_DRIVER_SHA256).
With another image (`fio.image`), or another version of ours, the pod has none: every
exec answers {"state": "no-driver"} until the operator sends its own copy once
(install_command; controller/driver.py does it). Any image with sh, coreutils, setsid,
timeout and fio works.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from crimsonbench.errors import InvalidSpec, ParseError
from crimsonbench.manifests.ceph_access import CephAccess, ceph_config_script
from crimsonbench.manifests.fio import checked_name, client_args, client_job_files, job_file_name
from crimsonbench.manifests.naming import labels, suffixed_name
from crimsonbench.manifests.pods import PodOptions, ScriptJob, script_job
from crimsonbench.plan.types import BarrierAddress, RunPlan

ROLE_DRIVER = "fio-driver"
STEPS_ROOT = "/results/steps"
SCRIPT_NAME = "fio-driver.sh"
IMAGE_SCRIPT = f"/usr/local/lib/crimsonbench/{SCRIPT_NAME}"  # where the Dockerfile puts it
POD_SCRIPT = f"/results/{SCRIPT_NAME}"  # the copy every exec runs
# What one exec may carry in its arguments: they travel in the exec request's URL (the API
# server and the kubelet read at most 1 MiB of request head) and as argv in the pod.
EXEC_ARGS_LIMIT = 512 * 1024
# Files the operator leaves in a step's directory, and what the script names its output's
# sections (the script spells the same names; tests/manifests/test_driver_protocol.py).
OSDS_FILE = "osds.json"
# Crimson: "INTERVAL ID ID ..." -> the step samples `dump_metrics reactor_utilization` of
# those OSDs into REACTOR_LOG while its fio runs (results.seastar_metrics reads it).
REACTOR_OSDS_FILE = "reactor_osds"
REACTOR_LOG = "reactor.log"
STARTED, EXISTS = "started", "exists"  # a start's replies: launched now, or there already
# A step with several clients: the rendezvous program (start_barrier.py, beside this
# file) and its arguments "EXPECTED CAP_S PORT TOKEN HOST"; the script runs it before fio
# and returns its log as BARRIER_LOG.
BARRIER_PROGRAM = "start_barrier.py"
BARRIER_ARGS = "barrier.args"
BARRIER_LOG = "barrier.log"
# A `ceph tell` is a Python start (~0.5 CPU-s): at 100m a sample would take seconds.
SAMPLER_CPU = "500m"
NO_DRIVER = "no-driver"  # the state an exec answers in a pod without our script


@functools.cache
def barrier_program() -> str:
    """The text of start_barrier.py (package data, sent with every step that meets)."""
    return resources.files("crimsonbench.manifests").joinpath(BARRIER_PROGRAM).read_text()


def barrier_files(plan: RunPlan, meet: BarrierAddress) -> dict[str, str]:
    """What a step's start carries for its barrier: the program and its arguments."""
    t = plan.timing
    args = f"{t.barrier_jobs} {t.start_barrier_cap_s:g} {meet.port} {meet.token} {meet.host}\n"
    return {BARRIER_PROGRAM: barrier_program(), BARRIER_ARGS: args}


@functools.cache
def driver_script() -> str:
    """The text of fio-driver.sh (package data)."""
    return resources.files("crimsonbench.manifests").joinpath(SCRIPT_NAME).read_text()


def driver_sha256() -> str:
    return hashlib.sha256(driver_script().encode()).hexdigest()


# The names of the driver's pods, the only pods the operator may exec into: the chart's
# admission policy (templates/reachpolicy.yaml) spells this same expression; a test holds
# the two equal and proves every driver name matches it.
DRIVER_SUFFIX = "fio-driver"
DRIVER_POD_NAME_RE = rf"^[a-z0-9]([-a-z0-9]*[a-z0-9])?-{DRIVER_SUFFIX}-[a-z0-9]{{5}}$"


def driver_job_name(run: str) -> str:
    """`<run>-fio-driver`, the suffix kept whole in the Job's pods' names (long run names
    are shortened with a hash instead), so its pods match DRIVER_POD_NAME_RE."""
    return suffixed_name(run, DRIVER_SUFFIX)


# The container only has to stay up: steps run from execs. emptyDir /results holds them,
# and the script when the image's copy is ours.
DRIVER_SCRIPT = f"""\
mkdir -p {STEPS_ROOT}
if [ "$(sha256sum {IMAGE_SCRIPT} 2>/dev/null | cut -c1-64)" = "$CB_DRIVER_SHA256" ]; then
  cp {IMAGE_SCRIPT} {POD_SCRIPT}
fi
exec sleep "$CB_LIFETIME"
"""


def fio_driver_job(
    run: str,
    namespace: str,
    opts: PodOptions,
    *,
    node: str | None,
    lifetime_s: int,
    access: CephAccess | None = None,
) -> dict[str, Any]:
    """The driver needs little CPU: the fio client only exchanges job files and status
    with the servers, which do the I/O. It holds a Ceph secret (`access`, the run's fio
    user) only to sample crimson's reactors with `ceph tell`."""
    return script_job(
        ScriptJob(
            name=driver_job_name(run),
            namespace=namespace,
            labels=labels(run, ROLE_DRIVER, None, node),
            script=(ceph_config_script({}) if access else "") + DRIVER_SCRIPT,
            access=access,
            cpu=SAMPLER_CPU if access else "100m",
            memory="256Mi",  # fio's JSON of every job of a step, and the IOPS logs
            deadline_s=lifetime_s,
            node=node,
            env=(
                {"name": "CB_LIFETIME", "value": str(lifetime_s)},
                {"name": "CB_DRIVER_SHA256", "value": driver_sha256()},
            ),
            volumes=({"name": "results", "emptyDir": {}},),
            mounts=({"name": "results", "mountPath": "/results"},),
        ),
        opts,
    )


# ---------------------------------------------------------------- the execs

# How an exec runs the script in the pod: the installed copy, or a reply saying there is
# none. Tests on a host run the package's file instead (via=("sh", path)).
IN_POD = (
    "sh",
    "-c",
    f'[ -r {POD_SCRIPT} ] || {{ echo \'{{"state":"{NO_DRIVER}"}}\'; exit 0; }}; '
    f'exec sh {POD_SCRIPT} "$@"',
    "crimsonbench",
)


def install_command() -> list[str]:
    """The exec that puts this operator's copy of the script into the pod (atomically)."""
    return ["sh", "-c", f'umask 022; printf %s "$1" > {POD_SCRIPT}.part && '
            f'mv {POD_SCRIPT}.part {POD_SCRIPT}', "crimsonbench", driver_script()]  # fmt: skip


def start_command(
    key: str,
    job_files: Mapping[str, str],
    servers: Mapping[str, str],
    *,
    deadline_s: int,
    extra_files: Mapping[str, str] | None = None,
    root: str = STEPS_ROOT,
    via: Sequence[str] = IN_POD,
) -> list[str]:
    """The exec that starts a step (or the prefill, key "prefill") on the driver.
    job_files: client name -> its job file (manifests.fio.client_job_files)."""
    files = {**{job_file_name(c): t for c, t in job_files.items()}, **(extra_files or {})}
    flat: list[str] = []
    for name, text in files.items():
        flat += [checked_name(name), text]
    argv = [*via, "start", root, checked_name(key), str(deadline_s), str(len(files)), *flat,
            *client_args(job_files, servers, jobs_dir=".")]  # fmt: skip
    size = sum(len(a.encode()) + 1 for a in argv)
    if size > EXEC_ARGS_LIMIT:
        raise InvalidSpec(
            "spec.client.images",
            f"the fio job files of {key} take {size} bytes, more than one exec "
            f"carries ({EXEC_ARGS_LIMIT}); use fewer images or processesPerImage",
        )
    return argv


def reactor_osds_file(interval_s: float, osd_ids: Sequence[int]) -> str:
    """REACTOR_OSDS_FILE's text: the sample interval, then the OSD ids."""
    return f"{interval_s:g} {' '.join(str(i) for i in osd_ids)}\n"


@dataclass(frozen=True)
class StartRequest:
    """A step's (or the prefill's) start, as the operator hands it to the driver: each
    client's job file and server, the step's deadline, and what the driver keeps with the
    attempt (the OSDs' incarnations; on crimson the OSDs whose reactors it samples; the
    start barrier's program and arguments)."""

    key: str
    job_files: Mapping[str, str]  # client -> its job file (manifests.fio.client_job_files)
    servers: Mapping[str, str]  # client -> "ip:port" of its fio server
    deadline_s: int
    osds: Mapping[str, str] | None = None  # "osd.N" -> pod uid/restarts (a step)
    reactors: tuple[float, Sequence[int]] | None = None  # (interval s, OSD ids): crimson
    barrier: Mapping[str, str] | None = None  # barrier_files (several clients)

    def argv(self, *, root: str = STEPS_ROOT, via: Sequence[str] = IN_POD) -> list[str]:
        kept: dict[str, str] = {}
        if self.osds is not None:
            kept[OSDS_FILE] = json.dumps(dict(self.osds))
        if self.reactors is not None:
            kept[REACTOR_OSDS_FILE] = reactor_osds_file(*self.reactors)
        kept.update(self.barrier or {})
        return start_command(self.key, self.job_files, self.servers,
                             deadline_s=self.deadline_s, extra_files=kept, root=root,
                             via=via)  # fmt: skip


def started(reply: str) -> bool:
    """A start's reply: True launched now, False there already (started by an earlier
    call, maybe an operator that died since: poll it); ParseError for anything else."""
    state = str(parse_reply(reply)[0].get("state", ""))
    if state not in (STARTED, EXISTS):
        raise ParseError(f"the fio driver answered a start with state {state[:200]!r}")
    return state == STARTED


# a rendezvous whose text is longer than any real one's (an IPv6 address, a long token)
LONGEST_MEETING = BarrierAddress("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 65535, "f" * 32)


def check_fits_one_exec(plan: RunPlan) -> None:
    """InvalidSpec (naming the field) when a step's job files are more than one exec
    carries: found when the run is planned, not when its first step starts."""
    if plan.steps:
        servers = {c.name: "255.255.255.255:65535" for c in plan.clients}
        meet = LONGEST_MEETING if plan.timing.barrier_jobs else None
        files = client_job_files(plan, plan.steps[0], meet)
        extra = barrier_files(plan, LONGEST_MEETING) if meet else None
        start_command(plan.steps[0].id, files, servers, deadline_s=plan.timing.deadline_s,
                      extra_files=extra)  # fmt: skip


def poll_command(
    key: str, *, wait_s: int = 0, root: str = STEPS_ROOT, via: Sequence[str] = IN_POD
) -> list[str]:
    return [*via, "poll", root, checked_name(key), str(max(0, int(wait_s)))]


def end_command(
    key: str, *, stored: bool, root: str = STEPS_ROOT, via: Sequence[str] = IN_POD
) -> list[str]:
    """stored: the result is kept by the operator; else the attempt is dropped."""
    return [*via, "end", root, checked_name(key), "stored" if stored else "drop"]


# ---------------------------------------------------------------- the replies


@dataclass(frozen=True)
class StepReport:
    """What a poll found: the step's state on the driver, by the pod's clock."""

    state: str  # missing | running | done
    now: float
    started: float = 0.0
    ended: float = 0.0
    rc: int | None = None
    output: str = ""  # when done: the sections (results.step_log)

    @property
    def age_s(self) -> float:
        return self.now - self.started if self.started else 0.0

    @property
    def wall_s(self) -> float:
        return self.ended - self.started if self.started and self.ended else 0.0


_FIELDS = {"missing": ("now",), "running": ("now", "started"),
           "done": ("now", "started", "ended", "rc")}  # fmt: skip


def parse_reply(text: str) -> tuple[dict[str, Any], str]:
    """(the reply's JSON object, what follows its line). ParseError quoting the line when
    it is not one the script writes."""
    first, _, rest = text.partition("\n")
    try:
        head = json.loads(first)
    except ValueError:
        head = None
    if not isinstance(head, dict) or not isinstance(head.get("state"), str):
        raise ParseError(f"the fio driver answered {first[:200]!r}")
    return head, rest


def parse_report(text: str) -> StepReport:
    """A poll's reply (state missing, running or done) as a StepReport."""
    head, rest = parse_reply(text)
    state = head["state"]
    want = _FIELDS.get(state)
    numbers: dict[str, float] = {}
    for key, value in head.items():
        if key == "state":
            continue
        if want is None or key not in want or not _finite(value):
            raise ParseError(f"the fio driver answered {text.partition(chr(10))[0][:200]!r}")
        numbers[key] = float(value)
    if want is None or len(numbers) != len(want):
        raise ParseError(f"the fio driver answered {text.partition(chr(10))[0][:200]!r}")
    rc = numbers.pop("rc", None)
    if rc is not None and rc != int(rc):
        raise ParseError(f"the fio driver answered an exit code {rc!r}")
    return StepReport(state, rc=None if rc is None else int(rc), output=rest, **numbers)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
