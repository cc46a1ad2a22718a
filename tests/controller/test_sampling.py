"""Quantities as metrics-server reports them (CPU in nanocores, memory in Ki)."""

from __future__ import annotations

import pytest

from crimsonbench.controller.decisions.observed import quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("250m", 0.25),
        ("1234567n", 0.001234567),
        ("2", 2.0),
        ("1500u", 0.0015),
        ("131072Ki", 128 * 2**20),
        ("3Gi", 3 * 2**30),
        ("1.5", 1.5),
    ],
)
def test_quantity(text: str, value: float) -> None:
    assert quantity(text) == pytest.approx(value)


@pytest.mark.parametrize("bad", ["", "12Q", "m", "1e3"])
def test_bad_quantity_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="quantity"):
        quantity(bad)
