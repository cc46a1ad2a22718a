"""What fio does in a step: a preset, or an allow-listed custom workload."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field

from crimsonbench.spec.base import BlockSizeStr, RuledModel, hinted
from crimsonbench.spec.rules import Rule, cel_regex

# fio options a custom workload may set. Everything else (engine, pool, image, cpus_allowed,
# iodepth, runtime, output, the percentiles recorded) is owned by the planner so results
# stay comparable. percentile_list is not here: every step records RECORDED_PERCENTILES
# (the reports and latency targets read them), and a workload replacing the list would
# silently lose them.
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
    "thinktime",
    "thinktime_blocks",
    "busy_poll",
    "rbd_background_processing",
)

# Every option value: what fio's own value syntax needs (sizes, ratios, lists like
# bssplit's 4k/10:64k/90, zipf:1.2), and nothing that could end the line, open a section,
# start a comment or be expanded by fio ($VAR, (1+2)): no whitespace, '[', ']', '=', '#',
# ';', '$', quotes or parentheses.
FIO_VALUE_PATTERN = hinted(
    r"^[A-Za-z0-9_.:,%/+-]+$",
    "is not a fio option value: letters, digits and _ . : , % / + - only (no spaces, line "
    "breaks, brackets, '=', '$' or quotes)",
)

_PERCENT = "(100|[1-9]?[0-9])"
_SIZE = "[0-9]+([kKmMgGtT]i?[bB]?)?"
_RATE = "([0-9]+([kKmMgG]i?[bB]?)?)?"

# (options, the value's pattern, what it must be): per-option checks, the same in CEL and
# here. bssplit and random_distribution have too rich a syntax for one pattern: fio checks
# them (FIO_VALUE_PATTERN keeps them harmless).
OPTION_FORMATS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (
        ("rwmixread", "rwmixwrite", "buffer_compress_percentage", "dedupe_percentage"),
        f"^{_PERCENT}$",
        "a whole percentage, 0 to 100",
    ),
    (
        (
            "norandommap",
            "randrepeat",
            "zero_buffers",
            "refill_buffers",
            "busy_poll",
            "rbd_background_processing",
        ),
        "^[01]$",
        "0 or 1",
    ),  # fmt: skip
    (("thinktime_blocks",), "^[1-9][0-9]*$", "a whole number, 1 or more"),
    (("thinktime",), "^[0-9]+(us|ms|s|m|h)?$", "a time: a whole number of us (or 2ms, 1s)"),
    (("buffer_compress_chunk",), f"^{_SIZE}$", "a size: bytes, or e.g. 4k, 1m"),
    (
        ("offset", "size", "io_size"),
        f"^({_SIZE}|{_PERCENT}%)$",
        "a size (bytes, or e.g. 64m, 2g) or a percentage of the image (e.g. 50%)",
    ),
    (
        ("rate", "rate_iops"),
        f"^{_RATE}(,{_RATE}){{0,2}}$",
        "a number with an optional k/m/g, or read,write[,trim] values (e.g. 100m or 5k,1k)",
    ),
)


def _option_rule(names: tuple[str, ...], pattern: str, what: str) -> Rule:
    listed = ", ".join(f"'{n}'" for n in names)
    return Rule(
        cel=f"!has(self.options) || [{listed}].all(k, !(k in self.options) || "
        f"self.options[k].matches({cel_regex(pattern)}))",
        message=f"options {', '.join(names)} must be {what}",
        field="options",
        check=lambda w: all(
            k not in w.options or re.fullmatch(pattern, w.options[k]) for k in names
        ),
    )


OPTION_RULES = tuple(_option_rule(*f) for f in OPTION_FORMATS)

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
        message="options may only set: "
        + ", ".join(FIO_OPTION_ALLOWLIST)
        + "; crimsonbench sets every other fio option itself, the same for every step "
        "(ioengine, pool, rbdname, rw, bs, iodepth, numjobs, runtime, cpus_allowed, and "
        "percentile_list: every step records p50, p90, p99, p99.9 and p99.99)",
        field="options",
        check=lambda w: all(k in FIO_OPTION_ALLOWLIST for k in w.options),
    ),
)


class WorkloadSpec(RuledModel):
    RULES = WORKLOAD_RULES + OPTION_RULES

    preset: Literal["randread4k", "randwrite4k", "seqread64k", "seqwrite64k"] | None = Field(
        default=None, description="A standard workload."
    )
    # maxLength keeps the unique-name CEL rule inside the API server's cost budget.
    name: str | None = Field(default=None, max_length=31, pattern=r"^[a-z0-9][a-z0-9-]{0,30}$")
    rw: Literal["read", "write", "randread", "randwrite", "rw", "readwrite", "randrw"] | None = None
    bs: BlockSizeStr | None = None
    options: dict[str, Annotated[str, Field(max_length=256, pattern=FIO_VALUE_PATTERN)]] = Field(
        default_factory=dict,
        max_length=32,
        description="Allow-listed fio options (see the rules for each one's format). A value "
        "is letters, digits and _ . : , % / + - only: no spaces, brackets, '=' or '$'.",
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
