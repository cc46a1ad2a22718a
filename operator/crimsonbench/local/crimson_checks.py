"""What a local crimson cluster is really running, read from the daemons themselves:
the OSD type and object store each OSD reports, where its reactors and alien threads
run, and how busy Seastar says its reactors are."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from crimsonbench.errors import ExecutionError
from crimsonbench.local.admin_socket import asok_command
from crimsonbench.local.ceph_cli import CephCli
from crimsonbench.local.procs import threads
from crimsonbench.local.userland import Userland
from crimsonbench.local.versions import known_options
from crimsonbench.plan.ceph_options import crimson_family_of, store_option_from_known
from crimsonbench.plan.ceph_options import store_option as family_store_option
from crimsonbench.plan.types import CephSetup, OsdCpus
from crimsonbench.results.crimson_threads import check_crimson_threads
from crimsonbench.results.seastar_metrics import parse_reactor_utilization

REACTOR_UTILIZATION = {"prefix": "dump_metrics", "group": "reactor_utilization", "format": "json"}


def store_option(userland: Userland, setup: CephSetup, crimson: bool) -> str:
    """The option this Ceph's crimson reads its object store from, asked of its own
    programs (`ceph-conf -D`): crimson_osd_objectstore on squid/tentacle, osd_objectstore on
    Ceph 21/main. Without ceph-conf: the family the setup's CPU options are in."""
    known = known_options(userland) if crimson else None
    if known is not None:
        return store_option_from_known(known)
    return family_store_option(crimson_family_of(setup.config) or "legacy")


def asok_path(run_dir: Path, osd_id: int) -> Path:
    return run_dir / f"ceph-osd.{osd_id}.asok"  # admin_socket = $run_dir/$cluster-$name.asok


def reactor_utilization(run_dir: Path, osd_ids: list[int]) -> dict[int, list[float]]:
    """osd id -> each of its reactors' utilization % now."""
    out: dict[int, list[float]] = {}
    for osd_id in osd_ids:
        text = asok_command(asok_path(run_dir, osd_id), REACTOR_UTILIZATION)
        out[osd_id] = list(parse_reactor_utilization(text).values())
    return out


def check_identity(
    cli: CephCli,
    run_dir: Path,
    osd_ids: list[int],
    store: str,
    store_option: str = "crimson_osd_objectstore",
) -> None:
    """Each OSD says it is crimson (osd metadata osd_type; classic OSDs have no such key)
    and runs the planned object store (crimson's metadata has no osd_objectstore: the
    daemon's own store option is read instead, store_option: crimson_osd_objectstore on
    squid and tentacle, osd_objectstore on Ceph 21/main)."""
    for osd_id in osd_ids:
        meta = cli.ceph_json("osd", "metadata", str(osd_id))
        if meta.get("osd_type") != "crimson":
            raise ExecutionError(
                f"osd.{osd_id} is not a crimson OSD (osd metadata osd_type "
                f"{meta.get('osd_type')!r}, version {meta.get('ceph_version')!r})"
            )
        answer = asok_command(
            asok_path(run_dir, osd_id), {"prefix": "config get", "var": store_option}
        )
        running = running_store(answer, store_option)
        if running != store:
            raise ExecutionError(
                f"osd.{osd_id} runs object store {running!r} ({store_option}), planned {store!r}"
            )


def running_store(answer: str, store_option: str) -> str | None:
    """The store in a daemon's answer to `config get STORE_OPTION` (JSON: {name: value});
    None when it answered something else (e.g. an error for an option it does not know)."""
    try:
        doc = json.loads(answer)
    except ValueError:
        return None
    value = doc.get(store_option) if isinstance(doc, dict) else None
    return value if isinstance(value, str) else None


def thread_report(
    pids: Mapping[int, int], cpus: Mapping[int, OsdCpus]
) -> tuple[dict[str, dict[str, str]], list[str]]:
    """osd -> role -> CPUs seen, and every way the reactors or alien threads differ from
    the plan."""
    report: dict[str, dict[str, str]] = {}
    problems: list[str] = []
    for osd_id, pid in sorted(pids.items()):
        plan = cpus.get(osd_id)
        if plan is None:
            continue
        seen, bad = check_crimson_threads(pid, threads(pid), plan)
        report[f"osd.{osd_id}"] = seen
        problems += [f"osd.{osd_id}: {b}" for b in bad]
    return report, problems
