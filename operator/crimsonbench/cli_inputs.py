"""What the user typed on the command line, checked before anything runs: each refusal
one error naming the option (BadInput) and what to do instead."""

from __future__ import annotations

import os
from pathlib import Path

from crimsonbench.errors import CrimsonBenchError, ParseError
from crimsonbench.plan.capacity import Measured, check_capacity
from crimsonbench.plan.ceph_options import ceph_major
from crimsonbench.plan.topology import parse_lscpu_json
from crimsonbench.plan.types import Topology
from crimsonbench.results.store import MARKER_FILE, ResultStore
from crimsonbench.spec.models import BenchmarkRunSpec, Flavor

# lscpu's table for 8,192 CPUs is ~1 MiB; anything far larger is not one (/dev/zero)
MAX_LSCPU_BYTES = 16 * 2**20


class BadInput(Exception):
    """A path or option the user gave cannot be used (the message says why)."""


def topology(lscpu_json: Path | None) -> Topology:
    """The topology to plan for: --lscpu-json's (another machine), else this machine's."""
    if lscpu_json is None:
        from crimsonbench.local.topology_probe import local_topology

        return local_topology()
    try:
        with lscpu_json.open("rb") as fh:
            raw = fh.read(MAX_LSCPU_BYTES + 1)
    except OSError as exc:
        raise BadInput(f"--lscpu-json {lscpu_json}: {exc.strerror}") from exc
    if len(raw) > MAX_LSCPU_BYTES:
        raise BadInput(
            f"--lscpu-json {lscpu_json}: larger than {MAX_LSCPU_BYTES >> 20} MiB, so not "
            "lscpu's CPU table; run `lscpu -e --json` on the machine"
        )
    try:
        return parse_lscpu_json(raw.decode())
    except UnicodeDecodeError as exc:
        raise BadInput(f"--lscpu-json {lscpu_json}: not text (byte {exc.start} is not UTF-8); "
                       "give the output of `lscpu -e --json`") from None  # fmt: skip
    except ParseError as exc:
        raise BadInput(f"--lscpu-json {lscpu_json}: {exc}") from None


def ceph_version(value: str | None) -> str | None:
    """--ceph-version as given, once it reads as a Ceph version (e.g. 19.2.1)."""
    if value is not None and ceph_major(value) is None:
        raise BadInput(f"--ceph-version {value!r} is not a Ceph version; write it like 19.2.1 "
                       "(or leave it out to ask this machine's Ceph)")  # fmt: skip
    return value


def local_version(spec: BenchmarkRunSpec) -> str | None:
    """The Ceph version a local run here would use (its cephRoot, cephBinDir or this
    machine's packages); None when there is none to ask."""
    from crimsonbench.local.userland import userland_for
    from crimsonbench.local.versions import installed_ceph_version

    local = spec.target.local
    if local is None:
        return None
    try:
        crimson = spec.osd.flavor == Flavor.CRIMSON
        ul = userland_for(local.ceph_root, crimson, local.ceph_bin_dir)
        return installed_ceph_version(ul)
    except CrimsonBenchError:
        return None


def capacity(spec: BenchmarkRunSpec, here: bool) -> None:
    """The run fits (plan.capacity): its stores always; this machine's memory and disk
    when it plans for this machine (`here`)."""
    measured: Measured | None = None
    if here and spec.target.local is not None:
        from crimsonbench.local.topology_probe import local_room

        measured = local_room(spec.target.local)
    check_capacity(spec, measured)


def store(path: Path) -> ResultStore:
    found = ResultStore(path)
    found.check_readable()
    return found


def comparison_dir(out: Path, compared: list[ResultStore]) -> Path:
    """--out, unless it is a file or lies in a results directory: the comparison's files
    would be read as that run's own (its report, its steps) and change its figures."""
    if out.exists() and not out.is_dir():
        raise BadInput(f"--out {out} is a file, not a directory")
    real = Path(os.path.realpath(out))
    roots = [Path(os.path.realpath(c.root)) for c in compared]
    marked = [p for p in (real, *real.parents) if (p / MARKER_FILE).is_file()]
    inside = [r for r in roots if r == real or r in real.parents] + marked
    if inside:
        raise BadInput(
            f"--out {out} is inside the results directory {inside[0]}; write the comparison "
            "outside it (e.g. --out comparison)"
        )
    return out
