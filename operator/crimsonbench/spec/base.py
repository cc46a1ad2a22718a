"""The spec's building blocks: the frozen camelCase base model, rule enforcement, and the
string types (CPU lists, sizes, node names) with their parsers."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from crimsonbench.spec.cpuset import CPUSET_PATTERN, parse_cpuset
from crimsonbench.spec.rules import Rule, cel_rules, violations

SIZE_PATTERN = r"^[1-9][0-9]*(Mi|Gi|Ti)$"
BLOCK_SIZE_PATTERN = r"^[1-9][0-9]*[kKmM]?$"
_SIZE_UNITS = {"Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def _parsable_cpuset(value: str) -> str:
    parse_cpuset(value)  # ValueError: backwards range, id above the kernel's limit
    return value


CpuSetStr = Annotated[
    str, Field(pattern=CPUSET_PATTERN, max_length=4096), AfterValidator(_parsable_cpuset)
]
SizeStr = Annotated[str, Field(pattern=SIZE_PATTERN)]
BlockSizeStr = Annotated[str, Field(pattern=BLOCK_SIZE_PATTERN)]


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


NodeName = Annotated[str, Field(min_length=1, max_length=253)]
