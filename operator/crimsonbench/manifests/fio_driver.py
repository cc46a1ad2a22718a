"""The run's fio driver: one long-lived pod from which the operator runs every step's
`fio --client` by exec, so no pod starts per step.

A Job per step cost a pod start, the Job controller's completion and a reconcile tick on
every step (8.4 s beyond runtime + ramp on two kind workers). The driver pod starts once,
with the fio servers; a step is then three execs:

- start: writes the step's job files into the step's directory and launches the step
  script in a session of its own (it outlives the exec and the operator: an operator
  restarted mid-step finds it running). `mkdir` makes the start happen once per attempt.
- poll: the step's state, optionally waiting in the pod up to W seconds for its end (one
  exec instead of a poll loop), and when done its output: fio's JSON, fio's messages and
  the IOPS logs between `==> name <==` lines (results.step_log reads them), plus the
  files the operator left with the start (the OSD incarnations).
- end: drops a step's attempt (kills what still runs, moves its directory aside) so the
  step can run again, or marks it stored once the operator holds its result.

The directory of a step is the whole state: what the operator needs to resume is in the
pod, not in the operator's memory. The scripts take their root as an argument (tests run
them on the host against real fio).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from crimsonbench.errors import InvalidSpec, ParseError
from crimsonbench.manifests.ceph_access import CephAccess, ceph_config_script
from crimsonbench.manifests.fio import (
    FIO_OUTPUT,
    checked_name,
    client_args,
    client_job_files,
    job_file_name,
)
from crimsonbench.manifests.naming import dns_name, labels
from crimsonbench.manifests.pods import PodOptions, ScriptJob, script_job
from crimsonbench.plan.types import RunPlan

ROLE_DRIVER = "fio-driver"
STEPS_ROOT = "/results/steps"
# What one exec may carry in its arguments: they travel in the exec request's URL (the API
# server and the kubelet read at most 1 MiB of request head) and as argv in the pod.
EXEC_ARGS_LIMIT = 512 * 1024
OSDS_FILE = "osds.json"
# Crimson: "INTERVAL ID ID ..." -> the step samples `dump_metrics reactor_utilization` of
# those OSDs into REACTOR_LOG while its fio runs (results.seastar_metrics reads it).
REACTOR_OSDS_FILE = "reactor_osds"
REACTOR_LOG = "reactor.log"
# A `ceph tell` is a Python start (~0.5 CPU-s): at 100m a sample would take seconds.
SAMPLER_CPU = "500m"
KEEP_STORED = 3


def driver_job_name(run: str) -> str:
    return dns_name(run, "fio-driver")


# The container only has to stay up: steps run from execs. emptyDir /results holds them.
DRIVER_SCRIPT = f"""\
mkdir -p {STEPS_ROOT}
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
            env=({"name": "CB_LIFETIME", "value": str(lifetime_s)},),
            volumes=({"name": "results", "emptyDir": {}},),
            mounts=({"name": "results", "mountPath": "/results"},),
        ),
        opts,
    )


# ---------------------------------------------------------------- the step, in the pod

# While fio runs, with REACTOR_OSDS_FILE: one round of `ceph tell` per interval, each
# answer after a "# ROUND_EPOCH osd.N rc=RC" line (with its stderr when it failed). A
# background list ignores SIGINT (what `drop` sends), so the run script stops it with
# TERM once fio ended, whatever ended it.
REACTOR_SAMPLER = f"""\
sampler=
if [ -s {REACTOR_OSDS_FILE} ]; then
  (
    read -r iv ids < {REACTOR_OSDS_FILE}
    u=${{CEPH_USERNAME:-admin}}; case "$u" in client.*) ;; *) u="client.$u" ;; esac
    trap 'kill "$c" 2>/dev/null; exit 0' TERM
    while :; do
      t=$(date +%s.%N)
      for i in $ids; do
        timeout 20 ceph -n "$u" tell "osd.$i" dump_metrics reactor_utilization \\
          > tell.out 2> tell.err &
        c=$!; rc=0; wait "$c" || rc=$?
        echo "# $t osd.$i rc=$rc"; cat tell.out; [ "$rc" = 0 ] || cat tell.err; echo
      done
      sleep "$iv" & c=$!; wait "$c"
    done
  ) > {REACTOR_LOG} 2>&1 &
  sampler=$!
fi
"""

# $1 deadline (s); the rest: fio's --client arguments. cwd: the step's directory. The
# state files are written last and atomically: `rc` exists only once `out` is complete.
# timeout --foreground keeps fio in the session's process group, which `drop` signals.
RUN_SCRIPT = f"""\
dl=$1; shift
date +%s.%N > started
{REACTOR_SAMPLER}rc=0
timeout --foreground -s INT "$dl" \\
  fio --output-format=json+ --output={FIO_OUTPUT} "$@" > fio.log 2>&1 || rc=$?
date +%s.%N > ended
if [ -n "$sampler" ]; then kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null; fi
{{
  if [ -s fio.log ]; then echo "==> fio.log <=="; cat fio.log; fi
  if [ -e {REACTOR_LOG} ]; then echo "==> {REACTOR_LOG} <=="; cat {REACTOR_LOG}; fi
  echo "==> {FIO_OUTPUT} <=="
  cat {FIO_OUTPUT} 2>/dev/null || true
  echo
  for f in *_iops.*.log*; do
    [ -e "$f" ] || continue
    echo "==> $f <=="
    cat "$f"
  done
}} > out.part
mv out.part out
echo "$rc" > rc.part
mv rc.part rc
"""

