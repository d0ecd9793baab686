"""no_pii: no emails, phones, card numbers, IBANs or secrets sent upstream and/or returned."""

from __future__ import annotations

import re
from collections import Counter
from typing import Literal, cast

from pydantic import Field, field_validator

from brownout.core.spans import ExchangeSpan
from brownout.invariants.base import Invariant, InvariantConfigBase, Severity
from brownout.invariants.pii_patterns import (
    CATEGORIES,
    Detector,
    Finding,
    LiteralIndex,
    default_detectors,
    find_all,
    find_each,
)
from brownout.invariants.records import Violation
from brownout.invariants.session import Session
from brownout.invariants.summary import ExchangeSummary

__all__ = ["PARTIAL_EVENT", "NoPii", "NoPiiConfig"]

Category = Literal["email", "phone", "card", "iban", "secret"]
_MAX_LOCATIONS = 20  # per violation, so a huge leak does not make a huge record
PARTIAL_EVENT = "brownout.no_pii.partial"


class NoPiiConfig(InvariantConfigBase):
    """Which kinds to look for, where, extra regexes (name -> regex) and allowlisted values (regexes)."""

    type: Literal["no_pii"]
    severity: Severity = "critical"
    direction: Literal["request", "response", "both"] = "request"
    kinds: list[Category] = Field(default_factory=lambda: cast(list[Category], list(CATEGORIES)))
    extra_patterns: dict[str, str] = Field(default_factory=dict)
    allowlist: list[str] = Field(default_factory=list)

    @field_validator("extra_patterns")
    @classmethod
    def _compile_extra(cls, value: dict[str, str]) -> dict[str, str]:
        for name, rx in value.items():
            _compile(rx, f"extra_patterns.{name}")
        return value

    @field_validator("allowlist")
    @classmethod
    def _compile_allow(cls, value: list[str]) -> list[str]:
        for i, rx in enumerate(value):
            _compile(rx, f"allowlist[{i}]")
        return value


def _compile(rx: str, where: str) -> re.Pattern[str]:
    try:
        return re.compile(rx)
    except re.error as exc:
        raise ValueError(f"{where}: invalid regex: {exc}") from exc


class NoPii(Invariant[NoPiiConfig]):
    """Reports each kind found with its locations (where, character offset), never the value."""

    type = "no_pii"
    Config = NoPiiConfig

    def __init__(self, config: NoPiiConfig) -> None:
        super().__init__(config)
        self._detectors: list[Detector] = [d for d in default_detectors() if d.category in config.kinds]
        self._detectors += [Detector(n, "custom", re.compile(rx)) for n, rx in config.extra_patterns.items()]
        self._allow = [re.compile(rx) for rx in config.allowlist]
        # A user's pattern may match the quote that joins texts for one scan: those scan text by text.
        self._one_scan = not config.extra_patterns
        self._index = LiteralIndex(self._detectors)

    def check_span(self, span: ExchangeSpan, exchange: ExchangeSummary, session: Session) -> list[Violation]:
        direction = self.config.direction
        found: list[Violation] = []
        if direction in ("request", "both"):
            found += self._report("request", self._request_texts(exchange), session, exchange)
            self._note_partial(span, "request", exchange.request_bytes, exchange.capture_max_bytes)
        if direction in ("response", "both"):
            found += self._report("response", self._response_texts(exchange), session, exchange)
            self._note_partial(span, "response", exchange.response_bytes, exchange.capture_max_bytes)
        return found

    def _note_partial(self, span: ExchangeSpan, direction: str, body_bytes: int, scanned_bytes: int) -> None:
        # Scanning is bounded by what the exchange keeps (proxy.capture_max_bytes): the rest of a
        # larger body went by unchecked, and the span says so rather than passing in silence.
        if body_bytes > scanned_bytes:
            span.add_event(
                PARTIAL_EVENT,
                {
                    "brownout.invariant": self.name,
                    "brownout.no_pii.direction": direction,
                    "brownout.no_pii.scanned_bytes": scanned_bytes,
                    "brownout.no_pii.body_bytes": body_bytes,
                },
            )

    @staticmethod
    def _request_texts(exchange: ExchangeSummary) -> list[tuple[str, str]]:
        if exchange.request_body:
            return [("request body", exchange.request_body)]
        texts = [(f"request messages[{i}]", m.text) for i, m in enumerate(exchange.messages)]
        texts += [(f"request tool_results[{i}]", r.content) for i, r in enumerate(exchange.tool_results)]
        return texts

    @staticmethod
    def _response_texts(exchange: ExchangeSummary) -> list[tuple[str, str]]:
        texts = [("response text", exchange.output_text)]
        texts += [(f"response tool_calls[{i}].arguments", c.arguments) for i, c in enumerate(exchange.requested_calls)]
        return texts

    def _find(self, texts: list[tuple[str, str]]) -> list[tuple[str, Finding]]:
        """Every finding in the texts, text by text, with where it is."""
        texts = [(where, text) for where, text in texts if text]
        if self._one_scan:
            found = find_each([text for _, text in texts], self._detectors, self._allow, self._index)
            return [(texts[i][0], finding) for i, finding in found]
        detectors, allow, index = self._detectors, self._allow, self._index
        return [(where, f) for where, text in texts for f in find_all(text, detectors, allow, index)]

    def _report(
        self, direction: str, texts: list[tuple[str, str]], session: Session, exchange: ExchangeSummary
    ) -> list[Violation]:
        by_kind: dict[str, list[tuple[str, Finding]]] = {}
        for where, finding in self._find(texts):
            by_kind.setdefault(finding.kind, []).append((where, finding))
        found: list[Violation] = []
        for kind, hits in by_kind.items():
            where, first = hits[0]
            places = Counter(w for w, _ in hits)
            more = f" ({len(hits) - 1} more)" if len(hits) > 1 else ""
            locations = [{"where": w, "offset": f.start, "length": f.end - f.start} for w, f in hits[:_MAX_LOCATIONS]]
            found.append(
                self.violation(
                    f"{kind} in {where} at offset {first.start}{more}",
                    session,
                    exchange,
                    details={
                        "kind": kind,
                        "direction": direction,
                        "count": len(hits),
                        "locations": locations,
                        "places": dict(places),
                    },
                )
            )
        return found
