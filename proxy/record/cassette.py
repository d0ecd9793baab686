"""The cassette format: one JSON Lines file per session, a header line, then one exchange per line.

    {"format": "brownout-cassette", "version": 1, "session": "...", "created": "...", "brownout": "..."}
    {"seq": 1, "session": "...", "provider": "openai", ..., "request": {...}, "response": {...}}

Bodies are kept byte for byte: `{"text": ...}` when they are UTF-8, else `{"b64": ...}`. A streamed
response keeps every SSE event or NDJSON line (other streamed bodies: every chunk) with `t`, its offset
in seconds from the moment the request was sent upstream. A WebSocket session (status 101) keeps every
message either way (`messages`: `t`, `from` client or server, its bytes, `binary` for a binary frame)
and how it ended (`close`: code, reason, and by whom). Secret headers and query values are never
written (see `brownout.proxy.flowmodel`).

A cassette may come from anywhere, so reading one trusts nothing: files are read a line at a time
(`CassetteFile`; replay keeps only where each exchange is, `Spot`, and reads it again when it answers),
links out of the directory are refused (`proxy.record.files`), and every time offset must be a number
from 0 to a day: replay waits that long, and a client must not hang on a file's say-so.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brownout.proxy.record.files import Outside, files_in, open_inside
from brownout.proxy.record.recorded import (
    EVENT_OVERHEAD,
    MAX_OFFSET_S,
    Event,
    Recorded,
    WsClose,
    WsMessage,
    decode_bytes,
    encode_bytes,
)

__all__ = [
    "EVENT_OVERHEAD",
    "FORMAT",
    "MAX_OFFSET_S",
    "SUFFIX",
    "VERSION",
    "Cassette",
    "CassetteError",
    "CassetteFile",
    "Event",
    "Recorded",
    "Spot",
    "WsClose",
    "WsMessage",
    "cassette_files",
    "decode_bytes",
    "encode_bytes",
    "file_name",
    "header",
    "open_cassette",
    "read_cassette",
    "read_dir",
    "scan_dir",
]

FORMAT = "brownout-cassette"
VERSION = 1
SUFFIX = ".jsonl"

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class CassetteError(ValueError):
    """A cassette that cannot be read; the message names the file and line."""


def file_name(session: str) -> str:
    """The cassette file of a session: its name where that is a safe file name, plus a digest where not."""
    slug = _UNSAFE.sub("_", session).strip("._")[:80] or "session"
    if slug != session:
        slug += "-" + hashlib.blake2b(session.encode(), digest_size=4).hexdigest()
    return slug + SUFFIX


def header(session: str, created: str, version: str) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "session": session, "created": created, "brownout": version}


@dataclass(slots=True)
class Cassette:
    """One session's file, read whole (`read_cassette`): for small files and tests; see `CassetteFile`."""

    path: Path
    session: str
    created: str
    brownout: str
    exchanges: list[Recorded]

    @property
    def size(self) -> int:
        return self.path.stat().st_size


@dataclass(frozen=True, slots=True)
class Spot:
    """Where one recorded exchange lies in its file: replay reads it again when it answers with it."""

    path: Path
    root: Path  # the cassette directory, resolved: the file is read again only from inside it
    offset: int
    length: int
    line: int
    seq: int
    session: str

    @property
    def source(self) -> str:
        return f"{self.path.name}:{self.line}"

    def load(self) -> Recorded:
        """The exchange, read again (CassetteError when the file no longer holds it there)."""
        try:
            with open_inside(self.path, self.root) as f:
                f.seek(self.offset)
                raw = f.read(self.length)
        except OSError as e:
            raise CassetteError(f"{self.path}: cannot read: {e}") from e
        rec = _exchange(raw, self.path, self.line)
        if (rec.seq, rec.session) != (self.seq, self.session):
            raise CassetteError(f"{self.path}:{self.line}: the file changed since it was read; reload the replay")
        return rec


