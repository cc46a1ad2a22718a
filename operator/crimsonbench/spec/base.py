"""The spec's building blocks: the frozen camelCase base model, rule enforcement, and the
string types (CPU lists, sizes, node names) with their parsers."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from crimsonbench.spec.cpuset import CPUSET_PATTERN, parse_cpuset
from crimsonbench.spec.rules import Rule, cel_rules, violations

# Every pattern here is read by three regex engines that must agree: Rust's (pydantic),
# RE2 (the API server's `pattern` and CEL `matches`) and Python's `re` (Rule checks). So:
# ASCII classes only (never \d, \s or \w: Unicode-aware in Rust), no look-around, no
# counted repetition above 1000 (RE2's limit); lengths are maxLength, not {m,n}.

# Sizes: a whole number of Mi (< 10^8), Gi (< 10^6) or Ti (< 1000): below one PiB, so a
# size can never overflow anything we compute from it (a 20-digit Ti size did).
SIZE_PATTERN = r"^([1-9][0-9]{0,7}Mi|[1-9][0-9]{0,5}Gi|[1-9][0-9]{0,2}Ti)$"
# fio block sizes: bytes (< 10^10), k (< 10^7) or m (< 10^4).
BLOCK_SIZE_PATTERN = r"^([1-9][0-9]{0,9}|[1-9][0-9]{0,6}[kK]|[1-9][0-9]{0,3}[mM])$"
_SIZE_UNITS = {"Mi": 2**20, "Gi": 2**30, "Ti": 2**40}

# The whole run's size: fio job runs, one per step, image and process (BOUND_RULES).
MAX_STEP_JOBS = 1_000_000
STEP_JOBS_NOTE = (
    f" (workloads x repeats x iodepths x images x processesPerImage <= {MAX_STEP_JOBS:,})."
)

# Kubernetes names, exactly as apimachinery validates them (IsDNS1123Label/Subdomain,
# IsQualifiedName, IsValidLabelValue).
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"  # maxLength 63
DNS_SUBDOMAIN_PATTERN = (  # maxLength 253: object names, node names
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
LABEL_KEY_PATTERN = (  # [prefix/]name, name <= 63 characters
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"  # maxLength 63
SECRET_KEY_PATTERN = r"^[-._a-zA-Z0-9]+$"  # a key of a Secret's data, maxLength 253

# Ceph: cephx user ids ("admin", "rbd.bench"), pool names, mon addresses as in ceph.conf.
# None of them may start with '-' (it would read as an option on a command line) or hold
# anything that ends a line or opens a section in an ini file.
CEPHX_USER_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"  # maxLength 128
MON_HOST_PATTERN = r"^[A-Za-z0-9\[][A-Za-z0-9.:,/\[\] -]*$"  # maxLength 1024
# Local paths (workDir, cephRoot, keyringFile, ...): no whitespace, quotes, `$`, `;`,
# brackets or control characters, so they are safe in any config or command line.
PATH_PATTERN = r"^[A-Za-z0-9._/+:@,=~-]+$"  # maxLength 4096
# Block devices: absolute, and no component starts with '.' (no '..', no hidden names).
DEVICE_PATTERN = r"^(/[A-Za-z0-9_:@+=,-][A-Za-z0-9._:@+=,-]*)+$"  # maxLength 256

# Hints for pattern mismatches: validate_spec says "<value> <hint>" instead of the regex.
PATTERN_HINTS: dict[str, str] = {
    SIZE_PATTERN: "is not a size; write a whole number with Mi, Gi or Ti, below 1000Ti (e.g. 2Gi)",
    BLOCK_SIZE_PATTERN: "is not a block size; write e.g. 4k, 64k or 1m (below 10000m)",
    DNS_LABEL_PATTERN: "is not a valid name: lower case letters, digits and '-', starting "
    "and ending with a letter or digit (a DNS-1123 label)",
    DNS_SUBDOMAIN_PATTERN: "is not a valid Kubernetes name: lower case letters, digits, "
    "'-' and '.', starting and ending with a letter or digit (a DNS-1123 subdomain)",
    LABEL_VALUE_PATTERN: "is not a valid label value: letters, digits, '-', '_' and '.', "
    "starting and ending with a letter or digit, at most 63 characters",
    SECRET_KEY_PATTERN: "is not a valid Secret key: letters, digits, '-', '_' and '.'",
    CEPHX_USER_PATTERN: "is not a cephx user id: letters, digits, '_', '.' and '-', not "
    "starting with '-' or '.' (e.g. admin)",
    MON_HOST_PATTERN: "is not a mon_host: addresses and names separated by ',' or ' ', "
    "e.g. 10.0.0.1,10.0.0.2 or [v2:10.0.0.1:3300,v1:10.0.0.1:6789]",
    PATH_PATTERN: "is not a path we accept: letters, digits and . _ / + : @ , = ~ - only "
    "(no spaces, quotes, brackets or control characters)",
    DEVICE_PATTERN: "is not a block device path: absolute (e.g. /dev/nvme0n1), letters, "
    "digits and _ : @ + = , - . , no component starting with '.'",
}


def hinted(pattern: str, hint: str) -> str:
    """Register what a value that does not match `pattern` should be; returns pattern."""
    PATTERN_HINTS[pattern] = hint
    return pattern


def short(value: object, limit: int = 60) -> str:
    """repr() of a user's value for a message, cut to `limit` characters: control
    characters show escaped, and a megabyte of input does not become a megabyte of error."""
    text = repr(value)
    if len(text) <= limit:
        return text
    if isinstance(value, str | bytes):
        size = f" ({len(value)} characters)"
    elif isinstance(value, list | dict):
        size = f" ({len(value)} items)"
    else:
        size = ""
    return text[: limit - 3] + "..." + size


def _parsable_cpuset(value: str) -> str:
    parse_cpuset(value)  # ValueError: backwards range, id above the kernel's limit
    return value


CpuSetStr = Annotated[
    str, Field(pattern=CPUSET_PATTERN, max_length=4096), AfterValidator(_parsable_cpuset)
]
SizeStr = Annotated[str, Field(pattern=SIZE_PATTERN)]  # the pattern bounds its length
BlockSizeStr = Annotated[str, Field(pattern=BLOCK_SIZE_PATTERN)]
# A Kubernetes object or node name (a DNS-1123 subdomain); a node's names Jobs, labels and
# fio job sections.
ObjectName = Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)]
NodeName = ObjectName
# A set of node names, as the API server keeps it (listType set: no duplicates).
NodeNames = Annotated[
    list[NodeName], Field(max_length=1024, json_schema_extra={"x-kubernetes-list-type": "set"})
]
LabelValue = Annotated[str, Field(max_length=63, pattern=LABEL_VALUE_PATTERN)]
PathStr = Annotated[str, Field(min_length=1, max_length=4096, pattern=PATH_PATTERN)]
CephxUser = Annotated[str, Field(min_length=1, max_length=128, pattern=CEPHX_USER_PATTERN)]


def size_bytes(size: str) -> int:
    """Bytes of a validated size field (imageSize, bluestoreSize): "2Gi" -> 2147483648."""
    return int(size[:-2]) * _SIZE_UNITS[size[-2:]]


def block_size_bytes(bs: str) -> int:
    """Bytes of a validated block size, read as fio reads it: "64k" -> 65536."""
    unit = bs[-1].lower()
    scale = {"k": 2**10, "m": 2**20}.get(unit)
    return int(bs[:-1]) * scale if scale else int(bs)


class SpecModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_enum_values=False,
        # Types as the API server checks them: `true` is not an integer, "8" is not a
        # number, 0 is not a boolean. Enum fields opt out (they are strings in YAML).
        strict=True,
        # .inf, .nan and 1e400 (which YAML reads as inf) are no latency limit.
        allow_inf_nan=False,
    )


def _rules_schema(schema: dict[str, Any], cls: type) -> None:
    rules: tuple[Rule, ...] = getattr(cls, "RULES", ())
    if rules:
        schema.update(cel_rules(rules))


class RuledModel(SpecModel):
    """A spec model with cross-field RULES, declared once and enforced twice: as CEL in the
    CRD, so the API server refuses a bad object at `kubectl apply`, and here, so the CLI and
    the planner refuse the same object with the same message (and name every broken rule)."""

    RULES: ClassVar[tuple[Rule, ...]] = ()
    model_config = ConfigDict(json_schema_extra=_rules_schema)

    @model_validator(mode="after")
    def _rules(self) -> Self:
        enforce(type(self).RULES, self)
        return self


def enforce(rules: tuple[Rule, ...], obj: Any) -> Any:
    broken = violations(rules, obj)
    if broken:
        raise rule_error(*[(r.field, r.message) for r in broken])
    return obj


def rule_error(*problems: tuple[str, str]) -> PydanticCustomError:
    # ctx carries every (field inside the model, message) so validate_spec names them all.
    field, message = problems[0]
    return PydanticCustomError("spec_rule", message, {"field": field, "problems": problems})
