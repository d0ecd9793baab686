"""Faults on realtime sessions reach the official clients as the real failures do: the openai SDK surfaces the
error event, a session cap is `session_expired` then close 1001, Gemini's goAway then 1011 (google-genai's
APIError), a rejected resumption 1008, a reset 1006, a refused upgrade the provider's HTTP error."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from google.genai import errors as genai_errors
from websockets.exceptions import ConnectionClosed, ConnectionClosedError, InvalidStatus

from brownout.proxy.embed import ProxyHandle
from tests.proxy.realtime_clients import (
    Recorder,
    ask_weather,
    gemini_session,
    gemini_weather_turn,
    openai_realtime,
    proxy_environment,
    until,
    wait_for,
)


@pytest.fixture
def chaos(
    brownout_proxy: Callable[..., ProxyHandle], upstream_tls: Any, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., tuple[ProxyHandle, Recorder]]:
    """A proxy with these rules (YAML list items), the client environment pointing at it."""

    def start(*rules: str, invariants: str = "") -> tuple[ProxyHandle, Recorder]:
        config = "seed: 7\nrules:\n" + "".join(f"  - {rule}\n" for rule in rules) + invariants
        proxy = brownout_proxy(config, upstream=upstream_tls)
        proxy_environment(monkeypatch, proxy)
        return proxy, Recorder(proxy)

    return start


def _events_until_closed(conn: Any) -> tuple[list[Any], ConnectionClosed]:
    seen = []
    while True:
        try:
            seen.append(conn.recv())
        except ConnectionClosed as closed:
            return seen, closed


def _say_hello(conn: Any) -> None:
    """A turn the mock answers in text (the connection declares no tools)."""
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hello"}]}
    conn.conversation.item.create(item=item)
    conn.response.create()


@pytest.mark.parametrize(
    ("status", "code"), [(401, "invalid_api_key"), (429, "rate_limit_exceeded"), (503, "server_is_overloaded")]
)
def test_a_refused_upgrade_is_the_providers_error(chaos: Any, upstream_tls: Any, status: int, code: str) -> None:
    _, rec = chaos(
        f"{{name: refuse, match: {{provider: openai_realtime}}, fault: {{type: http_error, status: {status}}}}}"
    )
    with pytest.raises(InvalidStatus) as refused, openai_realtime(upstream_tls):
        pass
    response = refused.value.response
    assert response.status_code == status and json.loads(response.body)["error"]["code"] == code
    assert wait_for(lambda: rec.exchanges)
    (ex,) = rec.exchanges
    assert ex.status == status and [f.fault for f in ex.faults] == ["http_error"] and ex.realtime is None
    assert not any(s.path.startswith("/v1/realtime") for s in upstream_tls.requests_seen)  # never reached


def test_the_session_cap_is_session_expired_then_close_1001(chaos: Any, upstream_tls: Any) -> None:
    _, rec = chaos("{name: cap, match: {provider: openai_realtime, event: response.done}, fault: {type: close}}")
    with openai_realtime(upstream_tls, tools=False) as conn:
        _say_hello(conn)
        seen, closed = _events_until_closed(conn)
    assert [e.type for e in seen][-2:] == ["response.done", "error"]
    assert seen[-1].error.code == "session_expired" and "60 minutes" in seen[-1].error.message
    assert closed.rcvd is not None and closed.rcvd.code == 1001
    assert wait_for(lambda: rec.sessions())
    info = rec.sessions()[0].realtime
    assert info is not None and (info.close_code, info.closed_by, info.last_error) == (
        1001,
        "brownout",
        "session_expired",
    )
    (gen,) = rec.generations()
    assert [(f.rule, f.fault) for f in gen.faults] == [("cap", "close")]  # on the span of the generation it ended


def test_a_session_cap_by_age_needs_no_event(chaos: Any, upstream_tls: Any) -> None:
    _, rec = chaos("{name: cap, match: {provider: openai_realtime}, fault: {type: close, after_s: 0.3}}")
    with openai_realtime(upstream_tls) as conn:
        seen, closed = _events_until_closed(conn)  # the agent only listens: the clock ends the session
    assert seen[-1].type == "error" and seen[-1].error.code == "session_expired"
    assert closed.rcvd is not None and closed.rcvd.code == 1001
    assert wait_for(lambda: rec.sessions())
    assert [f.fault for f in rec.sessions()[0].faults] == ["close"]  # decided at the upgrade


def test_gemini_go_away_then_1011_reaches_google_genai(chaos: Any, upstream_tls: Any) -> None:
    _, rec = chaos(
        "{name: away, match: {provider: gemini_live, event: serverContent}, fault: {type: close, warning_ms: 100}, schedule: {first: 1}}"
    )

    async def body(session: Any) -> list[Any]:
        got: list[Any] = []
        with pytest.raises(genai_errors.APIError) as err:
            await gemini_weather_turn(session, got)
            async for msg in session.receive():
                got.append(msg)
        got.append(err.value)
        return got

    got = gemini_session(upstream_tls, body)
    assert any(getattr(m, "go_away", None) is not None and m.go_away.time_left == "0.1s" for m in got)
    assert got[-1].code == 1011
    assert wait_for(lambda: rec.sessions())
    assert rec.sessions()[0].realtime.close_code == 1011  # type: ignore[union-attr]


def test_a_rejected_resumption_is_1008(chaos: Any, upstream_tls: Any) -> None:
    chaos(
        "{name: no-resume, match: {provider: gemini_live, event: setup, direction: client}, "
        "fault: {type: close, code: 1008, reason: 'Session resumption handle is invalid.', warning: false}}"
    )

    async def body(session: Any) -> None:
        raise AssertionError("the session opened")

    with pytest.raises(genai_errors.APIError) as err:
        gemini_session(upstream_tls, body, resume="handle-from-before")
    assert err.value.code == 1008 and "resumption" in str(err.value)


def test_an_error_event_mid_session_is_the_one_the_sdk_parses(chaos: Any, upstream_tls: Any) -> None:
    _, rec = chaos(
        "{name: boom, match: {event: response.output_text.delta}, "
        "fault: {type: http_error, mid_stream: true, status: 500}, schedule: {first: 1}}"
    )
    with openai_realtime(upstream_tls, tools=False) as conn:
        _say_hello(conn)
        seen = until(conn, "response.done")
    errors = [e for e in seen if e.type == "error"]
    assert len(errors) == 1 and errors[0].error.type == "server_error" and errors[0].error.code == "server_error"
    assert seen.index(errors[0]) < seen.index(next(e for e in seen if e.type == "response.output_text.delta"))
    assert wait_for(lambda: rec.generations())
    (gen,) = rec.generations()
    assert gen.error_type == "server_error" and gen.faults[0].fault == "http_error"
    assert not gen.output_text.startswith("Hello!")  # the first delta was replaced by the error


def test_a_reset_is_1006(chaos: Any, upstream_tls: Any) -> None:
    _, rec = chaos(
        "{name: rst, match: {event: response.output_text.delta}, fault: {type: reset}, schedule: {first: 1}}"
    )
    with openai_realtime(upstream_tls, tools=False) as conn:
        _say_hello(conn)
        seen, closed = _events_until_closed(conn)
    # No close frame either way: the connection dropped, which websockets (and the SDK's reconnect policy) read as 1006.
    assert isinstance(closed, ConnectionClosedError) and closed.rcvd is None and closed.sent is None
    assert "response.output_text.delta" not in [e.type for e in seen]
    assert wait_for(lambda: rec.sessions())
    assert rec.sessions()[0].realtime.closed_by == "brownout"  # type: ignore[union-attr]
    (gen,) = rec.generations()
    assert gen.stream_complete is False and gen.faults[0].fault == "reset"  # cut: no response.done reached the client


@pytest.mark.parametrize("status", ["incomplete", "failed"])
def test_a_truncated_generation_ends_early_with_its_status(chaos: Any, upstream_tls: Any, status: str) -> None:
    _, rec = chaos(
        "{name: cut, match: {event: response.output_text.delta}, "
        f"fault: {{type: truncate, after_events: 1, status: {status}}}, schedule: {{first: 1}}}}"
    )
    with openai_realtime(upstream_tls, tools=False) as conn:
        _say_hello(conn)
        seen = until(conn, "response.done")
        _say_hello(conn)  # the session goes on: the next generation is whole
        after = until(conn, "response.done")
    assert [e.type for e in seen].count("response.output_text.delta") == 1
    assert seen[-1].response.status == status
    assert after[-1].response.status == "completed" and not any(e.type == "response.done" for e in after[:-1])
    assert wait_for(lambda: len(rec.generations()) == 2)
    cut, whole = rec.generations()
    assert cut.realtime.status == status and cut.output_text == "Hello! This is a d"  # type: ignore[union-attr]
    assert whole.realtime.status == "completed"  # type: ignore[union-attr]


def test_a_malformed_tool_call_breaks_everywhere_and_tool_arguments_json_sees_it(chaos: Any, upstream_tls: Any) -> None:
    _, rec = chaos(
        "{name: bad-args, match: {event: response.function_call_arguments.done, tool: get_weather}, "
        "fault: {type: malformed_json, target: tool_arguments}}",
        invariants="invariants:\n  - {type: tool_arguments_json}\n",
    )
    with openai_realtime(upstream_tls) as conn:
        first, _ = ask_weather(conn)
    done = next(e for e in first if e.type == "response.function_call_arguments.done")
    item = next(e for e in first if e.type == "response.output_item.done")
    with pytest.raises(json.JSONDecodeError):
        json.loads(done.arguments)
    assert item.item.arguments == done.arguments == first[-1].response.output[0].arguments  # one broken text
    assert wait_for(lambda: rec.violations())
    (violation,) = rec.violations()
    assert violation["invariant"] == "tool_arguments_json" and "not valid JSON" in violation["message"]
    assert violation["provider"] == "openai_realtime"


def test_rate_limits_with_nothing_left(chaos: Any, upstream_tls: Any) -> None:
    chaos("{name: limits, match: {event: rate_limits.updated}, fault: {type: rate_limits, reset_s: 20}}")
    with openai_realtime(upstream_tls, tools=False) as conn:
        _say_hello(conn)
        until(conn, "response.done")
        update = until(conn, "rate_limits.updated")[-1]
    assert [(r.name, r.remaining, r.reset_seconds) for r in update.rate_limits] == [
        ("requests", 0, 20),
        ("tokens", 0, 20),
    ]


def test_drop_and_duplicate(chaos: Any, upstream_tls: Any) -> None:
    _, rec = chaos(
        "{name: lose, match: {event: response.output_text.delta}, fault: {type: drop}, schedule: {first: 1}}",
        "{name: twice, match: {event: response.output_text.done}, fault: {type: duplicate, copies: 2}}",
    )
    with openai_realtime(upstream_tls, tools=False) as conn:
        _say_hello(conn)
        seen = until(conn, "response.done")
    deltas = [e.delta for e in seen if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "eterministic answer from the brownout mock upstream."
    assert [e.type for e in seen].count("response.output_text.done") == 3
    assert wait_for(lambda: rec.generations())
    assert sorted(f.fault for f in rec.generations()[0].faults) == ["drop", "duplicate"]


def test_a_fault_that_cannot_act_on_the_event_is_recorded_as_skipped(chaos: Any, upstream_tls: Any) -> None:
    proxy, rec = chaos(
        "{name: limits, match: {provider: gemini_live, event: serverContent}, fault: {type: rate_limits}}"
    )
    got = gemini_session(upstream_tls, gemini_weather_turn)
    assert any(m.server_content and m.server_content.turn_complete for m in got)  # the session went on
    assert wait_for(lambda: len(rec.generations()) == 2)
    skipped = [f for g in rec.generations() for f in g.faults_skipped]
    assert skipped and all("sends no rate-limit updates" in f.params["skipped"] for f in skipped)
    assert not any(g.faults for g in rec.generations())
    outcomes = {d.outcome for d in proxy.addon.engine.decisions.recent()}
    assert "skipped_not_applicable" in outcomes
