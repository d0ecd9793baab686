"""Redact recorded cassettes after the fact: headers, query parameters, and values in bodies and URLs.

Recording already leaves out credentials: secret headers, secret query values, and in request bodies
API keys of known formats and the values of credential fields (`without_secrets`, which replay applies
to live requests too, so they still match). `brownout cassette redact` is for what only the user knows
is sensitive (an internal host, a customer's email, a token in a body), and for secrets in response
bodies, found with the same detectors as the `no_pii` invariant. A request body redacted that way no
longer matches the live request that carried the value: replay then misses it, by design.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from brownout.core.secrets import SECRET_FIELDS
from brownout.invariants.pii_patterns import Detector, default_detectors, find_all
from brownout.proxy.record.cassette import Recorded, open_cassette
from brownout.proxy.record.files import open_to_write

__all__ = ["Redaction", "redact_file", "without_secrets"]

MARK = "REDACTED"
_KEYS = [d for d in default_detectors() if d.category == "secret"]
_FIELD_HINTS = tuple(f'"{name}"'.encode() for name in SECRET_FIELDS)


def without_secrets(body: bytes) -> bytes:
    """A request body as recorded and as matched on replay: API keys of known formats (the `no_pii`
    detectors) and the string values of credential fields of a JSON body (`api_key`, `password`, ...)
    become REDACTED. The same bytes when there are none; not UTF-8, the same bytes too."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return body
    lowered = body.lower()
    changed = False
    if any(hint in lowered for hint in _FIELD_HINTS):
        try:
            doc = json.loads(text)
            if _blank_fields(doc):
                text, changed = json.dumps(doc, ensure_ascii=False, separators=(",", ":")), True
        except (ValueError, RecursionError):  # not JSON, or nested too deep to walk: the patterns still apply
            pass
    text, found = _blank(text, _KEYS)
    return text.encode("utf-8") if changed or found else body


def _blank(text: str, detectors: list[Detector]) -> tuple[str, int]:
    """`text` with what the detectors find replaced by REDACTED, and how many they found."""
    findings = sorted(find_all(text, detectors), key=lambda f: f.start, reverse=True)
    for f in findings:
        text = text[: f.start] + MARK + text[f.end :]
    return text, len(findings)


def _blank_fields(node: object) -> bool:
    """Blank credential fields' string values in place, at any depth; whether any was."""
    found = False
    if isinstance(node, dict):
        for k, v in node.items():
            if isinstance(k, str) and k.lower() in SECRET_FIELDS and isinstance(v, str) and v != MARK:
                node[k] = MARK
                found = True
            else:
                found = _blank_fields(v) or found
    elif isinstance(node, list):
        for item in node:
            found = _blank_fields(item) or found
    return found


@dataclass(slots=True)
class Redaction:
    """What to remove, and how many values were removed."""

    headers: frozenset[str] = frozenset()
    params: frozenset[str] = frozenset()
    patterns: list[re.Pattern[str]] = field(default_factory=list)
    kinds: frozenset[str] = frozenset({"secret"})  # no_pii categories found in text: secret, email, phone, ...
    count: int = 0
    _detectors: list[Detector] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.headers = frozenset(h.lower() for h in self.headers)
        self._detectors = [d for d in default_detectors() if d.category in self.kinds]

    def text(self, value: str) -> str:
        for rx in self.patterns:
            value, n = rx.subn(MARK, value)
            self.count += n
        value, found = _blank(value, self._detectors)
        self.count += found
        return value

    def data(self, value: bytes) -> bytes:
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            return value  # binary bodies are left alone
        return self.text(text).encode("utf-8")

    def header_list(self, headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        out = []
        for k, v in headers:
            if k.lower() in self.headers:
                self.count += 1
                continue
            out.append((k, self.text(v)))
        return out

    def url(self, url: str) -> str:
        for name in self.params:
            url, n = re.subn(rf"(?<=[?&]){re.escape(name)}=[^&#]*", f"{name}={MARK}", url)
            self.count += n
        return self.text(url)

    def apply(self, rec: Recorded) -> None:
        rec.url = self.url(rec.url)
        rec.request_headers = self.header_list(rec.request_headers)
        rec.request_body = self.data(rec.request_body)
        rec.response_headers = self.header_list(rec.response_headers)
        if rec.body is not None:
            rec.body = self.data(rec.body)
        for event in rec.events or []:
            event.data = self.data(event.data)


def redact_file(path: Path, redaction: Redaction) -> int:
    """Redact one cassette in place (written to a temporary file, then renamed); returns values removed.

    Read and written an exchange at a time, whatever the file's size."""
    cassette = open_cassette(path)
    before = redaction.count
    with path.open(encoding="utf-8") as f:
        head = f.readline()
    tmp = path.with_name(path.name + ".tmp")
    with open_to_write(tmp, append=False) as out:  # a link planted under that name is refused, not followed
        out.write(head if head.endswith("\n") else head + "\n")
        for rec in cassette.exchanges():
            redaction.apply(rec)
            out.write(json.dumps(rec.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n")
    os.replace(tmp, path)
    return redaction.count - before
