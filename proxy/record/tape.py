"""Record and replay inside the addon: what the addon calls at each hook, and nothing else it must know.

Recording writes what the upstream sent, before any fault, to a cassette per session (a writer thread,
proxy/record/writer.py). Replay answers a request after the fault engine let it through to the upstream:
a hit is sent to the replay relay (the pacing relay with recorded answers for a network), so it comes
back through the same hooks as a live answer and faults act on it unchanged; a miss is answered with a
404 naming it, or forwarded upstream (`replay.miss: passthrough`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mitmproxy import http

from brownout.core.guard import Guard
from brownout.core.secrets import SecretHeaders
from brownout.core.wire import WireFormats
from brownout.core.wire.common import JSON_HEADERS
from brownout.core.wire.otlp import PROVIDER as OTLP
from brownout.core.wire.realtime import RealtimeFormat
from brownout.faults.base import StreamTiming
from brownout.faults.decisions import Decision
from brownout.proxy import effects, flowmodel
from brownout.proxy.bodies import Uninspected
from brownout.proxy.record.capture import Capture, RecordingTap, mitm_headers
from brownout.proxy.record.cassette import scan_dir
from brownout.proxy.record.config import RecordConfig, ReplayConfig
from brownout.proxy.record.earlier import EarlierFaults
from brownout.proxy.record.matcher import ReplayIndex
from brownout.proxy.record.transport import REPLAY_HEADER, ReplayTransport
from brownout.proxy.record.writer import CassetteWriter
from brownout.proxy.record.wsreplay import TOKEN_HEADER as WS_TOKEN_HEADER
from brownout.proxy.record.wsreplay import WsReplayServer
from brownout.proxy.relay import Relay

if TYPE_CHECKING:
    from brownout.proxy.flowstate import FlowState

__all__ = ["MISS_STATUS", "Tape", "TapeSetup"]

log = logging.getLogger(__name__)

MISS_STATUS = 404  # not retried by the SDKs: a miss is reported once, not three times
_CAPTURE = "tape.capture"
_TOKEN = "tape.token"
_WS_TOKEN = "tape.ws_token"
_SHOWN_MAX = 2000  # characters of a normalised request in a miss's log line


@dataclass(slots=True)
class TapeSetup:
    """Cassettes read and indexed, and a record directory opened, for `Tape.swap` to put in place."""

    record: RecordConfig
    replay: ReplayConfig
    index: ReplayIndex | None
    writer: CassetteWriter | None
    append: bool  # record replay misses next to the cassettes they missed

    def discard(self, tape: Tape) -> None:
        """Never swapped in: close the writer it opened (a no-op when it is the tape's own)."""
        if self.writer is not None and self.writer is not tape.writer:
            self.writer.close()


class Tape:
    """The addon's recorder and player; idle (every hook returns at once) when neither is configured."""

    def __init__(self, guard: Guard, *, on_replay: Callable[[str], None], on_recorded: Callable[[int, int], None]):
        self.guard = guard
        self.on_replay = on_replay
        self.on_recorded = on_recorded
        self.record = RecordConfig()
        self.replay = ReplayConfig()
        self.writer: CassetteWriter | None = None
        self.index: ReplayIndex | None = None
        self.transport = ReplayTransport(lambda: self.replay.speed)
        self.relay: Relay | None = None
        # Realtime sessions replay from a WebSocket server of their own (proxy/record/wsreplay.py).
        self.ws_replay = WsReplayServer(guard, speed=lambda: self.replay.speed, on_miss=self._ws_miss)
        self.counts = {"hit": 0, "miss": 0, "passthrough": 0, "repeated": 0}
        self.not_recorded = 0  # exchanges a stream fault cut, or whose body went by unread, while recording
        self.earlier = EarlierFaults()
        self.secret_headers = SecretHeaders()  # proxy.secret_headers: never written either

    @property
    def active(self) -> bool:
        return self.writer is not None or self.index is not None

    # --- configuration and lifecycle -------------------------------------------------

    def prepare(self, record: RecordConfig, replay: ReplayConfig, formats: WireFormats) -> TapeSetup:
        """What switching to these sections takes that is slow (reading and indexing cassettes, opening a
        record directory), for a thread other than the event loop's; `swap` then puts it in place at once.
        Raises CassetteError or OSError for a bad directory, before anything changes."""
        index = self.index
        if replay != self.replay:
            # Rebuilt only when the section changes: an experiment's phase switch keeps the cursors.
            index = None
            if replay.dir:
                cassettes = scan_dir(Path(replay.dir))  # read an exchange at a time: only keys are kept
                index = ReplayIndex(cassettes, formats, ignore_params=replay.ignore_params, exhausted=replay.exhausted)
                log.info("replay: %d exchanges in %d sessions from %s", index.exchanges, len(cassettes), replay.dir)
        append = bool(replay.dir) and replay.miss == "passthrough"
        writer = self.writer
        directory = Path(record.dir) if record.dir else None
        if directory != (writer.directory if writer is not None else None):
            # A writer per directory: the same directory keeps its writer (and its sessions' files open).
            writer = None
            if directory is not None:
                writer = CassetteWriter(
                    directory, append=append, max_pending_bytes=record.max_pending_bytes, on_count=self.on_recorded
                )
        return TapeSetup(record, replay, index, writer, append)

    def swap(self, setup: TapeSetup) -> CassetteWriter | None:
        """Put a prepared setup in place (on the loop: no I/O); returns the writer it retired, for the
        caller to close off the loop (closing waits for its queue to be written)."""
        retired = self.writer if self.writer is not setup.writer else None
        self.index, self.replay = setup.index, setup.replay
        self.writer, self.record = setup.writer, setup.record
        if self.writer is not None:
            self.writer.append = setup.append
            self.writer.max_pending = setup.record.max_pending_bytes
        return retired

    def configure(self, record: RecordConfig, replay: ReplayConfig, formats: WireFormats) -> None:
        """`prepare` and `swap` in one go, here (start-up); raises CassetteError or OSError for a bad directory."""
        retired = self.swap(self.prepare(record, replay, formats))
        if retired is not None:
            retired.close()

    async def start(self) -> None:
        self.relay = Relay(self.guard, transport=self.transport)
        await self.relay.start()
        await self.ws_replay.start()

    async def stop(self) -> None:
        if self.relay is not None:
            await self.relay.stop()
            self.relay = None
        await self.ws_replay.stop()

    def close(self, timeout_s: float = 5.0) -> None:
        """Flush and close the cassettes (call it off the loop: it waits for the writer thread)."""
        if self.writer is not None:
            self.writer.close(timeout_s)

    # --- hooks -----------------------------------------------------------------------

    def on_decision(self, decision: Decision) -> None:
        """A fault decision (a sink of the engine's decision log): while replaying, a miss may follow it."""
        if self.index is not None:
            self.earlier(decision)

    def on_request(self, flow: http.HTTPFlow, state: FlowState, body: bytes | Uninspected) -> bool:
        """The request goes upstream unless replay takes it: True when it did (answered or routed).

        `body` is the request body as the proxy decoded it under its cap (or why it did not): never
        decoded again here, so a client's compression bomb is matched and recorded as it was sent.

        An OTLP export is the agent's telemetry, not its work: never recorded (a cassette would keep its
        spans, prompts included) nor replayed (a replay would answer it in place of the collector, or
        count it as a miss); it goes to its collector."""
        if not self.active or state.exchange.provider == OTLP:
            return False
        taken = False
        plain = body if isinstance(body, bytes) else None
        if self.index is not None:
            taken = bool(self.guard.call("replay", self._replay, flow, state, plain, context=_where(state)))
        if not taken and self.writer is not None:
            capture = self.guard.call(
                "record",
                Capture,
                flow,
                state.exchange.session,
                self.record.max_body_bytes,
                plain,
                self.secret_headers,
                context="request",
            )
            if capture is not None:
                state.extra[_CAPTURE] = capture
        return taken

    def upstream_clock(self, flow: http.HTTPFlow, state: FlowState, *, paced: bool) -> Callable[[bytes], None] | None:
        """For a recorded exchange whose answer a fault holds back (paced by the relay, or delayed at its
        first byte): what the relay calls with each chunk as upstream delivers it, so the cassette keeps
        upstream's timing. None when there is nothing to correct, or the relay cannot take the flow."""
        capture: Capture | None = state.extra.get(_CAPTURE)
        if capture is None or state.plan is None:
            return None
        if not paced and not (state.plan.holds_response() and effects.can_relay(flow)):
            return None
        return lambda data: self.guard.call("record", capture.upstream, data, context="upstream clock")

    def on_response_headers(self, flow: http.HTTPFlow, state: FlowState) -> None:
        capture: Capture | None = state.extra.get(_CAPTURE)
        if capture is not None:
            self.guard.call("record", capture.response_head, flow, context="response headers")

    def records(self, state: FlowState) -> bool:
        """This exchange is being recorded (its recording reads the parsed answer when it finishes)."""
        return _CAPTURE in state.extra

    def wrap_stream(self, state: FlowState, tap: Callable[[bytes], Any], content_type: str) -> Callable[[bytes], Any]:
        capture: Capture | None = state.extra.get(_CAPTURE)
        if capture is None:
            return tap
        capture.start_stream(content_type)
        return RecordingTap(capture, tap, self.guard)

    def on_response(self, flow: http.HTTPFlow, state: FlowState, body: bytes | Uninspected | None) -> None:
        """A buffered response, with its body as the proxy decoded it under its cap (or why it did not)."""
        capture: Capture | None = state.extra.get(_CAPTURE)
        if capture is not None and capture.rec.status is not None and capture.rec.events is None:
            plain = body if isinstance(body, bytes) else None
            self.guard.call("record", capture.body, flow, plain, context="response body")

    def on_unread(self, state: FlowState, reason: str) -> None:
        """The response body went by unread: the exchange is not recorded (an empty body would pass for upstream's)."""
        capture: Capture | None = state.extra.get(_CAPTURE)
        if capture is not None:
            capture.unrecordable = capture.unrecordable or reason

    def on_ws_message(self, state: FlowState, from_client: bool, content: bytes, is_text: bool) -> None:
        """A message of a realtime session as its sender sent it (before any fault)."""
        capture: Capture | None = state.extra.get(_CAPTURE)
        if capture is not None:
            self.guard.call("record", capture.ws_message, from_client, content, is_text, context="websocket message")

    def on_ws_close(self, state: FlowState, code: int | None, reason: str, by: str | None) -> None:
        capture: Capture | None = state.extra.get(_CAPTURE)
        if capture is not None:
            self.guard.call("record", capture.ws_close, code, reason, by, context="websocket close")

    def _ws_miss(self) -> None:
        self.counts["miss"] += 1
        self.on_replay("miss")

    def on_error(self, flow: http.HTTPFlow, state: FlowState) -> None:
        capture: Capture | None = state.extra.get(_CAPTURE)
        if capture is not None:
            capture.failed(flow.error.msg if flow.error else "connection failed")

    def on_cut(self, state: FlowState, message: str) -> None:
        """brownout itself cut the exchange (shutdown): its recording must not pass for a whole answer."""
        capture: Capture | None = state.extra.get(_CAPTURE)
        if capture is not None:
            capture.failed(message)

    def finish(self, state: FlowState, end: float | None) -> None:
        """The exchange is over: write its recording, free its replay slot."""
        ws_token = state.extra.pop(_WS_TOKEN, None)
        if ws_token is not None:
            self.ws_replay.discard(ws_token)
        tokens = state.extra.pop(_TOKEN, None)
        if tokens is not None:
            self.transport.discard(tokens[0])
            if self.relay is not None:
                self.relay.discard(tokens[1])
        capture: Capture | None = state.extra.pop(_CAPTURE, None)
        if capture is None or self.writer is None:
            return
        if state.tap is not None and state.tap.ended and not capture.ended:
            # A stream fault (truncate, reset) ended the exchange before upstream finished: what was read
            # is not what upstream would have sent, and replayed it would pass the fault off as upstream's.
            capture.unrecordable = capture.unrecordable or "a fault cut it before upstream's answer ended"
        if capture.unrecordable is not None:
            self.not_recorded += 1
            log.info(
                "cassette: not recording %s %s (session %s): %s",
                capture.rec.method,
                capture.rec.url,
                state.exchange.session,
                capture.unrecordable,
            )
            return
        rec = self.guard.call("record", capture.recorded, state.exchange, end, context="finish")
        if rec is not None:
            self.writer.put(rec)

    # --- replay ----------------------------------------------------------------------

    def _replay(self, flow: http.HTTPFlow, state: FlowState, body: bytes | None) -> bool:
        assert self.index is not None
        ex = state.exchange
        if body is None:  # not decoded (too large once decoded, or undecodable): matched as sent
            body = flow.request.raw_content or b""
        info = flowmodel.request_info(flow, _lower(flow.request.headers), body)
        key, normalised = self.index.key(info)
        match = self.index.take(ex.session, key)
        if match is None:
            return self._miss(flow, state, normalised)
        self.counts["hit"] += 1
        self.counts["repeated"] += match.repeated
        self.on_replay("hit")
        ex.replayed = True
        ex.notes["replay"] = {"source": match.source, "repeated": match.repeated}
        if isinstance(state.wire, RealtimeFormat) and self._replay_session(flow, state, match.recorded):
            return True
        if self.relay is not None and effects.can_relay(flow):
            token = self.transport.register(match.stored)
            flow.request.headers[REPLAY_HEADER] = token
            relay_token = effects.route_to_relay(flow, self.relay, state.timing or StreamTiming(), self.guard)
            if relay_token is not None:
                state.extra[_TOKEN] = (token, relay_token)
                return True
            self.transport.discard(token)
            del flow.request.headers[REPLAY_HEADER]
        # No route to the relay (upstream mode: it would go through the upstream proxy): answered here,
        # whole and at once, with the recorded head and body (read from its file here, on the loop).
        rec = match.recorded
        body = b"".join(e.data for e in rec.events) if rec.events is not None else rec.body or b""
        flow.response = http.Response.make(rec.status or 502, body, mitm_headers(rec.response_headers))
        return True

    def _replay_session(self, flow: http.HTTPFlow, state: FlowState, rec: Any) -> bool:
        """A recorded realtime session: the upgrade goes to the WebSocket replay server, which plays it."""
        if rec.messages is None or not self.ws_replay.port or not effects.can_relay(flow):
            return False
        token = self.ws_replay.register(rec)
        host_header = flow.request.host_header
        flow.request.scheme, flow.request.host, flow.request.port = "http", "127.0.0.1", self.ws_replay.port
        flow.request.host_header = host_header
        flow.request.headers[WS_TOKEN_HEADER] = token
        state.extra[_WS_TOKEN] = token
        return True

    def _miss(self, flow: http.HTTPFlow, state: FlowState, normalised: dict[str, Any]) -> bool:
        ex = state.exchange
        shown = json.dumps(normalised, sort_keys=True, ensure_ascii=False, default=str)
        if len(shown) > _SHOWN_MAX:
            shown = shown[:_SHOWN_MAX] + "..."
        where = _where(state)
        fault = self.earlier.before(ex.session, ex.id)
        # A fault changes what the agent sees, so what it sends next may never have been recorded.
        cause = (
            f"; {fault.describe()} fired earlier in this session and may be why: "
            "after it the agent may send what it never sent while recording"
            if fault is not None
            else ""
        )
        if self.replay.miss == "passthrough":
            self.counts["passthrough"] += 1
            self.on_replay("passthrough")
            ex.notes["replay"] = {"miss": "passthrough"}
            log.warning(
                "replay miss, forwarded upstream (session %s): %s%s; normalised request %s",
                ex.session,
                where,
                cause,
                shown,
            )
            return False
        self.counts["miss"] += 1
        self.on_replay("miss")
        ex.notes["replay"] = {"miss": "error"}
        log.warning("replay miss (session %s): %s%s; normalised request %s", ex.session, where, cause, shown)
        message = (
            f"brownout replay: no recorded answer for {where} (session {ex.session}){cause}; "
            "see brownout's log for the normalised request"
        )
        error_response = getattr(state.wire, "error_response", None)
        if error_response is not None:
            status, headers, body = error_response(MISS_STATUS, "brownout_replay_miss", message, exchange=ex)
        else:
            status, headers, body = MISS_STATUS, dict(JSON_HEADERS), json.dumps({"error": message}).encode()
        flow.response = http.Response.make(status, body, {**headers, REPLAY_HEADER: "miss"})
        return True


def _where(state: FlowState) -> str:
    ex = state.exchange  # its path is already without secrets
    return f"{ex.method} {ex.host}{ex.path}"


def _lower(headers: http.Headers) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items(multi=True)}
