"""A Session as the shared store's record and back: totals, declared tools, history, invariant states.

Fields of the record: `totals` (counts, tokens, cost, times), `tools` (declared tools; written only
when they change), and `inv:<name>` per invariant with state: `{"config": FINGERPRINT, "state": ...}`
through the invariant's own `dump_state` / `load_state`. The fingerprint is the invariant's config:
state written under another config (a reload, a replica running other settings) is not read back,
as a reload drops the state of a changed invariant in one process. History entries are light
exchange summaries. Encoding is deterministic, so an unchanged state is never written again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from brownout.core.guard import Guard
from brownout.core.state.sessions import SessionChange, SessionRecord
from brownout.invariants.base import Invariant
from brownout.invariants.session import TOOLS_MAX, Session
from brownout.invariants.summary import ExchangeSummary
from brownout.invariants.summary_codec import dump_summary, load_summary

__all__ = ["SessionCodec", "applied", "tools_change"]

TOTALS = "totals"
TOOLS = "tools"
STATE = "inv:"
_TOTALS = (
    "created", "last_seen", "calls", "llm_calls", "input_tokens", "output_tokens", "cost_usd", "unpriced_calls",
    "first_start", "last_end",
)  # fmt: skip


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def tools_change(session: Session, summary: ExchangeSummary) -> bool:
    """Whether observing `summary` changes the session's declared tools (so they are written again)."""
    tools = session.tools
    return any(
        (spec.name in tools and tools[spec.name] != spec.schema) or (spec.name not in tools and len(tools) < TOOLS_MAX)
        for spec in summary.tools_declared
    )


class SessionCodec:
    """Turns records into sessions and sessions' changes into record changes, for one set of invariants."""

    def __init__(self, invariants: Sequence[Invariant], guard: Guard) -> None:
        self.invariants = tuple(invariants)
        self._guard = guard
        self._by_name = {inv.name: inv for inv in invariants}
        self._prints = {inv.name: _fingerprint(inv) for inv in invariants}

    def session(self, record: SessionRecord, now: float) -> Session:
        """The session a record holds (a fresh one for version 0); it remembers the record in `shared`."""
        totals = json.loads(record.fields[TOTALS]) if TOTALS in record.fields else {}
        session = Session(id=record.id, created=totals.get("created", now), last_seen=totals.get("last_seen", now))
        session.now = now
        for name in _TOTALS[2:]:
            if name in totals:
                setattr(session, name, totals[name])
        if TOOLS in record.fields:
            session.tools = json.loads(record.fields[TOOLS])
        session.history.extend(load_summary(json.loads(entry)) for entry in record.history)
        for key, blob in record.fields.items():
            if key.startswith(STATE):
                self._load_state(session, key[len(STATE) :], blob)
        session.shared = SessionRecord(record.id, record.version, dict(record.fields))
        return session

    def _load_state(self, session: Session, name: str, blob: str) -> None:
        invariant = self._by_name.get(name)
        if invariant is None:
            return
        data = json.loads(blob)
        if not isinstance(data, dict) or data.get("config") != self._prints[name]:
            return  # written under another config of this invariant: start afresh, as a reload does
        state = self._guard.call(
            f"invariant:{name}", invariant.load_state, data.get("state"), context=f"invariant {name!r} load_state"
        )
        if state is not None:
            session.state[name] = state

    def change(self, session: Session, tools_changed: bool) -> SessionChange:
        """What to write after the session observed its latest exchange (the last history entry)."""
        shared = session.shared
        assert shared is not None
        fields = {TOTALS: _json({name: getattr(session, name) for name in _TOTALS})}
        if tools_changed:
            fields[TOOLS] = _json(session.tools)
        keep: set[str] = set()
        for name, state in session.state.items():
            invariant = self._by_name.get(name)
            if invariant is None:
                continue
            key = STATE + name
            try:
                blob = self._dump_state(invariant, state)
            except Exception as e:  # noqa: BLE001 - an invariant's codec, contained like its checks
                self._guard.failed(f"invariant:{name}", e, f"invariant {name!r} dump_state")
                keep.add(key)  # what the store holds stays: a failed dump is no reason to forget the state
                continue
            if blob is not None:
                keep.add(key)
                if shared.fields.get(key) != blob:
                    fields[key] = blob
        dropped = tuple(key for key in shared.fields if key.startswith(STATE) and key not in keep)
        appended = (_json(dump_summary(session.history[-1])),) if session.history else ()
        return SessionChange(fields, dropped, appended)

    def _dump_state(self, invariant: Invariant, state: Any) -> str | None:
        data = invariant.dump_state(state)
        return None if data is None else _json({"config": self._prints[invariant.name], "state": data})


def applied(record: SessionRecord, change: SessionChange, version: int) -> None:
    """`record` (a session's `shared`) brought up to what the store holds after `change` committed."""
    record.version = version
    record.fields.update(change.fields)
    for key in change.dropped:
        record.fields.pop(key, None)


def _fingerprint(invariant: Invariant) -> str:
    config = f"{type(invariant).__module__}.{type(invariant).__qualname__}:{invariant.config.model_dump_json()}"
    return hashlib.sha256(config.encode()).hexdigest()[:16]
