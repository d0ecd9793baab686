"""PII and secret detectors for no_pii: regexes plus checksums (Luhn, IBAN mod-97)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

__all__ = ["CATEGORIES", "Detector", "Finding", "default_detectors", "find_all", "iban_valid", "luhn_valid"]


@dataclass(frozen=True, slots=True)
class Detector:
    """One kind of sensitive value: a regex and an optional validity check on the match."""

    kind: str
    category: str  # email | phone | card | iban | secret | custom
    pattern: re.Pattern[str]
    valid: Callable[[str], bool] | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    """Where a sensitive value was found; the value itself is never kept."""

    kind: str
    start: int
    end: int


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


def _phone_valid(text: str) -> bool:
    return 8 <= sum(c.isdigit() for c in text) <= 15


_SECRETS = (
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}"),
    ("openai_key", r"\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    ("aws_access_key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    ("slack_token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    ("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}"),
    ("private_key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"),
)
CATEGORIES = ("secret", "card", "iban", "email", "phone")


def default_detectors() -> list[Detector]:
    """Built-in detectors, most specific first (overlapping later matches are dropped)."""
    detectors = [Detector(kind, "secret", re.compile(rx)) for kind, rx in _SECRETS]
    detectors += [
        # Card IINs start with 2-6; this skips 13-digit millisecond timestamps (they start with 1).
        Detector("card", "card", re.compile(r"(?<![\d\-])[2-6](?:[ \-]?\d){12,18}(?![\d\-])"), luhn_valid),
        Detector("iban", "iban", re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b"), iban_valid),
        Detector(
            "email", "email", re.compile(r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}\b")
        ),
        Detector(
            "phone",
            "phone",
            re.compile(
                r"(?<![\w+])(?:\+\d{1,3}[ .\-]?(?:\(\d{1,4}\)[ .\-]?)?\d{1,4}(?:[ .\-]?\d{2,4}){1,4}"
                r"|\(\d{3}\)[ .\-]?\d{3}[ .\-]\d{4}|\b\d{3}[.\-]\d{3}[.\-]\d{4})(?![\w])"
            ),
            _phone_valid,
        ),
    ]
    return detectors


def find_all(
    text: str, detectors: Iterable[Detector], allowlist: Iterable[re.Pattern[str]] = ()
) -> Iterator[Finding]:
    """Non-overlapping findings in detector order; allowlisted or checksum-failing matches are skipped."""
    allow = tuple(allowlist)
    taken: list[tuple[int, int]] = []
    for detector in detectors:
        for match in detector.pattern.finditer(text):
            start, end = match.span()
            if start == end or any(start < e and s < end for s, e in taken):
                continue
            value = match.group(0)
            if detector.valid is not None and not detector.valid(value):
                continue
            if any(rx.search(value) for rx in allow):
                continue
            taken.append((start, end))
            yield Finding(detector.kind, start, end)
