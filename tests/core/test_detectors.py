"""core/detectors.py: the shortcuts that keep scans cheap find exactly what a full scan finds."""

from __future__ import annotations

import re
import string

from hypothesis import given, settings
from hypothesis import strategies as st

from brownout.core.detectors import JOIN, Detector, LiteralIndex, find_all, find_each
from brownout.core.secrets import KEY_FORMATS, key_detectors
from brownout.invariants.pii_patterns import _NUMERIC, default_detectors, may_hold_iban, numeric_regions


def test_a_detector_with_literals_runs_only_on_texts_holding_one() -> None:
    digits = Detector("ticket", "custom", re.compile(r"\d{3}"), literals=("TKT-", "tkt-"))
    assert list(find_all("call 123 now", [digits])) == []  # the regex would match; no literal, no scan
    assert [(f.start, f.end) for f in find_all("TKT-123", [digits])] == [(4, 7)]
    assert [(f.start, f.end) for f in find_all("tkt-456", [digits])] == [(4, 7)]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_every_key_format_match_holds_one_of_its_literals(data: st.DataObject) -> None:
    # The literal test skips a format's regex on texts without them: a match without one would be missed.
    for fmt in KEY_FORMATS:
        sample = data.draw(st.from_regex(fmt.regex, fullmatch=True), label=fmt.kind)
        assert any(literal in sample for literal in fmt.literals), (fmt.kind, sample)


# What the detectors look for, and near misses, for texts that hold some.
FRAGMENTS = [
    "sk-proj-abcdefghijklmnopqrstuvwxyz0123",
    "sk_live_abcdefghijklmnopqrstuvwx",
    "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
    "bot12345678:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDs",
    "AKIAIOSFODNN7EXAMPLE",
    "4111 1111 1111 1111",
    "4111-1111-1111-1112",
    "GB82 WEST 1234 5698 7654 32",
    "DE89370400440532013000",
    "ada@example.org",
    "+1 (415) 555-0100",
    "415.555.0100",
    "2024-01-31 12:00",
    "(0)",
    "\u0663\u0664\u0665\u0666\u0667\u0668\u0669\u0660\u0661",
]
TEXTS = st.lists(
    st.sampled_from(FRAGMENTS) | st.text(alphabet=string.printable + "\u00e9\u0663", max_size=40), max_size=8
)
OLD_IBAN = re.compile(r"[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}")


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_skipping_and_ascii_shortcuts_find_what_the_full_scan_finds(parts: list[str]) -> None:
    text = " ".join(parts)
    full = [
        Detector(d.kind, d.category, OLD_IBAN if d.kind == "iban" else d.pattern, d.valid, d.left, d.shrink, d.within)
        for d in default_detectors()
    ]  # no literals, the IBAN regex as first written
    assert list(find_all(text, default_detectors())) == list(find_all(text, full))
    assert numeric_regions(text) == [m.span() for m in _NUMERIC.finditer(text) if _digits(m.group()) >= 9]


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXTS.map(" ".join) | st.sampled_from(FRAGMENTS) | st.just(""), max_size=6))
def test_one_scan_of_joined_texts_finds_what_a_scan_of_each_finds(texts: list[str]) -> None:
    each = [(i, f) for i, text in enumerate(texts) for f in find_all(text, default_detectors())]
    assert find_each(texts, default_detectors()) == each


@settings(max_examples=300, deadline=None)
@given(TEXTS.map(" ".join) | st.sampled_from([lit for f in KEY_FORMATS for lit in f.literals]))
def test_the_literal_index_sees_exactly_the_literals_a_test_of_each_sees(text: str) -> None:
    detectors = default_detectors()
    index = LiteralIndex(detectors)
    assert index.held(text) == {i for i, d in enumerate(detectors) if any(lit in text for lit in d.literals)}
    assert list(find_all(text, detectors, index=index)) == list(find_all(text, detectors))
    kinds = [d.kind for d in detectors]  # overlapping matches: "sk-" inside "sk-ant-" counts too
    assert {kinds[i] for i in index.held("sk-ant-x")} == {"anthropic_key", "openai_key"}


def test_a_value_split_across_two_texts_is_in_neither() -> None:
    texts = ["card 4111 1111", "1111 1111 ok", "mail ada@", "example.org", "sk-proj-abcdefghij", "klmnopqrstuvwxyz0123"]
    assert find_each(texts, default_detectors()) == []
    assert [(i, f.kind, f.start) for i, f in find_each(["x", "to ada@example.org"], default_detectors())] == [
        (1, "email", 3)
    ]


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_no_built_in_pattern_matches_the_joining_quote(data: st.DataObject) -> None:
    # find_each relies on it: a match holding JOIN could run from one message into the next.
    for detector in default_detectors():
        sample = data.draw(st.from_regex(detector.pattern, fullmatch=True), label=detector.kind)
        assert JOIN not in sample, (detector.kind, sample)


@settings(max_examples=300, deadline=None)
@given(TEXTS.map(" ".join))
def test_the_iban_gate_is_false_only_where_the_regex_finds_nothing(text: str) -> None:
    if OLD_IBAN.search(text):
        assert may_hold_iban(text)
    assert may_hold_iban("pay DE89370400440532013000") and not may_hold_iban("pay de89 3704 or D E89")
    assert may_hold_iban("caf\u00e9 no iban")  # text that is not ASCII is always scanned


def _digits(run: str) -> int:
    return sum(c.isdigit() for c in run)


def test_numeric_regions_keep_non_ascii_digits() -> None:
    # Arabic-Indic digits are \d to the Unicode scan: a text holding any takes that path, not the ASCII one.
    text = "call ٠١٢٣٤٥٦٧٨٩ or 415 555 0100"
    assert [text[s:e] for s, e in numeric_regions(text)] == ["٠١٢٣٤٥٦٧٨٩ ", "415 555 0100"]


def test_key_detectors_carry_their_formats_literals() -> None:
    assert [d.literals for d in key_detectors()] == [f.literals for f in KEY_FORMATS]
