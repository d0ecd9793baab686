"""The cassette format: one JSON Lines file per session, a header line, then one exchange per line.

    {"format": "brownout-cassette", "version": 1, "session": "...", "created": "...", "brownout": "..."}
    {"seq": 1, "session": "...", "provider": "openai", ..., "request": {...}, "response": {...}}

Bodies are kept byte for byte: `{"text": ...}` when they are UTF-8, else `{"b64": ...}`. A streamed
response keeps every SSE event or NDJSON line (other streamed bodies: every chunk) with `t`, its offset
in seconds from the moment the request was sent upstream. Secret headers and query values are never
written (see `brownout.proxy.flowmodel`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "EVENT_OVERHEAD",
    "FORMAT",
    "SUFFIX",
    "VERSION",
    "Cassette",
    "CassetteError",
    "Event",
    "Recorded",
    "cassette_files",
    "decode_bytes",
    "encode_bytes",
    "file_name",
    "header",
    "read_cassette",
    "read_dir",
]

FORMAT = "brownout-cassette"
VERSION = 1
SUFFIX = ".jsonl"

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class CassetteError(ValueError):
    """A cassette that cannot be read; the message names the file and line."""


def encode_bytes(data: bytes) -> dict[str, str]:
    """`{"text": ...}` for UTF-8, else `{"b64": ...}`: readable in a diff, exact either way."""
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(data).decode("ascii")}


def decode_bytes(value: Any) -> bytes:
    if not isinstance(value, dict):
        raise ValueError(f"expected {{'text': ...}} or {{'b64': ...}}, got {type(value).__name__}")
    if "text" in value:
        return str(value["text"]).encode("utf-8")
    return base64.b64decode(str(value.get("b64", "")), validate=True)


def file_name(session: str) -> str:
    """The cassette file of a session: its name where that is a safe file name, plus a digest where not."""
    slug = _UNSAFE.sub("_", session).strip("._")[:80] or "session"
    if slug != session:
        slug += "-" + hashlib.blake2b(session.encode(), digest_size=4).hexdigest()
    return slug + SUFFIX


def header(session: str, created: str, version: str) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "session": session, "created": created, "brownout": version}


# What holding one recorded event costs besides its bytes (the object, its bytes header, the list
# slot): a stream of tiny events is bounded by what it costs, not by its bytes alone.
EVENT_OVERHEAD = 96


@dataclass(slots=True)
class Event:
    """One SSE event, NDJSON line or body chunk, and when it arrived."""

    t: float  # seconds from the request going upstream
    data: bytes

    def to_dict(self) -> dict[str, Any]:
        return {"t": round(self.t, 6), **encode_bytes(self.data)}


@dataclass(slots=True)
class Recorded:
    """One recorded exchange: the request as it went upstream (secrets removed), the answer as upstream sent it."""

    session: str
    seq: int
    method: str
    url: str
    request_headers: list[tuple[str, str]]
    request_body: bytes
    status: int | None = None  # None: upstream never answered (`error` says why)
    reason: str = ""
    http_version: str = "HTTP/1.1"
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    headers_s: float = 0.0  # response headers arrived, seconds from the request going upstream
    end_s: float = 0.0  # response complete
    body: bytes | None = None  # a buffered response
    events: list[Event] | None = None  # a streamed one
    error: str | None = None  # the upstream failed (no answer, or cut mid-body)
    truncated: bool = False  # longer than record.max_body_bytes: kept cut
    decoded: str | None = None  # the content-encoding removed from the recorded body
    recorded_at: float = 0.0
    provider: str = "http"
    operation: str = "http"
    model: str | None = None
    source: str = ""  # file:line it was read from

    @property
    def body_size(self) -> int:
        if self.events is not None:
            return sum(len(e.data) for e in self.events)
        return len(self.body or b"")

    @property
    def held_bytes(self) -> int:
        """Memory the recorded bodies hold, about: their bytes plus each event's overhead."""
        events = len(self.events) * EVENT_OVERHEAD if self.events is not None else 0
        return len(self.request_body) + self.body_size + events

    def to_dict(self) -> dict[str, Any]:
        response: dict[str, Any] | None = None
        if self.status is not None:
            response = {
                "status": self.status,
                "reason": self.reason,
                "http_version": self.http_version,
                "headers": [list(h) for h in self.response_headers],
                "headers_s": round(self.headers_s, 6),
                "end_s": round(self.end_s, 6),
            }
            if self.events is not None:
                response["events"] = [e.to_dict() for e in self.events]
            else:
                response["body"] = encode_bytes(self.body or b"")
            if self.decoded:
                response["decoded"] = self.decoded
            if self.truncated:
                response["truncated"] = True
        return {
            "seq": self.seq,
            "session": self.session,
            "recorded_at": round(self.recorded_at, 6),
            "provider": self.provider,
            "operation": self.operation,
            "model": self.model,
            "request": {
                "method": self.method,
                "url": self.url,
                "headers": [list(h) for h in self.request_headers],
                "body": encode_bytes(self.request_body),
            },
            "response": response,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "") -> Recorded:
        req = d["request"]
        resp = d.get("response")
        rec = cls(
            session=str(d["session"]),
            seq=int(d.get("seq", 0)),
            method=str(req["method"]),
            url=str(req["url"]),
            request_headers=[(str(k), str(v)) for k, v in req.get("headers", [])],
            request_body=decode_bytes(req.get("body", {"text": ""})),
            error=d.get("error"),
            recorded_at=float(d.get("recorded_at", 0.0)),
            provider=str(d.get("provider", "http")),
            operation=str(d.get("operation", "http")),
            model=d.get("model"),
            source=source,
        )
        if resp is not None:
            rec.status = int(resp["status"])
            rec.reason = str(resp.get("reason", ""))
            rec.http_version = str(resp.get("http_version", "HTTP/1.1"))
            rec.response_headers = [(str(k), str(v)) for k, v in resp.get("headers", [])]
            rec.headers_s = float(resp.get("headers_s", 0.0))
            rec.end_s = float(resp.get("end_s", rec.headers_s))
            rec.decoded = resp.get("decoded")
            rec.truncated = bool(resp.get("truncated", False))
            if "events" in resp:
                rec.events = [Event(float(e["t"]), decode_bytes(e)) for e in resp["events"]]
            else:
                rec.body = decode_bytes(resp.get("body", {"text": ""}))
        return rec


