"""What a run really ran with, next to what the plan asked for: each option the plan set
for an OSD against the value the daemon reports (`config show`), so a figure is never
read as measured under a setting the daemon did not take. Pure: the executor reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_SECTIONS = ("global", "osd")  # then "osd.<id>": later ones win, as in Ceph
# What a reader of a figure asks first, whoever set it (the plan, the local bootstrap's
# ceph.conf, Rook, a default): recorded as the daemon reports it.
KEY_OPTIONS = (
    "osd_objectstore", "memstore_device_bytes", "osd_memory_target", "bluestore_cache_size",
    "osd_op_num_shards", "osd_op_num_threads_per_shard", "ms_async_op_threads",
    "crimson_seastar_num_threads", "crimson_seastar_cpu_cores", "crimson_alien_op_num_threads",
    "crimson_alien_thread_cpu_cores", "osd_pool_default_size", "debug_osd", "debug_ms",
)  # fmt: skip


def planned_osd_options(config: Mapping[str, Mapping[str, str]], osd_id: int) -> dict[str, str]:
    out: dict[str, str] = {}
    for section in (*_SECTIONS, f"osd.{osd_id}"):
        out.update(config.get(section, {}))
    return out


def same_value(planned: str, shown: str) -> bool:
    """Ceph prints what it parsed: "0.5" may come back "0.500000", "True" as "true"."""
    a, b = planned.strip(), shown.strip()
    if a == b or a.lower() == b.lower():
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def option_readback(planned: Mapping[str, str], shown: Mapping[str, Any]) -> dict[str, Any]:
    """{"options": {key: {"planned", "effective"}}, "differ": [keys]}: a key the daemon
    does not show at all has effective null. Keys are compared with _ and space alike."""
    norm = {k.replace(" ", "_"): v for k, v in shown.items()}
    options, differ = {}, []
    for key, want in sorted(planned.items()):
        got = norm.get(key.replace(" ", "_"))
        effective = None if got is None else str(got)
        options[key] = {"planned": want, "effective": effective}
        if effective is None or not same_value(want, effective):
            differ.append(key)
    key_options = {k: str(norm[k]) for k in KEY_OPTIONS if k in norm}
    return {"options": options, "differ": differ, "effective": key_options}
