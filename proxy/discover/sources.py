"""Where discovery reads traffic: an exchanges log, recorded cassettes, a running proxy's control API, or
the agent's own traces (OTLP JSON, Tempo or Jaeger exports: `proxy.discover.traces`).

All of them yield the same records: exchange summaries as `exporters.jsonl.exchange_summary` writes
them (routing, timing, usage, tool names and argument shapes; no content). Cassettes are read with
the record package's reader and parsed through the wire formats, as the proxy parsed them live.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from brownout.core.cost import Pricer
from brownout.exporters.jsonl import exchange_summary
from brownout.proxy.discover.traces import TraceFileError, read_traces, sniff_traces
from brownout.proxy.record.cassette import FORMAT as CASSETTE_FORMAT
from brownout.proxy.record.cassette import CassetteError, CassetteFile, open_cassette, scan_dir
from brownout.proxy.record.inspect import exchanges_of

__all__ = ["DiscoverError", "Traffic", "canonical", "read_source"]

_HEADER_MAX = 64 << 10  # a cassette's header line is short: a longer first line is no cassette


class DiscoverError(ValueError):
    """A source that cannot be read; the message names it (and the line, for files)."""


@dataclass(frozen=True, slots=True)
class Traffic:
    """The exchange summaries of one source, read as they are iterated (once): a log or a cassette
    directory of any size is never held whole."""

    kind: str  # "exchanges log", "cassettes", "control API"
    records: Iterable[dict[str, Any]]


def canonical(record: dict[str, Any]) -> bytes:
    """A record as the source digest hashes it (canonical JSON and a newline): same traffic, same digest."""
    return json.dumps(record, sort_keys=True, separators=(",", ":"), default=str).encode() + b"\n"


def read_source(source: str, *, token: str | None = None, limit: int | None = None, timeout_s: float = 10.0) -> Traffic:
    """Read SOURCE: an http(s) URL is a control API, a directory holds cassettes, a file is a log or a cassette.

    DiscoverError here for a source that cannot be opened, and while iterating for a bad record."""
    if source.startswith(("http://", "https://")):
        return Traffic("control API", read_control_api(source, token=token, limit=limit, timeout_s=timeout_s))
    path = Path(source)
    try:
        if path.is_dir():
            return Traffic("cassettes", _summaries(scan_dir(path)))
        if not path.is_file():
            raise DiscoverError(f"{source}: no such file or directory (nor an http:// control API URL)")
        if _is_cassette(path):
            return Traffic("cassettes", _summaries([open_cassette(path)]))
    except CassetteError as e:
        raise DiscoverError(str(e)) from e
    kind = sniff_traces(path)
    if kind is not None:
        return Traffic(kind, _traces(path, kind))
    return Traffic("exchanges log", read_exchanges_log(path))


def _traces(path: Path, kind: str) -> Iterator[dict[str, Any]]:
    try:
        yield from read_traces(path, kind)
    except TraceFileError as e:
        raise DiscoverError(str(e)) from e


def _is_cassette(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as f:
            first = f.readline(_HEADER_MAX)
        head = json.loads(first)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(head, dict) and head.get("format") == CASSETTE_FORMAT


def read_exchanges_log(path: Path) -> Iterator[dict[str, Any]]:
    """The records of an exchanges log (`exporters.jsonl.exchanges_path`), a line at a time; a bad line is
    an error naming it, except a last one half written (a crash can leave one): that one is skipped."""
    bad: DiscoverError | None = None
    try:
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                if bad is not None:
                    raise bad  # not the last line after all
                try:
                    record = json.loads(line)
                except ValueError as e:
                    bad = DiscoverError(f"{path}:{n}: not a JSON line: {e}")
                    continue
                except RecursionError:
                    raise DiscoverError(f"{path}:{n}: JSON nested too deeply to read") from None
                if not isinstance(record, dict) or "provider" not in record or "session" not in record:
                    raise DiscoverError(f"{path}:{n}: not an exchange summary (no provider or session)")
                yield record
    except (OSError, UnicodeDecodeError) as e:
        raise DiscoverError(f"{path}: cannot read: {e}") from e


def _summaries(cassettes: Iterable[CassetteFile]) -> Iterator[dict[str, Any]]:
    pricer = Pricer()
    try:
        for cassette in cassettes:
            for rec in cassette.exchanges():
                for exchange in exchanges_of(rec):  # a realtime session: the session, then its generations
                    exchange.cost = pricer.price(exchange)  # the proxy prices live exchanges the same way
                    yield exchange_summary(exchange)
    except CassetteError as e:
        raise DiscoverError(str(e)) from e


def read_control_api(url: str, *, token: str | None, limit: int | None, timeout_s: float) -> list[dict[str, Any]]:
    """The exchange summaries a running proxy keeps (GET /exchanges, bearer token)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    params = {"limit": str(limit)} if limit else {}
    # trust_env=False: an HTTP_PROXY pointing at brownout itself must not capture this call.
    try:
        with httpx.Client(headers=headers, timeout=timeout_s, trust_env=False) as client:
            response = client.get(url.rstrip("/") + "/exchanges", params=params)
    except httpx.HTTPError as e:
        raise DiscoverError(f"cannot reach the control API at {url}: {e}") from e
    if response.status_code == 401:
        raise DiscoverError(f"{url}: unauthorized: pass --token or set BROWNOUT_TOKEN")
    if response.status_code != 200:
        raise DiscoverError(f"{url}/exchanges: HTTP {response.status_code}: {response.text[:300]}")
    try:
        records = response.json()["exchanges"]
    except (ValueError, KeyError, TypeError) as e:
        raise DiscoverError(f"{url}/exchanges: unexpected answer: {e}") from e
    if not isinstance(records, list):
        raise DiscoverError(f"{url}/exchanges: unexpected answer: exchanges is not a list")
    return [r for r in records if isinstance(r, dict)]
