"""Where discovery reads traffic: an exchanges log, recorded cassettes, or a running proxy's control API.

All three yield the same records: exchange summaries as `exporters.jsonl.exchange_summary` writes
them (routing, timing, usage, tool names and argument shapes; no content). Cassettes are read with
the record package's reader and parsed through the wire formats, as the proxy parsed them live.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from brownout.core.cost import Pricer
from brownout.exporters.jsonl import exchange_summary
from brownout.proxy.record.cassette import FORMAT as CASSETTE_FORMAT
from brownout.proxy.record.cassette import Cassette, CassetteError, read_cassette, read_dir
from brownout.proxy.record.inspect import exchange_of

__all__ = ["DiscoverError", "Traffic", "read_source"]


class DiscoverError(ValueError):
    """A source that cannot be read; the message names it (and the line, for files)."""


@dataclass(frozen=True, slots=True)
class Traffic:
    """The exchange summaries read from one source."""

    kind: str  # "exchanges log", "cassettes", "control API"
    records: list[dict[str, Any]]

    @property
    def digest(self) -> str:
        """sha256 of the records in canonical JSON: the same traffic gives the same digest."""
        h = hashlib.sha256()
        for record in self.records:
            h.update(json.dumps(record, sort_keys=True, separators=(",", ":"), default=str).encode())
            h.update(b"\n")
        return h.hexdigest()


def read_source(source: str, *, token: str | None = None, limit: int | None = None, timeout_s: float = 10.0) -> Traffic:
    """Read SOURCE: an http(s) URL is a control API, a directory holds cassettes, a file is a log or a cassette."""
    if source.startswith(("http://", "https://")):
        return Traffic("control API", read_control_api(source, token=token, limit=limit, timeout_s=timeout_s))
    path = Path(source)
    if path.is_dir():
        try:
            return Traffic("cassettes", _summaries(read_dir(path)))
        except CassetteError as e:
            raise DiscoverError(str(e)) from e
    if not path.is_file():
        raise DiscoverError(f"{source}: no such file or directory (nor an http:// control API URL)")
    if _is_cassette(path):
        try:
            return Traffic("cassettes", _summaries([read_cassette(path)]))
        except CassetteError as e:
            raise DiscoverError(str(e)) from e
    return Traffic("exchanges log", read_exchanges_log(path))


def _is_cassette(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as f:
            first = f.readline()
        head = json.loads(first)
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(head, dict) and head.get("format") == CASSETTE_FORMAT


def read_exchanges_log(path: Path) -> list[dict[str, Any]]:
    """The records of an exchanges log (`exporters.jsonl.exchanges_path`); a bad line is an error naming it."""
    records = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise DiscoverError(f"{path}: cannot read: {e}") from e
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as e:
            # A crash can leave the last line half written: that one is skipped, not fatal.
            if n == len(lines):
                break
            raise DiscoverError(f"{path}:{n}: not a JSON line: {e}") from e
        if not isinstance(record, dict) or "provider" not in record or "session" not in record:
            raise DiscoverError(f"{path}:{n}: not an exchange summary (no provider or session)")
        records.append(record)
    return records


def _summaries(cassettes: Iterable[Cassette]) -> list[dict[str, Any]]:
    pricer = Pricer()
    records = []
    for cassette in cassettes:
        for rec in cassette.exchanges:
            exchange = exchange_of(rec)
            exchange.cost = pricer.price(exchange)  # the proxy prices live exchanges the same way
            records.append(exchange_summary(exchange))
    return records


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
