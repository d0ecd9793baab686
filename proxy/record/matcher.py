"""Which recorded exchange answers a request: wire-format-aware keys, recorded order within a session.

A request's key is its method, host (without the port: a local upstream's port changes from run to
run), path and query as recording keeps them (secrets blanked; secret and ignored parameters left out) and the body its wire format normalises
(`WireFormat.replay_key`: the model, messages or input, tools, stream flag; never user ids, metadata
or request ids). The n-th request with a key in a live session gets the n-th recording of that key:
from the recorded session of the same name when there is one, else from the recorded session this
live session already drew from, else from the first recorded session (by file name) that has it.
That choice depends only on the live session's own requests, so concurrent sessions replay the same
way in any interleaving.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import OrderedDict, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from brownout.core.secret_paths import redact_target
from brownout.core.secrets import SECRET_PARAMS
from brownout.core.wire import RequestInfo, WireFormats
from brownout.proxy.record.cassette import Cassette, CassetteFile, Recorded, Spot
from brownout.proxy.record.redact import without_secrets

__all__ = ["Match", "ReplayIndex", "Stored", "normalised_request", "recorded_info"]

_MAX_SESSIONS = 10_000  # live sessions whose cursors are kept (oldest forgotten first)


def normalised_request(formats: WireFormats, info: RequestInfo, ignore_params: Iterable[str] = ()) -> dict[str, Any]:
    """What a request is matched on, as a JSON-ready dict (also what a miss logs)."""
    wire, _ = formats.detect(info)
    ignored = SECRET_PARAMS | set(ignore_params)  # credentials' values are never recorded
    query = sorted((k, v) for k, v in parse_qsl(info.query, keep_blank_values=True) if k.lower() not in ignored)
    return {
        "provider": wire.provider,
        "method": info.method.upper(),
        "host": info.host.lower(),
        "path": info.path,
        "query": query,
        "body": wire.replay_key(info),
    }


def digest(normalised: Mapping[str, Any]) -> str:
    text = json.dumps(normalised, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def recorded_info(rec: Recorded) -> RequestInfo:
    """A recorded request as wire-format recognition sees a live one."""
    url = urlsplit(rec.url)
    headers = {k.lower(): v for k, v in rec.request_headers}
    return RequestInfo(
        method=rec.method,
        host=url.hostname or "",
        path=url.path or "/",
        query=url.query,
        headers=headers,
        body=rec.request_body,
    )


# A recorded exchange in memory, or where to read it again (a cassette read from disk: the index keeps
# only keys and places, so a cassette of any size costs little memory).
Stored = Recorded | Spot


@dataclass(slots=True, frozen=True)
class Match:
    """A recorded answer for a request, and whether it was used before (the recording ran out)."""

    stored: Stored
    repeated: bool

    @property
    def source(self) -> str:
        return self.stored.source

    @property
    def recorded(self) -> Recorded:
        """The exchange (read again from its file: off the event loop for a large one)."""
        return self.stored if isinstance(self.stored, Recorded) else self.stored.load()


class ReplayIndex:
    """Recorded exchanges by session and key, with a cursor per live session and key."""

    def __init__(
        self,
        cassettes: Iterable[Cassette | CassetteFile],
        formats: WireFormats,
        *,
        ignore_params: Iterable[str] = (),
        exhausted: str = "repeat",
    ) -> None:
        """Cassettes read whole are kept in memory; files (`CassetteFile`) are read an exchange at a time
        (CassetteError for a bad one), keeping where each exchange lies."""
        self.formats = formats
        self.ignore_params = tuple(ignore_params)
        self.exhausted = exhausted
        self._by_session: dict[str, dict[str, list[Stored]]] = {}
        self.sessions: list[str] = []
        self.exchanges = 0
        for cassette in cassettes:
            keys = self._by_session.setdefault(cassette.session, defaultdict(list))
            if cassette.session not in self.sessions:
                self.sessions.append(cassette.session)
            entries: Iterable[tuple[Recorded, Stored]] = (
                ((rec, rec) for rec in cassette.exchanges) if isinstance(cassette, Cassette) else cassette.spots()
            )
            for rec, stored in entries:
                keys[self.key(recorded_info(rec))[0]].append(stored)
                self.exchanges += 1
        self._seen: OrderedDict[str, dict[str, int]] = OrderedDict()
        self._bound: dict[str, str] = {}

    def key(self, info: RequestInfo) -> tuple[str, dict[str, Any]]:
        # Recordings keep URLs and request bodies without secrets: a live request is matched the same way.
        path, _, query = redact_target(f"{info.path}?{info.query}" if info.query else info.path).partition("?")
        info = dataclasses.replace(info, path=path, query=query, body=without_secrets(info.body))
        normalised = normalised_request(self.formats, info, self.ignore_params)
        return digest(normalised), normalised

    def take(self, session: str, key: str) -> Match | None:
        """The next recorded answer for `key` in the live `session`, or None (a miss)."""
        seen = self._seen.get(session)
        if seen is None:
            seen = self._seen[session] = {}
            while len(self._seen) > _MAX_SESSIONS:
                old, _ = self._seen.popitem(last=False)
                self._bound.pop(old, None)
        else:
            self._seen.move_to_end(session)
        n = seen.get(key, 0)
        seen[key] = n + 1
        order = self._order(session)
        for name in order:
            recs = self._by_session[name].get(key)
            if recs and n < len(recs):
                self._bound.setdefault(session, name)
                return Match(recs[n], repeated=False)
        if self.exhausted == "repeat":
            for name in order:
                recs = self._by_session[name].get(key)
                if recs:
                    return Match(recs[-1], repeated=True)
        return None

    def _order(self, session: str) -> list[str]:
        first = [s for s in (session, self._bound.get(session)) if s is not None and s in self._by_session]
        return list(dict.fromkeys([*first, *self.sessions]))