@dataclass(slots=True)
class Cassette:
    """One session's file."""

    path: Path
    session: str
    created: str
    brownout: str
    exchanges: list[Recorded]

    @property
    def size(self) -> int:
        return self.path.stat().st_size


def read_cassette(path: Path) -> Cassette:
    """Read and check one cassette file (CassetteError naming file and line)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise CassetteError(f"{path}: cannot read: {e}") from e
    head: dict[str, Any] | None = None
    exchanges: list[Recorded] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            if head is None:
                head = _check_header(d)
                continue
            exchanges.append(Recorded.from_dict(d, f"{path.name}:{n}"))
        except (ValueError, KeyError, TypeError) as e:
            raise CassetteError(f"{path}:{n}: {e}") from e
    if head is None:
        raise CassetteError(f"{path}: empty, no cassette header")
    return Cassette(path, str(head["session"]), str(head.get("created", "")), str(head.get("brownout", "")), exchanges)


def _check_header(d: Any) -> dict[str, Any]:
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise ValueError(f"not a brownout cassette (first line must have format {FORMAT!r})")
    if d.get("version") != VERSION:
        raise ValueError(f"cassette format version {d.get('version')!r}; this brownout reads version {VERSION}")
    if "session" not in d:
        raise ValueError("the header names no session")
    return d


def cassette_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob(f"*{SUFFIX}") if p.is_file())


def read_dir(directory: Path) -> Iterator[Cassette]:
    """Every cassette in `directory`, by file name (CassetteError for a missing directory or a bad file)."""
    if not directory.is_dir():
        raise CassetteError(f"{directory}: no such cassette directory")
    for path in cassette_files(directory):
        yield read_cassette(path)
