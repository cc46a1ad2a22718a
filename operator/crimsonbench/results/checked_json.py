"""Reading the JSON files of a results directory as untrusted input: strict JSON only (no
NaN/Infinity, no number that overflows a float, bounded nesting), and typed accessors whose
errors name the field (`fio.iops: 'abc' is not a number`). A file a run or `fetch` wrote
always passes; anything else is refused with a reason, never half-read."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any


class ResultFormatError(ValueError):
    """A value in a result file is not what crimsonbench writes (the message names it)."""


def _parse_constant(name: str) -> Any:
    raise ResultFormatError(f"{name} is not a number JSON allows (crimsonbench writes null)")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ResultFormatError(f"the number {text[:40]} does not fit a float")
    return value


def loads(data: bytes) -> Any:
    """Strict JSON from bytes (UTF-8): raises ResultFormatError with the reason."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResultFormatError(f"not UTF-8 text (byte {exc.start})") from None
    try:
        return json.loads(text, parse_constant=_parse_constant, parse_float=_parse_float)
    except ResultFormatError:
        raise
    except RecursionError:
        raise ResultFormatError("JSON nested too deeply to be a crimsonbench file") from None
    except json.JSONDecodeError as exc:
        raise ResultFormatError(
            f"not valid JSON ({exc.msg}: line {exc.lineno} column {exc.colno})"
        ) from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise ResultFormatError(f"not usable JSON ({exc})") from None


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def obj(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ResultFormatError(f"{where} is {_kind(value)}, not an object")
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, str):
        return f"a string ({_show(value)})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return _show(value)


def required(d: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in d:
        raise ResultFormatError(f"{where}{key} is missing")
    return d[key]


def number(
    value: Any, where: str, *, nullable: bool = False, minimum: float | None = None
) -> float:
    """A finite float (JSON int or float); null -> NaN when nullable."""
    if value is None and nullable:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ResultFormatError(f"{where} is {_kind(value)}, not a number")
    try:
        out = float(value)
    except OverflowError:
        out = math.inf
    if not math.isfinite(out):
        raise ResultFormatError(f"{where} is {_show(value)}, not a finite number")
    if minimum is not None and out < minimum:
        raise ResultFormatError(f"{where} is {_show(value)}, below {minimum:g}")
    return out


def integer(value: Any, where: str, *, minimum: int | None = None, maximum: int = 2**63 - 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ResultFormatError(f"{where} is {_kind(value)}, not an integer")
    if minimum is not None and value < minimum:
        raise ResultFormatError(f"{where} is {value}, below {minimum}")
    if value > maximum:
        raise ResultFormatError(f"{where} is {_show(value)}, above {maximum}")
    return value


def boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ResultFormatError(f"{where} is {_kind(value)}, not true or false")
    return value


def _control(c: str) -> bool:
    return ord(c) < 32 or ord(c) == 127


def one_line(value: str) -> str:
    """value as text() will read it back: each control character (a tab in a log line, a
    newline in another user's process name) written as "?"."""
    return "".join("?" if _control(c) else c for c in value)


def text(value: Any, where: str, *, max_len: int = 256) -> str:
    """A string of at most max_len characters without control characters (a newline in a
    label would break every markdown table it lands in)."""
    if not isinstance(value, str):
        raise ResultFormatError(f"{where} is {_kind(value)}, not a string")
    if len(value) > max_len:
        raise ResultFormatError(f"{where} is {len(value)} characters long, more than {max_len}")
    if any(_control(c) for c in value):
        raise ResultFormatError(f"{where} is {_show(value)}: control characters are not allowed")
    return value
