"""Numbers as the experiment reports show them (Markdown, HTML, terminal): one function per kind of value."""

from __future__ import annotations

import decimal
import logging
import math
import re

__all__ = ["SMALLEST_USD", "num", "pct", "usd"]

logger = logging.getLogger(__name__)

SMALLEST_USD = decimal.Decimal("0.0001")  # below this a cost shows as "<$0.0001", not as a rounded zero
_NONZERO = re.compile("[1-9]|inf")
_DIGITS = 3  # significant digits of a sub-dollar amount: one LLM call costs fractions of a cent


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def num(x: float | None, fmt: str = ".2f") -> str:
    """`x` formatted, `n/a` for None; a value that rounds to zero never keeps a minus sign (`-0.0`)."""
    if x is None:
        return "n/a"
    text = format(x, fmt)
    return format(0.0, fmt) if text.startswith("-") and not _NONZERO.search(text) else text


def _magnitude(amount: decimal.Decimal) -> str:
    """A positive amount of at least SMALLEST_USD: cents from a dollar up, else 3 significant digits."""
    rounded = amount.quantize(decimal.Decimal(1).scaleb(amount.adjusted() - _DIGITS + 1), decimal.ROUND_HALF_EVEN)
    if rounded >= 1:
        return f"${amount:,.2f}"
    text = format(rounded, "f").rstrip("0")
    whole, _, cents = text.partition(".")
    return f"${whole}.{cents.ljust(2, '0')}"


def usd(x: float | None, sign: str = "") -> str:
    """US dollars for a report cell: `n/a` when nothing was priced, `<$0.0001` for a tiny non-zero amount.

    `sign="+"` marks positive amounts (a difference); a negative amount always gets `-`, and zero
    (negative zero included) never gets a sign.
    """
    if x is None or not math.isfinite(x):
        return "n/a"
    if x == 0:
        return "$0"
    amount = abs(decimal.Decimal(x))
    prefix = "-" if x < 0 else sign
    if amount < SMALLEST_USD:
        return f"{prefix}<${SMALLEST_USD}"
    return prefix + _magnitude(amount)
