"""What fio does in a step: a preset, or an allow-listed custom workload."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from crimsonbench.spec.base import BlockSizeStr, RuledModel
from crimsonbench.spec.rules import Rule

# fio options a custom workload may set. Everything else (engine, pool, image, cpus_allowed,
# iodepth, runtime, output) is owned by the planner so results stay comparable.
FIO_OPTION_ALLOWLIST = (
    "rwmixread",
    "rwmixwrite",
    "rate_iops",
    "rate",
    "norandommap",
    "randrepeat",
    "random_distribution",
    "zero_buffers",
    "refill_buffers",
    "buffer_compress_percentage",
    "buffer_compress_chunk",
    "dedupe_percentage",
    "bssplit",
    "offset",
    "size",
    "io_size",
    "percentile_list",
    "thinktime",
    "thinktime_blocks",
    "busy_poll",
    "rbd_background_processing",
)


PRESETS: dict[str, tuple[str, str]] = {
    "randread4k": ("randread", "4k"),
    "randwrite4k": ("randwrite", "4k"),
    "seqread64k": ("read", "64k"),
    "seqwrite64k": ("write", "64k"),
}

WORKLOAD_RULES = (
    Rule(
        cel="has(self.preset) != (has(self.rw) || has(self.bs))",
        message="set either preset, or rw and bs for a custom workload, not both",
        field="preset",
        check=lambda w: (w.preset is not None) != (w.rw is not None or w.bs is not None),
    ),
    Rule(
        cel="has(self.preset) || (has(self.rw) && has(self.bs) && has(self.name))",
        message="a custom workload needs name, rw and bs",
        field="name",
        check=lambda w: w.preset is not None or None not in (w.rw, w.bs, w.name),
    ),
    Rule(
        cel="!has(self.options) || self.options.all(k, k in "
        + repr(list(FIO_OPTION_ALLOWLIST)).replace("'", '"')
        + ")",
        message="options may only set: " + ", ".join(FIO_OPTION_ALLOWLIST),
        field="options",
        check=lambda w: all(k in FIO_OPTION_ALLOWLIST for k in w.options),
    ),
)


class WorkloadSpec(RuledModel):
    RULES = WORKLOAD_RULES

    preset: Literal["randread4k", "randwrite4k", "seqread64k", "seqwrite64k"] | None = Field(
        default=None, description="A standard workload."
    )
    # maxLength keeps the unique-name CEL rule inside the API server's cost budget.
    name: str | None = Field(default=None, max_length=31, pattern=r"^[a-z0-9][a-z0-9-]{0,30}$")
    rw: Literal["read", "write", "randread", "randwrite", "rw", "readwrite", "randrw"] | None = None
    bs: BlockSizeStr | None = None
    options: dict[str, Annotated[str, Field(max_length=256)]] = Field(
        default_factory=dict, max_length=32, description="Allow-listed fio options."
    )

    @property
    def key(self) -> str:
        return self.preset or self.name or ""

    @property
    def rw_mode(self) -> str:
        return PRESETS[self.preset][0] if self.preset else str(self.rw)

    @property
    def block_size(self) -> str:
        return PRESETS[self.preset][1] if self.preset else str(self.bs)

    @property
    def reports_bandwidth(self) -> bool:
        """Sequential workloads are read as MiB/s, random ones as IOPS (as published)."""
        return self.rw_mode in ("read", "write", "rw", "readwrite")
