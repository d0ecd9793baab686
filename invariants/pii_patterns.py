"""PII and secret detectors for no_pii: regexes plus checksums (Luhn, IBAN mod-97).

API keys of known formats come from `brownout.core.secrets`, which blanks the same values wherever
brownout keeps traffic; the matching machinery (`find_all`) lives in `brownout.core.detectors`.
"""

from __future__ import annotations

import re

from brownout.core.detectors import Detector, Finding, LiteralIndex, find_all, find_each
from brownout.core.secrets import key_detectors

__all__ = [
    "CATEGORIES",
    "Detector",
    "Finding",
    "LiteralIndex",
    "default_detectors",
    "find_all",
    "find_each",
    "iban_valid",
    "luhn_valid",
    "may_hold_iban",
    "numeric_regions",
]

_EMAIL_LOCAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+-")
_NUMERIC = re.compile(r"[+(\d][\d ().\-]{8,}")
# The same language on ASCII text, where \d is exactly [0-9]: a plain character set the engine tests
# from a bitmap, where \d costs a Unicode lookup per character (more than twice the scan time).
_NUMERIC_ASCII = re.compile(r"[+(0-9][0-9 ().\-]{8,}")
_MIN_DIGITS = 9  # the fewest digits of a phone number (cards have 13+); dates have 8


def luhn_valid(text: str) -> bool:
    """Card numbers: 13-19 digits passing the Luhn checksum."""
    digits = [int(c) for c in text if c.isdigit()]
    if not 13 <= len(digits) <= 19 or len(set(digits)) == 1:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban_valid(text: str) -> bool:
    """IBAN: 15-34 characters, mod-97 of the rearranged number equals 1."""
    iban = "".join(text.split()).upper()
    if not 15 <= len(iban) <= 34:
        return False
    rearranged = iban[4:] + iban[:4]
    try:
        return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1
    except ValueError:
        return False


# Upper-case letters to "A", digits to "0": an IBAN starts where the mapped text reads "AA00".
_LETTER_DIGIT = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", b"A" * 26 + b"0" * 10)


def may_hold_iban(text: str) -> bool:
    """False when no IBAN can start in `text` (ASCII only; other text is always scanned): one pass in C
    over the bytes, where the IBAN regex tries a match at every capital letter."""
    return not text.isascii() or b"AA00" in text.encode("ascii").translate(_LETTER_DIGIT)


def _phone_valid(text: str) -> bool:
    return _MIN_DIGITS <= sum(c.isdigit() for c in text) <= 15


def numeric_regions(text: str) -> list[tuple[int, int]]:
    """Runs of digits and phone/card separators holding enough digits to be a phone or card."""
    numeric = _NUMERIC_ASCII if text.isascii() else _NUMERIC
    return [m.span() for m in numeric.finditer(text) if _digits(m.group()) >= _MIN_DIGITS]


def _digits(run: str) -> int:
    # str.count runs in C; a per-character generator dominated no_pii's cost on long bodies.
    return len(run) - sum(run.count(sep) for sep in " ().-+")


CATEGORIES = ("secret", "card", "iban", "email", "phone")


def default_detectors() -> list[Detector]:
    """Built-in detectors, most specific first (overlapping later matches are dropped)."""
    detectors = list(key_detectors())
    detectors += [
        # Card IINs start with 2-6; this skips 13-digit millisecond timestamps (they start with 1).
        Detector(
            "card", "card", re.compile(r"[2-6](?:[ \-]?\d){12,18}"), luhn_valid, shrink=True, within=numeric_regions
        ),
        # [A-Z][A-Z]\d\d, not [A-Z]{2}\d{2}: the same language, and the engine scans it in half the time.
        Detector(
            "iban",
            "iban",
            re.compile(r"[A-Z][A-Z]\d\d(?: ?[A-Z0-9]){11,30}"),
            iban_valid,
            shrink=True,
            gate=may_hold_iban,
        ),
        Detector(
            "email", "email", re.compile(r"@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}"), left=_EMAIL_LOCAL
        ),
        Detector(
            "phone",
            "phone",
            re.compile(
                r"\+\d{1,3}[ .\-]?(?:\(\d{1,4}\)[ .\-]?)?\d{1,4}(?:[ .\-]?\d{2,4}){1,4}"
                r"|\(\d{3}\)[ .\-]?\d{3}[ .\-]\d{4}|\d{3}[.\-]\d{3}[.\-]\d{4}"
            ),
            _phone_valid,
            within=numeric_regions,
        ),
    ]
    return detectors
