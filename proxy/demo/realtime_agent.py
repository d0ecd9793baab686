"""A small realtime agent on the openai SDK's realtime client, written to survive session faults and report them.

Each turn asks for the weather: the model calls get_weather, the agent runs it against the JSON tool API and
sends the result back, and the model answers in text. Arguments that do not parse go back to the model as the
tool's error; an error event is noted; a session that closes on the agent (the 60-minute cap: session_expired,
then close 1001) or drops (1006) is reopened after a backoff and the turn asked again. It reads the proxy from
the environment (HTTPS_PROXY/HTTP_PROXY/SSL_CERT_FILE), so it runs unchanged under `brownout exec`.
Run: `python -m brownout.proxy.demo.realtime_agent --upstream URL [--turns N] [--pause-s S] [--json]`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx
import openai
from websockets.exceptions import ConnectionClosed

__all__ = ["RealtimeSummary", "Turn", "main", "run_realtime_agent"]

log = logging.getLogger(__name__)

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
QUESTION = "What's the weather in Paris right now?"
BACKOFF_S = 0.5  # before the first reconnect; doubled each time, up to 4 s


@dataclass
class Turn:
    """One question and how it went."""

    n: int
    ok: bool = False
    answer: str | None = None
    sessions: int = 0  # sessions the turn needed (more than one: it was asked again after a reconnect)
    tool_errors: int = 0  # tool calls whose arguments did not parse (sent back to the model as an error)
    status: str | None = None  # the last response.done's status


@dataclass
class RealtimeSummary:
    """What the agent did: its turns, the sessions it opened, how they ended, the error events it got."""

    turns: list[Turn]
    sessions: int = 0
    closed_on_us: list[int] = field(default_factory=list)  # close codes of sessions that ended under the agent
    error_events: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def errors(self) -> int:
        return sum(not t.ok for t in self.turns)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "errors": self.errors}


class _Agent:
    def __init__(self, upstream: str, tools_url: str, model: str, max_reconnects: int) -> None:
        self.oai = openai.OpenAI(
            base_url=upstream.rstrip("/") + "/v1", api_key=os.environ.get("OPENAI_API_KEY", "sk-demo"), max_retries=0
        )
        self.http = httpx.Client(base_url=tools_url.rstrip("/"), timeout=10.0)
        self.model = model
        self.max_reconnects = max_reconnects
        self.summary = RealtimeSummary(turns=[])
        self._manager: Any = None
        self.conn: Any = None

    def open(self) -> None:
        self._manager = self.oai.realtime.connect(model=self.model)
        self.conn = self._manager.enter()
        self.summary.sessions += 1
        self.conn.session.update(session={"type": "realtime", "output_modalities": ["text"], "tools": [WEATHER_TOOL]})

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        self.http.close()

    def turn(self, n: int) -> Turn:
        """Ask the question; after a closed or dropped session, reconnect with backoff and ask again."""
        turn = Turn(n)
        for attempt in range(self.max_reconnects + 1):
            turn.sessions += 1
            try:
                self._ask(turn)
                return turn
            except ConnectionClosed as closed:
                code = closed.rcvd.code if closed.rcvd is not None else 1006  # no close frame: the line dropped
                self._drain()
                self.summary.closed_on_us.append(code)
                log.warning("turn %d: the session closed (%d); reconnecting", n, code)
                if attempt == self.max_reconnects:
                    break
                time.sleep(min(BACKOFF_S * 2**attempt, 4.0))
                self.open()
        return turn

    def _ask(self, turn: Turn) -> None:
        conn = self.conn
        item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": QUESTION}]}
        conn.conversation.item.create(item=item)
        conn.response.create()
        while True:
            done, call = self._until_done(turn)
            turn.status = done.response.status
            if call is None:
                turn.answer = "".join(
                    part.text or ""
                    for out in done.response.output or []
                    for part in getattr(out, "content", None) or []
                )
                turn.ok = turn.status == "completed"
                return
            output = {"type": "function_call_output", "call_id": call.call_id, "output": self._run_tool(turn, call)}
            conn.conversation.item.create(item=output)
            conn.response.create()

    def _drain(self) -> None:
        """What the server said before it closed (the reason, often) and the agent had not read yet."""
        try:
            while True:
                event = self.conn.recv()
                if event.type == "error":
                    self.summary.error_events.append(event.error.code or event.error.type)
        except ConnectionClosed:
            return

    def _until_done(self, turn: Turn) -> tuple[Any, Any]:
        """Events up to response.done: it, and the tool call it asked for (None: it answered)."""
        call = None
        while True:
            event = self.conn.recv()  # ConnectionClosed, with the close code, when the session ends
            if event.type == "error":
                self.summary.error_events.append(event.error.code or event.error.type)
            elif event.type == "response.function_call_arguments.done":
                call = event
            elif event.type == "response.done":
                return event, call

    def _run_tool(self, turn: Turn, call: Any) -> str:
        try:
            args = json.loads(call.arguments or "{}")
        except ValueError as e:
            turn.tool_errors += 1
            return json.dumps({"error": f"get_weather: arguments are not JSON ({e})"})
        r = self.http.get("/tools/weather", params={"city": str(args.get("city", "Paris"))})
        return r.text if r.status_code == 200 else json.dumps({"error": f"weather API answered {r.status_code}"})


def run_realtime_agent(
    upstream: str,
    *,
    tools_url: str | None = None,
    model: str = "gpt-realtime",
    turns: int = 3,
    pause_s: float = 0.0,
    max_reconnects: int = 3,
) -> RealtimeSummary:
    """Run `turns` turns in one realtime session against `upstream` (reopened when it closes on the agent)."""
    agent = _Agent(upstream, tools_url or upstream, model, max_reconnects)
    started = time.perf_counter()
    try:
        agent.open()
        for n in range(1, turns + 1):
            if n > 1:
                time.sleep(pause_s)  # a voice agent waits for the user between turns
            agent.summary.turns.append(agent.turn(n))
    finally:
        agent.close()
    agent.summary.elapsed_s = round(time.perf_counter() - started, 3)
    return agent.summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m brownout.proxy.demo.realtime_agent", description=__doc__)
    parser.add_argument(
        "--upstream",
        default=os.environ.get("BROWNOUT_DEMO_UPSTREAM", "http://127.0.0.1:8000"),
        help="base URL of the Realtime API (the mock upstream, or brownout in reverse mode)",
    )
    parser.add_argument("--tools-url", default=None, help="base URL of the JSON tool API (default: --upstream)")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--pause-s", type=float, default=0.0, help="seconds between turns")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    result = run_realtime_agent(args.upstream, tools_url=args.tools_url, turns=args.turns, pause_s=args.pause_s)
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        for t in result.turns:
            print(
                f"turn {t.n}: {'ok' if t.ok else 'FAILED'} in {t.sessions} session(s), "
                f"{t.tool_errors} tool error(s): {t.answer}"
            )
        closes = ", ".join(str(c) for c in result.closed_on_us) or "none"
        print(f"sessions opened: {result.sessions}; closed on the agent: {closes}; error events: {result.error_events}")
    return 0 if result.errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