# $1 root, $2 step key, $3 the run script, $4 deadline, $5 number of files; then name and
# text of each file; then fio's --client arguments.
START_SCRIPT = """\
root=$1; d=$1/$2; run=$3; dl=$4; n=$5; shift 5
mkdir -p "$root"
if ! mkdir "$d" 2>/dev/null; then echo "state exists"; exit 0; fi
while [ "$n" -gt 0 ]; do printf '%s' "$2" > "$d/$1"; shift 2; n=$((n - 1)); done
cd "$d"
setsid sh -c "$run" step "$dl" "$@" < /dev/null > /dev/null 2>&1 &
echo $! > pid
echo "state started"
"""

# $1 root, $2 step key, $3 seconds to wait for the end. First line:
# `state missing|running|done NOW STARTED [ENDED RC]` (epoch seconds of the pod's clock).
POLL_SCRIPT = f"""\
d=$1/$2; i=0; n=$(( $3 * 10 ))
while [ -d "$d" ] && [ ! -e "$d/rc" ] && [ "$i" -lt "$n" ]; do sleep 0.1; i=$((i + 1)); done
now=$(date +%s.%N)
if [ ! -d "$d" ]; then echo "state missing $now"; exit 0; fi
cd "$d"
started=$(cat started 2>/dev/null || echo 0)
if [ ! -e rc ]; then echo "state running $now $started"; exit 0; fi
echo "state done $now $started $(cat ended) $(cat rc)"
cat out
if [ -e {OSDS_FILE} ]; then echo "==> {OSDS_FILE} <=="; cat {OSDS_FILE}; echo; fi
"""

# $1 root, $2 step key, $3 "drop" (kill, keep aside) or "stored". A stored step's directory
# stays for the last KEEP_STORED steps (to look at by hand; the rest would fill the pod's
# emptyDir over a long sweep); a dropped one stays for the run.
END_SCRIPT = """\
d=$1/$2
[ -d "$d" ] || exit 0
if [ -e "$d/pid" ] && [ ! -e "$d/rc" ]; then kill -INT -- "-$(cat "$d/pid")" 2>/dev/null || true; fi
if [ "$3" = stored ]; then
  rm -rf "$d.stored"; mv "$d" "$d.stored"
  ls -1dt "$1"/*.stored | tail -n +$((KEEP + 1)) | while read -r old; do rm -rf "$old"; done
else
  mv "$d" "$d.dropped.$(date +%s%N)"
fi
""".replace("KEEP", str(KEEP_STORED))


def _sh(script: str, *args: str) -> list[str]:
    return ["sh", "-c", script, "crimsonbench", *args]


def start_command(
    key: str,
    job_files: Mapping[str, str],
    servers: Mapping[str, str],
    *,
    deadline_s: int,
    extra_files: Mapping[str, str] | None = None,
    root: str = STEPS_ROOT,
) -> list[str]:
    """The exec that starts a step (or the prefill, key "prefill") on the driver.
    job_files: client name -> its job file (manifests.fio.client_job_files)."""
    files = {**{job_file_name(c): t for c, t in job_files.items()}, **(extra_files or {})}
    flat: list[str] = []
    for name, text in files.items():
        flat += [checked_name(name), text]
    argv = _sh(START_SCRIPT, root, checked_name(key), RUN_SCRIPT, str(deadline_s),
               str(len(files)), *flat, *client_args(job_files, servers, jobs_dir="."))  # fmt: skip
    size = sum(len(a.encode()) + 1 for a in argv)
    if size > EXEC_ARGS_LIMIT:
        raise InvalidSpec(
            "spec.client.images",
            f"the fio job files of {key} take {size} bytes, more than one exec "
            f"carries ({EXEC_ARGS_LIMIT}); use fewer images or processesPerImage",
        )
    return argv


def check_fits_one_exec(plan: RunPlan) -> None:
    """InvalidSpec (naming the field) when a step's job files are more than one exec
    carries: found when the run is planned, not when its first step starts."""
    if plan.steps:
        servers = {c.name: "255.255.255.255:65535" for c in plan.clients}
        start_command(plan.steps[0].id, client_job_files(plan, plan.steps[0]), servers,
                      deadline_s=plan.timing.deadline_s)  # fmt: skip


def poll_command(key: str, *, wait_s: int = 0, root: str = STEPS_ROOT) -> list[str]:
    return _sh(POLL_SCRIPT, root, checked_name(key), str(max(0, int(wait_s))))


def end_command(key: str, *, stored: bool, root: str = STEPS_ROOT) -> list[str]:
    """stored: the result is kept by the operator; else the attempt is dropped."""
    return _sh(END_SCRIPT, root, checked_name(key), "stored" if stored else "drop")


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


def parse_report(text: str) -> StepReport:
    first, _, rest = text.partition("\n")
    words = first.split()
    arity = {"missing": 3, "running": 4, "done": 6}
    try:
        if words[0] != "state" or len(words) != arity[words[1]]:
            raise ValueError
        nums = [float(w) for w in words[2:5]] + [0.0, 0.0]
        rc = int(words[5]) if words[1] == "done" else None
    except (ValueError, IndexError, KeyError):
        raise ParseError(f"the fio driver answered {shlex.quote(first[:200])}") from None
    return StepReport(words[1], nums[0], nums[1], nums[2], rc=rc, output=rest)