@dataclass(frozen=True, slots=True)
class CassetteFile:
    """One session's file, read an exchange at a time however large it is (`open_cassette`, `scan_dir`)."""

    path: Path
    root: Path
    session: str
    created: str
    brownout: str

    @property
    def size(self) -> int:
        return self.path.stat().st_size

    def exchanges(self) -> Iterator[Recorded]:
        """Every exchange in file order, each checked (CassetteError naming file, line and field)."""
        for rec, _ in self.spots():
            yield rec

    def spots(self) -> Iterator[tuple[Recorded, Spot]]:
        """Every exchange, and where it lies in the file."""
        for n, offset, raw in _lines(self.path, self.root, skip_header=True):
            rec = _exchange(raw, self.path, n)
            yield rec, Spot(self.path, self.root, offset, len(raw), n, rec.seq, rec.session)


def _lines(path: Path, root: Path, *, skip_header: bool = False) -> Iterator[tuple[int, int, bytes]]:
    """(line number, byte offset, bytes) of each non-blank line; one line in memory at a time."""
    try:
        with open_inside(path, root) as f:
            offset, header_seen = 0, not skip_header
            for n, raw in enumerate(f, 1):
                at, offset = offset, offset + len(raw)
                if not raw.strip():
                    continue
                if not header_seen:
                    header_seen = True
                    continue
                yield n, at, raw
    except OSError as e:
        raise CassetteError(f"{path}: cannot read: {e}") from e


def _parsed(raw: bytes, path: Path, n: int) -> Any:
    try:
        return json.loads(raw)
    except UnicodeDecodeError as e:
        raise CassetteError(f"{path}:{n}: not UTF-8: {e}") from e
    except ValueError as e:
        raise CassetteError(f"{path}:{n}: {e}") from e
    except RecursionError:
        raise CassetteError(f"{path}:{n}: JSON nested too deeply to read") from None


def _exchange(raw: bytes, path: Path, n: int) -> Recorded:
    d = _parsed(raw, path, n)
    try:
        if not isinstance(d, dict):
            raise TypeError(f"an exchange is a JSON object, not {type(d).__name__}")
        return Recorded.from_dict(d, f"{path.name}:{n}")
    except (ValueError, KeyError, TypeError) as e:
        raise CassetteError(f"{path}:{n}: {e}") from e


def open_cassette(path: Path, root: Path | None = None) -> CassetteFile:
    """Check one cassette file's header (CassetteError naming file and line); its exchanges are read later.

    `root`: the directory it must stay in (a link out of it is refused); by default its own."""
    root = root if root is not None else path.parent.resolve()
    for n, _, raw in _lines(path, root):
        try:
            head = _check_header(_parsed(raw, path, n))
        except ValueError as e:
            raise CassetteError(f"{path}:{n}: {e}") from e
        return CassetteFile(
            path, root, str(head["session"]), str(head.get("created", "")), str(head.get("brownout", ""))
        )
    raise CassetteError(f"{path}: empty, no cassette header")


def read_cassette(path: Path) -> Cassette:
    """Read and check one cassette file whole (CassetteError naming file and line)."""
    f = open_cassette(path)
    return Cassette(path, f.session, f.created, f.brownout, list(f.exchanges()))


def _check_header(d: Any) -> dict[str, Any]:
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise ValueError(f"not a brownout cassette (first line must have format {FORMAT!r})")
    if d.get("version") != VERSION:
        raise ValueError(f"cassette format version {d.get('version')!r}; this brownout reads version {VERSION}")
    if "session" not in d:
        raise ValueError("the header names no session")
    return d


def _files(directory: Path) -> tuple[Path, list[Path]]:
    try:
        return files_in(directory, SUFFIX)
    except Outside as e:
        raise CassetteError(str(e)) from e
    except OSError as e:
        raise CassetteError(f"{directory}: no such cassette directory") from e


def cassette_files(directory: Path) -> list[Path]:
    """The cassette files of `directory`, by name (CassetteError for a link that leads out of it)."""
    return _files(directory)[1]


def scan_dir(directory: Path) -> list[CassetteFile]:
    """Every cassette in `directory`, by file name, headers checked; exchanges are read as they are iterated."""
    root, paths = _files(directory)
    return [open_cassette(path, root) for path in paths]


def read_dir(directory: Path) -> Iterator[Cassette]:
    """Every cassette in `directory` read whole, by file name (CassetteError for a missing directory or a bad file)."""
    for f in scan_dir(directory):
        yield Cassette(f.path, f.session, f.created, f.brownout, list(f.exchanges()))
