"""Parse `lscpu -e=CPU,NODE,SOCKET,CORE,ONLINE --json` (or plain `lscpu -e --json`).

Pure text in, Topology out: the executors run lscpu, this module only reads its output.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from crimsonbench.errors import ParseError
from crimsonbench.plan.types import Cpu, Topology

LSCPU_COMMAND = "lscpu -e=CPU,NODE,SOCKET,CORE,ONLINE --json"

# lscpu 2.38-2.40 prints an empty cell as a bare `-`, which is not JSON (util-linux issue
# #3430); it happens for the NODE/SOCKET/CORE of offline CPUs and for NODE without NUMA.
# Only a `-` standing alone as a value is rewritten, so negative numbers stay intact.
_BARE_DASH = re.compile(r"(:\s*)-(?=\s*[,}\]])")
_EMPTY = ("-", "")  # how empty cells look once quoted (2.41+) or in older versions
_TRUE = ("true", "yes", "y")
_FALSE = ("false", "no", "n")
UNKNOWN = -1  # node/socket/core of an offline CPU: the kernel hides its topology


def parse_lscpu_json(text: str) -> Topology:
    """Build a Topology from lscpu's JSON CPU table. Raises ParseError on anything else.

    Hyper-thread siblings are CPUs with the same (socket, core), whatever their ids; CORE
    may be lscpu's logical core number (default) or the kernel's core_id (`-y`).
    Without a NODE column or without NUMA, every CPU's node is its socket.
    """
    rows = _rows(_load(text))
    parsed = [_parse_row(row, i) for i, row in enumerate(rows)]
    dupes = sorted(i for i, n in Counter(p[0] for p in parsed).items() if n > 1)
    if dupes:
        raise ParseError(f"lscpu lists CPU {dupes[0]} more than once; is this one machine?")
    numa = any(p[1] is not None for p in parsed if p[4])
    cpus = [_to_cpu(p, numa) for p in parsed]
    if not any(c.online for c in cpus):
        raise ParseError("lscpu reports no online CPU; nothing could run there")
    return Topology(cpus=tuple(sorted(cpus, key=lambda c: c.id)))


def _load(text: str) -> Any:
    if not text or not text.strip():
        raise ParseError(f"lscpu printed nothing; expected the JSON of `{LSCPU_COMMAND}`")
    try:
        return json.loads(_BARE_DASH.sub(r"\1null", text) if "-" in text else text)
    except RecursionError:  # nested thousands deep: no lscpu writes that
        raise ParseError(
            f"lscpu output nests too deep to be lscpu's CPU table; run `{LSCPU_COMMAND}`"
        ) from None
    except json.JSONDecodeError as exc:
        start = text.strip()[:60]
        raise ParseError(
            f"lscpu output is not JSON ({exc.msg} at line {exc.lineno}): {start!r}...; "
            f"run `{LSCPU_COMMAND}`"
        ) from None


def _rows(doc: Any) -> list[dict[str, Any]]:
    if isinstance(doc, dict) and "lscpu" in doc:
        raise ParseError(
            f"this is lscpu's summary (`lscpu --json`), not its CPU table; run `{LSCPU_COMMAND}`"
        )
    rows = doc.get("cpus") if isinstance(doc, dict) else None
    if not isinstance(rows, list) or not rows:
        raise ParseError(f"lscpu JSON has no 'cpus' list; run `{LSCPU_COMMAND}`")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ParseError(f"lscpu 'cpus' entry {i} is {type(row).__name__}, not an object")
    return rows


# cpu, node, socket, core, online; None where lscpu left the cell empty
_Row = tuple[int, int | None, int | None, int | None, bool]


def _parse_row(row: dict[str, Any], index: int) -> _Row:
    # libsmartcols always writes JSON keys in lower case ("cpu", "node", ...)
    cpu = _int(row.get("cpu"), "cpu", index, None)
    if cpu is None:
        raise ParseError(f"lscpu 'cpus' entry {index} has no CPU number")
    for column in ("socket", "core"):
        if column not in row:
            raise ParseError(f"lscpu output has no {column.upper()} column; run `{LSCPU_COMMAND}`")
    socket = _int(row["socket"], "socket", index, cpu)
    core = _int(row["core"], "core", index, cpu)
    node = _int(row.get("node"), "node", index, cpu)
    online = _online(row.get("online"), cpu)
    if online is None:  # no ONLINE column: lscpu leaves an offline CPU's topology empty
        online = socket is not None and core is not None
    if online and (socket is None or core is None):
        raise ParseError(f"lscpu gives online CPU {cpu} no socket or core; cannot find siblings")
    return (cpu, node, socket, core, online)


def _int(value: Any, key: str, index: int, cpu: int | None) -> int | None:
    if type(value) is int and value >= 0:  # the common case first: parsing runs per node
        return value
    if value is None or (isinstance(value, str) and value.strip() in _EMPTY):
        return None
    where = f"entry {index}" if cpu is None else f"CPU {cpu}"
    # bool is an int in Python; older lscpu versions print every number as a string
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        raise ParseError(f"lscpu {key} of {where} is negative ({value})")
    raise ParseError(f"lscpu {key} of {where} is {value!r}, not a number")


def _online(value: Any, cpu: int) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise ParseError(f"lscpu online of CPU {cpu} is {value!r}; expected true/false or yes/no")


def _to_cpu(p: _Row, numa: bool) -> Cpu:
    cpu, node, socket, core, online = p
    if not online:  # kept for the record; the planner never uses offline CPUs
        socket = UNKNOWN if socket is None else socket
        core = UNKNOWN if core is None else core
        node = node if node is not None else UNKNOWN if numa else socket
        return Cpu(cpu, node, socket, core, online=False)
    assert socket is not None and core is not None  # _parse_row rejects that
    if not numa:  # no NUMA: the socket is the memory domain
        node = socket
    elif node is None:
        raise ParseError(
            f"lscpu gives CPU {cpu} no NUMA node while other CPUs have one; "
            "check that all CPUs are listed in /sys/devices/system/node"
        )
    return Cpu(cpu, node, socket, core, online=True)
