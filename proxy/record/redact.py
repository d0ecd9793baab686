"""Redact recorded cassettes after the fact: headers, query parameters, and values in bodies and URLs.

Recording already leaves out credentials (`brownout.core.secrets` decides what they are): secret
headers, secrets in the URL's path and query, and in request and response bodies API keys of known
formats and the values of credential fields (`scrub`; replay blanks live requests the same way
before matching, so they still match). `brownout cassette redact` is for what only the user knows
is sensitive (an internal host, a customer's email, a token in a body), found with the user's patterns
and the `no_pii` invariant's detectors. A request body redacted that way no longer matches the live
request that carried the value: replay then misses it, by design.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from brownout.core.secret_paths import redact_url
from brownout.core.secrets import MARK, blank, is_secret_header, redact_text
from brownout.invariants.pii_patterns import Detector, default_detectors
from brownout.proxy.record.cassette import Recorded, open_cassette
from brownout.proxy.record.files import open_to_write

__all__ = ["Redaction", "redact_file", "scrub", "without_secrets"]


def without_secrets(body: bytes) -> bytes:
    """A body as recorded and as matched on replay: API keys of known formats and the string values
    of credential fields of a JSON body (`api_key`, `password`, ...) become REDACTED (`redact_text`).
    The same bytes when there are none; not UTF-8, the same bytes too."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return body
    out = redact_text(text)
    return body if out is text else out.encode("utf-8")


def scrub(rec: Recorded) -> None:
    """Blank the secrets of both bodies of an exchange about to be written (headers and URL are already
    without them). A body kept as sent under a content-encoding is left as it is: its bytes are not text."""
    if not _encoded(rec.request_headers):
        rec.request_body = without_secrets(rec.request_body)
    if _encoded(rec.response_headers):
        return
    if rec.body is not None:
        rec.body = without_secrets(rec.body)
    for event in rec.events or ():
        event.data = without_secrets(event.data)
    for message in rec.messages or ():  # a WebSocket session: both ways
        message.data = without_secrets(message.data)


def _encoded(headers: Iterable[tuple[str, str]]) -> bool:
    return any(k.lower() == "content-encoding" and v.strip().lower() not in ("", "identity") for k, v in headers)


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
        value, found = blank(value, self._detectors)
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
            if k.lower() in self.headers or is_secret_header(k):  # a cassette older than today's list
                self.count += 1
                continue
            out.append((k, self.text(v)))
        return out

    def url(self, url: str) -> str:
        kept = redact_url(url)  # secrets in path and query as recording blanks them now (older cassettes)
        self.count += kept != url
        url = kept
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
        for message in rec.messages or []:
            message.data = self.data(message.data)


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
