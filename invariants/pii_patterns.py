"""PII and secret detectors for no_pii: regexes plus checksums (Luhn, IBAN mod-97)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

__all__ = [
    "CATEGORIES",
    "Detector",
    "Finding",
    "default_detectors",
    "find_all",
    "iban_valid",
    "luhn_valid",
    "numeric_regions",
]

_EMAIL_LOCAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+-")
_LOCAL_MAX = 64
_NUMERIC = re.compile(r"[+(\d][\d ().\-]{8,}")
_MIN_DIGITS = 9  # the fewest digits of a phone number (cards have 13+); dates have 8


@dataclass(frozen=True, slots=True)
class Detector:
    """One kind of sensitive value: a regex and an optional validity check on the match.

    Patterns start with a literal or a character class (no leading \\b or lookbehind), so
    the regex engine can skip ahead to candidate positions; word boundaries are checked in
    find_all instead. `left` extends a match leftwards over these characters (email local parts,
    so the scan can start at the literal "@").
    """

    kind: str
    category: str  # email | phone | card | iban | secret | custom
    pattern: re.Pattern[str]
    valid: Callable[[str], bool] | None = None
    left: frozenset[str] = frozenset()
    # Retry without the last space/dash-separated group when checks fail: without a trailing
    # \\b the greedy match may have swallowed a following word or number ("... 32 AND").
    shrink: bool = False
    # Run `pattern` only inside matches of this cheaper regex (shared, so computed once per text):
    # scanning every digit of a long body with the card and phone patterns is the slow part.
    within: Callable[[str], list[tuple[int, int]]] | None = None


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
    return _MIN_DIGITS <= sum(c.isdigit() for c in text) <= 15


def numeric_regions(text: str) -> list[tuple[int, int]]:
    """Runs of digits and phone/card separators holding enough digits to be a phone or card."""
    return [m.span() for m in _NUMERIC.finditer(text) if _digits(m.group()) >= _MIN_DIGITS]


def _digits(run: str) -> int:
    # str.count runs in C; a per-character generator dominated no_pii's cost on long bodies.
    return len(run) - sum(run.count(sep) for sep in " ().-+")


_SECRETS = (
    ("anthropic_key", r"sk-ant-[A-Za-z0-9_\-]{20,}"),
    ("openai_key", r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    ("aws_access_key", r"(?:AKIA|ASIA)[0-9A-Z]{16}"),
    ("github_token", r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    ("slack_token", r"xox[abposr]-[A-Za-z0-9\-]{10,}"),
    ("google_api_key", r"AIza[0-9A-Za-z_\-]{35}"),
    ("private_key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"),
)
CATEGORIES = ("secret", "card", "iban", "email", "phone")


def default_detectors() -> list[Detector]:
    """Built-in detectors, most specific first (overlapping later matches are dropped)."""
    detectors = [Detector(kind, "secret", re.compile(rx)) for kind, rx in _SECRETS]
    detectors += [
        # Card IINs start with 2-6; this skips 13-digit millisecond timestamps (they start with 1).
        Detector(
            "card", "card", re.compile(r"[2-6](?:[ \-]?\d){12,18}"), luhn_valid, shrink=True, within=numeric_regions
        ),
        Detector("iban", "iban", re.compile(r"[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}"), iban_valid, shrink=True),
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


def find_all(text: str, detectors: Iterable[Detector], allowlist: Iterable[re.Pattern[str]] = ()) -> Iterator[Finding]:
    """Non-overlapping findings in detector order; allowlisted or checksum-failing matches are skipped."""
    allow = tuple(allowlist)
    taken: list[tuple[int, int]] = []
    regions: dict[object, list[tuple[int, int]]] = {}
    for detector in detectors:
        for match in _matches(detector, text, regions):
            start, end = match.span()
            if detector.left:
                floor = max(0, start - _LOCAL_MAX)
                while start > floor and text[start - 1] in detector.left:
                    start -= 1
                if start == match.start():
                    continue
            end = _accept(detector, text, start, end, allow)
            if end < 0 or any(start < e and s < end for s, e in taken):
                continue
            taken.append((start, end))
            yield Finding(detector.kind, start, end)


def _matches(detector: Detector, text: str, regions: dict[object, list[tuple[int, int]]]) -> Iterator[re.Match[str]]:
    if detector.within is None:
        yield from detector.pattern.finditer(text)
        return
    spans = regions.get(detector.within)
    if spans is None:
        spans = regions[detector.within] = detector.within(text)
    for start, end in spans:
        yield from detector.pattern.finditer(text, start, end)


def _accept(detector: Detector, text: str, start: int, end: int, allow: tuple[re.Pattern[str], ...]) -> int:
    """The end of the accepted match (shrunk if need be), or -1."""
    for _ in range(8 if detector.shrink else 1):
        value = text[start:end]
        if end > start and _bounded(text, start, end) and (detector.valid is None or detector.valid(value)):
            return -1 if any(rx.search(value) for rx in allow) else end
        cut = max(value.rfind(" "), value.rfind("-"))
        if cut <= 0:
            break
        end = start + cut
    return -1


def _bounded(text: str, start: int, end: int) -> bool:
    """\\b semantics at both ends (the patterns have none, so the engine can skip ahead)."""
    if _word(text[start]) and start and _word(text[start - 1]):
        return False
    return not (_word(text[end - 1]) and end < len(text) and _word(text[end]))


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"
