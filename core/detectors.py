"""Find sensitive values in text: a regex per kind, an optional check on each match, word boundaries.

Shared by the `no_pii` invariant (which reports what it finds) and `brownout.core.secrets` (which
blanks API keys wherever brownout keeps traffic), so both recognise exactly the same values.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from ahocorasick_rs import AhoCorasick, MatchKind

__all__ = ["JOIN", "Detector", "Finding", "LiteralIndex", "find_all", "find_each", "word_bounded"]

_LOCAL_MAX = 64  # the longest email local part `left` may extend over
# No built-in pattern matches a double quote (their classes are key alphabets, digits and
# separators; a private-key block stops at one), so texts joined by it scan as one.
JOIN = '"'


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
    # One of these is in every match: a text holding none is skipped without running the regex.
    # A substring test runs in C at memchr speed; a pattern that cannot start at a literal (a token
    # after a run of digits) would otherwise try at every position of every body.
    literals: tuple[str, ...] = ()
    # False only for a text that cannot hold a match, and cheaper to ask than the regex's scan.
    gate: Callable[[str], bool] | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    """Where a sensitive value was found; the value itself is never kept."""

    kind: str
    start: int
    end: int


class LiteralIndex:
    """Which of a list of detectors have one of their literals in a text, from one pass over it.

    An Aho-Corasick automaton of every literal: a body is read once, where testing each literal with
    `in` reads it once per literal (22 passes over each request body for the built-in detectors).
    Overlapping matches count, so a literal inside another ("sk-" in "sk-ant-") is seen too."""

    def __init__(self, detectors: Sequence[Detector]) -> None:
        owners = [(literal, i) for i, d in enumerate(detectors) for literal in d.literals]
        self._owner = [i for _, i in owners]
        self._automaton = (
            AhoCorasick([literal for literal, _ in owners], matchkind=MatchKind.Standard) if owners else None
        )

    def held(self, text: str) -> set[int]:
        """The indexes of the detectors with a literal in `text`."""
        if self._automaton is None:
            return set()
        owner = self._owner
        return {owner[m[0]] for m in self._automaton.find_matches_as_indexes(text, overlapping=True)}


def find_all(
    text: str,
    detectors: Iterable[Detector],
    allowlist: Iterable[re.Pattern[str]] = (),
    index: LiteralIndex | None = None,
) -> Iterator[Finding]:
    """Non-overlapping findings in detector order; allowlisted or checksum-failing matches are skipped.
    `index`, built for exactly these detectors, tests their literals in one pass."""
    allow = tuple(allowlist)
    taken: list[tuple[int, int]] = []
    regions: dict[object, list[tuple[int, int]]] = {}
    held = index.held(text) if index is not None else None
    for i, detector in enumerate(detectors):
        if detector.literals and not (i in held if held is not None else _holds_any(text, detector.literals)):
            continue
        if detector.gate is not None and not detector.gate(text):
            continue
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


def find_each(
    texts: Sequence[str],
    detectors: Sequence[Detector],
    allowlist: Iterable[re.Pattern[str]] = (),
    index: LiteralIndex | None = None,
) -> list[tuple[int, Finding]]:
    """`find_all` of each text, as (text index, finding with offsets into that text), in the same order,
    from one scan of the texts joined by JOIN: the per-scan cost (a literal test and a regex call per
    detector) is paid once, not once per message. Only for detectors whose patterns never match JOIN:
    no match, word boundary or email local part then crosses from one text into the next."""
    if len(texts) == 1:
        return [(0, finding) for finding in find_all(texts[0], detectors, allowlist, index)]
    starts: list[int] = []
    at = 0
    for text in texts:
        starts.append(at)
        at += len(text) + len(JOIN)
    found: list[tuple[int, Finding]] = []
    for finding in find_all(JOIN.join(texts), detectors, allowlist, index):
        i = bisect_right(starts, finding.start) - 1
        found.append((i, Finding(finding.kind, finding.start - starts[i], finding.end - starts[i])))
    found.sort(key=lambda hit: hit[0])  # stable: text by text, and within one in find_all's order
    return found


def _holds_any(text: str, literals: tuple[str, ...]) -> bool:
    for literal in literals:  # noqa: SIM110 - a loop of `in` beats any() over a generator
        if literal in text:
            return True
    return False


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
        if end > start and word_bounded(text, start, end) and (detector.valid is None or detector.valid(value)):
            return -1 if any(rx.search(value) for rx in allow) else end
        cut = max(value.rfind(" "), value.rfind("-"))
        if cut <= 0:
            break
        end = start + cut
    return -1


def word_bounded(text: str, start: int, end: int) -> bool:
    """\\b semantics at both ends of text[start:end] (the patterns have none, so the engine can skip ahead)."""
    if _word(text[start]) and start and _word(text[start - 1]):
        return False
    return not (_word(text[end - 1]) and end < len(text) and _word(text[end]))


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"
