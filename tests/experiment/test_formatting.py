"""Costs in the reports: never a signed zero, `<$0.0001` for tiny amounts, `n/a` when unpriced, 3 significant digits."""

from __future__ import annotations

import math
import re
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brownout.proxy.experiment.formatting import num, usd

SHAPE = re.compile(r"^(?P<sign>[+-]?)(?P<lt><?)\$(?P<digits>[0-9,]+(\.[0-9]+)?)$")
amounts = st.floats(allow_nan=True, allow_infinity=True) | st.floats(min_value=-2, max_value=2)
tiny = st.floats(min_value=0, max_value=1e-4, exclude_min=True, exclude_max=True)


@pytest.mark.parametrize(
    "x,plain,signed",
    [
        (None, "n/a", "n/a"),
        (math.nan, "n/a", "n/a"),
        (0.0, "$0", "$0"),
        (-0.0, "$0", "$0"),
        (3e-7, "<$0.0001", "+<$0.0001"),
        (-3e-7, "-<$0.0001", "-<$0.0001"),
        (1e-4, "$0.0001", "+$0.0001"),
        (1.2345e-4, "$0.000123", "+$0.000123"),
        (-6e-4, "-$0.0006", "-$0.0006"),
        (2e-3, "$0.002", "+$0.002"),
        (0.0123456, "$0.0123", "+$0.0123"),
        (0.5, "$0.50", "+$0.50"),
        (0.9996, "$1.00", "+$1.00"),
        (12.3456, "$12.35", "+$12.35"),
        (1234.5, "$1,234.50", "+$1,234.50"),
    ],
)
def test_examples(x: float | None, plain: str, signed: str) -> None:
    assert usd(x) == plain and usd(x, "+") == signed


@given(amounts, st.sampled_from(["", "+"]))
def test_never_a_signed_or_rounded_zero(x: float, sign: str) -> None:
    text = usd(x, sign)
    if text in ("n/a", "$0"):
        assert x != x or math.isinf(x) or x == 0
        return
    m = SHAPE.match(text)
    assert m, text
    assert Decimal(m["digits"].replace(",", "")) > 0, text  # what is shown as a number is never zero
    assert m["sign"] == ("-" if x < 0 else sign), text


@given(tiny, st.booleans())
def test_tiny_amounts(x: float, negative: bool) -> None:
    assert usd(-x if negative else x) == ("-<$0.0001" if negative else "<$0.0001")


@given(st.floats(min_value=1e-4, max_value=1e9), st.booleans())
def test_three_significant_digits_below_a_dollar_cents_above(x: float, negative: bool) -> None:
    text = usd(-x if negative else x)
    m = SHAPE.match(text)
    assert m and not m["lt"] and (m["sign"] == "-") == negative, text
    shown = Decimal(m["digits"].replace(",", ""))
    if shown < 1:
        significant = m["digits"].split(".")[1].lstrip("0")
        assert len(significant) <= 3, text
        assert abs(float(shown) - x) <= x * 5e-3, text  # rounded, not truncated or padded
    else:
        assert re.fullmatch(r"\d{1,3}(,\d{3})*\.\d\d", m["digits"]), text
        assert abs(float(shown) - x) <= 0.005 + x * 1e-15, text


@given(st.floats(allow_nan=False), st.sampled_from([".2f", "+.1f", "+.0f", ".0f", ".3f", ".3g", "g"]))
def test_other_numbers_never_show_a_negative_zero(x: float, fmt: str) -> None:
    text = num(x, fmt)
    assert not (text.startswith("-") and not re.search("[1-9]|inf", text)), (x, fmt, text)
    assert float(text) == pytest.approx(float(format(x, fmt)), abs=0)  # the same number otherwise


def test_num_examples() -> None:
    assert (num(None), num(-0.3, "+.0f"), num(-0.0), num(-0.04, ".1f"), num(-1.5, "+.1f")) == (
        "n/a",
        "+0",
        "0.00",
        "0.0",
        "-1.5",
    )
