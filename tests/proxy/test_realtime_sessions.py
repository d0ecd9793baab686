"""Realtime sessions through a real brownout, with the official clients: the openai SDK's realtime client
and google-genai's live client find the proxy and its CA in the environment alone. Each server-side
generation becomes a `realtime_inference` span; the session is its own exchange, with the GenAI session
events; metrics count sessions, generations and close codes; other WebSockets pass untouched."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from websockets.sync.client import connect
from websockets.sync.server import ServerConnection, serve

from brownout.proxy.embed import ProxyHandle
from tests.proxy.realtime_clients import (
    Recorder,
    ask_weather,
    gemini_session,
    gemini_weather_turn,
    openai_realtime,
    proxy_environment,
    wait_for,
)


@pytest.fixture
def realtime_proxy(
    brownout_proxy: Callable[..., ProxyHandle], upstream_tls: Any, monkeypatch: pytest.MonkeyPatch
) -> Callable[[str], tuple[ProxyHandle, Recorder]]:
    def start(config: str = "seed: 1\n") -> tuple[ProxyHandle, Recorder]:
        proxy = brownout_proxy(config, upstream=upstream_tls)
        proxy_environment(monkeypatch, proxy)
        return proxy, Recorder(proxy)

    return start


def test_openai_realtime_generations_become_realtime_inference_spans(realtime_proxy: Any, upstream_tls: Any) -> None:
    _proxy, rec = realtime_proxy()
    with openai_realtime(upstream_tls) as conn:
        _first, second = ask_weather(conn)
    assert second[-1].response.status == "completed"
    assert wait_for(lambda: len(rec.sessions()) == 1)
    (session,) = rec.sessions()
    calls, answer = rec.generations()
    info = session.realtime
    assert info is not None and info.session_id.startswith("sess_") and not info.minted
    assert (info.close_code, info.closed_by, info.generations) == (1000, "client", 2)
    assert calls.finish_reasons == ["tool_call"] and calls.tool_calls[0].name == "get_weather"
    assert json.loads(calls.tool_calls[0].arguments) == {"city": "Paris"}
    assert answer.output_text == "It is 18°C and cloudy in Paris." and answer.usage.output_tokens == 20
    assert upstream_tls.requests_seen[-1].path.startswith("/v1/realtime?model=gpt-realtime")  # really proxied

    spans = {s.name: s for s in rec.spans()}
    gen = spans["realtime_inference gpt-realtime"]
    attrs = dict(gen.attributes or {})
    assert attrs["gen_ai.operation.name"] == "realtime_inference" and attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.live_session.id"] == info.session_id and attrs["gen_ai.request.model"] == "gpt-realtime"
    assert attrs["gen_ai.usage.input_tokens"] == 40 and "gen_ai.response.time_to_first_chunk" in attrs
    assert attrs["server.address"] == "127.0.0.1"
    sess = spans["realtime_session gpt-realtime"]
    events = [e.name for e in sess.events]
    assert events == ["gen_ai.client.live_session.started", "gen_ai.client.live_session.ended"]
    assert sess.events[1].attributes["brownout.realtime.close_code"] == 1000  # type: ignore[index]
    assert (sess.attributes or {}).get("gen_ai.operation.name") is None  # the session is not a GenAI operation
    # Spans of one session share a trace (the brownout session's): a trace viewer shows them together.
    assert len({s.context.trace_id for s in rec.spans()}) == 1

    assert rec.metric("brownout_websocket_sessions_total", {"provider": "openai_realtime"}) == 1
    assert rec.metric("brownout_websocket_closes_total", {"provider": "openai_realtime", "code": "1000"}) == 1
    labels = {"provider": "openai_realtime", "status": "completed"}
    assert rec.metric("brownout_realtime_generations_total", labels) == 2
    count = "brownout_realtime_time_to_first_delta_seconds_count"
    assert rec.metric(count, {"provider": "openai_realtime"}) == 2
    assert rec.metric("brownout_websocket_sessions_active", {"provider": "openai_realtime"}) == 0


def test_completions_rationed_behind_live_events_keep_their_order(realtime_proxy: Any, upstream_tls: Any) -> None:
    """Ended generations and sessions complete after live events when they would crowd them (proxy/rationed.py):
    here one per 0.2 s window. The session still completes after its generations, and the client saw no delay."""
    proxy, rec = realtime_proxy()
    lane = proxy.addon.realtime.ended
    lane.budget_s, lane.window_s = 1e-6, 0.2
    with openai_realtime(upstream_tls) as conn:
        _first, second = ask_weather(conn)
    assert second[-1].response.status == "completed"
    assert wait_for(lambda: len(rec.sessions()) == 1)
    kinds = [e.realtime.kind for e in rec.exchanges if e.realtime is not None]
    assert kinds == ["generation", "generation", "session"]
    assert lane.deferred >= 1 and lane.pending == 0


def test_gemini_live_through_google_genai(realtime_proxy: Any, upstream_tls: Any) -> None:
    _proxy, rec = realtime_proxy()
    got = gemini_session(upstream_tls, gemini_weather_turn)
    assert got[0].tool_call is not None and any(m.server_content and m.server_content.turn_complete for m in got)
    assert wait_for(lambda: len(rec.sessions()) == 1)
    (session,) = rec.sessions()
    assert session.model == "gemini-live-2.5-flash" and session.provider == "gemini_live"
    info = session.realtime
    assert info is not None and info.minted and info.resumption_offered and info.generations == 2
    spans = [s for s in rec.spans() if s.name == "realtime_inference gemini-live-2.5-flash"]
    assert len(spans) == 2
    assert {dict(s.attributes or {})["gen_ai.provider.name"] for s in spans} == {"gcp.gemini"}
    assert {dict(s.attributes or {})["gen_ai.live_session.id"] for s in spans} == {info.session_id}


def test_a_message_that_is_not_json_passes_and_the_session_goes_on(realtime_proxy: Any, upstream_tls: Any) -> None:
    proxy, rec = realtime_proxy()
    ssl = __import__("ssl").create_default_context(cafile=str(proxy.ca_bundle_path))
    url = upstream_tls.url.replace("https://", "wss://") + "/v1/realtime?model=m"
    with connect(url, proxy=proxy.url, ssl=ssl, open_timeout=10) as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "session.created"
        ws.send("this is not JSON")
        err = json.loads(ws.recv(timeout=10))
        assert err["type"] == "error" and err["error"]["code"] == "invalid_json"  # the server saw it unchanged
        ws.send(json.dumps({"type": "response.create"}))
        kinds = []
        while not kinds or kinds[-1] != "response.done":
            kinds.append(json.loads(ws.recv(timeout=10))["type"])
    assert wait_for(lambda: rec.sessions())
    assert rec.sessions()[0].parse_error_reason == "invalid_json" and len(rec.generations()) == 1


@pytest.fixture
def echo_url() -> Iterator[str]:
    def echo(ws: ServerConnection) -> None:
        for message in ws:
            ws.send(message)

    with serve(echo, "127.0.0.1", 0) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield f"ws://127.0.0.1:{server.socket.getsockname()[1]}/chat"
        server.shutdown()
        thread.join(5)


def test_other_websockets_pass_untouched_and_are_counted(realtime_proxy: Any, echo_url: str) -> None:
    proxy, rec = realtime_proxy()
    with connect(echo_url, proxy=proxy.url, open_timeout=10) as ws:
        ws.send('{"type": "response.create"}')  # looks like a realtime event: still not one to brownout
        assert ws.recv(timeout=10) == '{"type": "response.create"}'
        ws.send(b"\x00\x01")
        assert ws.recv(timeout=10) == b"\x00\x01"
    assert wait_for(lambda: rec.metric("brownout_websocket_closes_total", {"provider": "http", "code": "1000"}))
    assert rec.metric("brownout_websocket_sessions_total", {"provider": "http"}) == 1
    assert not rec.sessions() and not rec.generations()
    assert [e.status for e in rec.exchanges] == [101]  # the upgrade, an exchange as before
