"""Realtime sessions recorded (both directions, every message with its time) and replayed with the upstream gone:
the openai SDK's realtime client and google-genai's live client run the same conversation from the cassette,
server events arriving at their recorded times once the client's events match, with faults still acting."""

from __future__ import annotations

import itertools
import json
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from brownout.proxy.embed import ProxyHandle
from brownout.proxy.record.cassette import read_dir
from tests.proxy.realtime_clients import (
    Recorder,
    ask_weather,
    gemini_session,
    gemini_weather_turn,
    openai_realtime,
    proxy_environment,
    wait_for,
)
from tests.record.support import mock_upstream

Conversation = Callable[[Any], Any]


@pytest.fixture
def record_then_replay(
    brownout_proxy: Callable[..., ProxyHandle], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Callable[..., tuple[Any, Any, Recorder]]:
    """Run `conversation(upstream)` recording, then again replaying with the upstream gone (nothing listens on
    its port any more: a CI run needs no key and no network). Both results and the replay's recorder.

    `replay`: more keys of the replay section (`speed: 0`); `rules`: YAML appended to the replay's config."""

    def run(conversation: Conversation, *, replay: str = "", rules: str = "") -> tuple[Any, Any, Recorder]:
        cassettes = tmp_path / "cassettes"
        with mock_upstream(tls=True) as up:
            recording = brownout_proxy(f"seed: 1\nrecord: {{dir: {cassettes}}}\n", upstream=up)
            proxy_environment(monkeypatch, recording)
            first = conversation(up)
            wait_for(lambda: recording.addon.in_flight == 0 and not recording.addon.realtime.sessions)
            recording.addon.tape.close()
        replaying = brownout_proxy(f"seed: 1\nreplay: {{dir: {cassettes}{replay}}}\n{rules}")
        proxy_environment(monkeypatch, replaying)
        rec = Recorder(replaying)
        return first, conversation(up), rec

    return run


def _types(events: list[Any]) -> list[str]:
    return [e.type for e in events]


def test_an_openai_realtime_session_replays_from_its_cassette(record_then_replay: Any, tmp_path: Path) -> None:
    def conversation(up: Any) -> tuple[list[Any], list[Any]]:
        with openai_realtime(up) as conn:
            return ask_weather(conn)

    (calls, answer), (calls2, answer2), rec = record_then_replay(conversation)
    assert _types(calls2) == _types(calls) and _types(answer2) == _types(answer)
    assert answer2[-1].response.output[0].content[0].text == "It is 18°C and cloudy in Paris."
    (cassette,) = read_dir(tmp_path / "cassettes")
    (session,) = cassette.exchanges
    assert session.status == 101 and session.close is not None and session.close.by == "client"
    directions = {m.from_client for m in session.messages or []}
    assert directions == {True, False} and all(0 <= m.t < 30 for m in session.messages or [])
    assert wait_for(lambda: len(rec.generations()) == 2)
    assert all(g.replayed for g in rec.generations()) and rec.generations()[0].tool_calls[0].name == "get_weather"


def paced_generation(up: Any) -> list[float]:
    """One generation whose deltas the mock spaces (about 0.6 s in all): when each event arrived."""
    paced = {"x-mock-chunk-delay-ms": "150"}
    with openai_realtime(up, tools=False, extra_headers=paced) as conn:
        conn.response.create()
        stamps = []
        for event in conn:
            stamps.append(time.monotonic())
            if event.type == "response.done":
                return [t - stamps[0] for t in stamps]
    raise AssertionError("no response.done")


def test_recorded_timing_is_kept(record_then_replay: Any) -> None:
    first, second, _ = record_then_replay(paced_generation)
    assert len(first) == len(second) and first[-1] > 0.45
    # The generation takes as long replayed as it did live: within half its 0.6 s of pacing (a loaded machine
    # stretches either run by a tenth of a second or two), and a replay that dropped the pacing would miss.
    assert abs(second[-1] - first[-1]) < 0.3
    gaps = [b - a for a, b in itertools.pairwise(second)]
    assert max(gaps) > 0.1  # the deltas keep their spacing


def test_replay_speed_zero_sends_at_once(record_then_replay: Any) -> None:
    first, second, _ = record_then_replay(paced_generation, replay=", speed: 0")
    assert len(first) == len(second) and first[-1] > 0.45
    # The recorded 0.6 s of pacing is gone: the replay is shorter by at least half of it. Both runs pay the same
    # proxy and client time, so a busy machine stretches both, not just the replay.
    assert second[-1] < first[-1] - 0.3


def test_a_client_that_leaves_mid_replay_ends_the_session_quietly(record_then_replay: Any) -> None:
    """Recorded whole, replayed to a client that hangs up at the first delta while the recorded deltas are still
    due: replay stops, nothing is a failure (the `brownout_proxy` fixture fails the test on any contained
    component failure)."""
    runs: list[str] = []

    def whole_then_leave(up: Any) -> int:
        runs.append("run")
        if len(runs) == 1:
            return len(paced_generation(up))
        with openai_realtime(up, tools=False) as conn:
            conn.response.create()
            for event in conn:
                if event.type == "response.output_text.delta":
                    return 1
        raise AssertionError("no delta")

    events, left, rec = record_then_replay(whole_then_leave)
    assert events > 3 and left == 1
    assert wait_for(lambda: rec.sessions())
    assert rec.sessions()[0].realtime.closed_by == "client"  # type: ignore[union-attr]
    time.sleep(0.6)  # the recorded deltas still due (150 ms apart) fall inside this wait


def test_faults_act_on_a_replayed_session(record_then_replay: Any) -> None:
    cap = "rules:\n  - {name: cap, match: {provider: openai_realtime, event: response.done}, fault: {type: close}, schedule: {first: 1}}\n"

    def conversation(up: Any) -> list[str]:
        from websockets.exceptions import ConnectionClosed

        seen = []
        with openai_realtime(up) as conn:
            try:
                ask_weather(conn)
                seen.append("finished")
            except (ConnectionClosed, AssertionError):
                seen.append("closed")
        return seen

    first, second, rec = record_then_replay(conversation, rules=cap)
    assert first == ["finished"] and second == ["closed"]
    assert wait_for(lambda: rec.sessions())
    assert rec.sessions()[0].realtime.closed_by == "brownout"  # type: ignore[union-attr]


def test_a_gemini_live_session_replays(record_then_replay: Any) -> None:
    def conversation(up: Any) -> list[str]:
        got = gemini_session(up, gemini_weather_turn)
        return [json.dumps(m.model_dump(exclude_none=True), sort_keys=True) for m in got]

    first, second, rec = record_then_replay(conversation)
    assert second == first
    assert wait_for(lambda: len(rec.generations()) == 2)


def _talk(proxy: ProxyHandle, up: Any, text: str) -> list[str]:
    """A raw websockets client: one user message, then every event type until the line is quiet."""
    from websockets.sync.client import connect

    url = up.url.replace("https://", "wss://") + "/v1/realtime?model=m"
    ctx = ssl.create_default_context(cafile=str(proxy.ca_bundle_path))
    kinds = []
    with connect(url, proxy=proxy.url, ssl=ctx, open_timeout=10) as ws:
        kinds.append(json.loads(ws.recv(timeout=5))["type"])
        item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        ws.send(json.dumps({"type": "conversation.item.create", "event_id": f"e-{text}", "item": item}))
        try:
            while True:
                kinds.append(json.loads(ws.recv(timeout=1.5))["type"])
        except TimeoutError:
            return kinds


def _record_then_replay_raw(
    brownout_proxy: Callable[..., ProxyHandle], tmp_path: Path, text: str
) -> tuple[ProxyHandle, Recorder, Any]:
    cassettes = tmp_path / "c"
    with mock_upstream(tls=True) as up:
        recording = brownout_proxy(f"seed: 1\nrecord: {{dir: {cassettes}}}\n", upstream=up)
        assert _talk(recording, up, text) == ["session.created", "conversation.item.added", "conversation.item.done"]
        wait_for(lambda: not recording.addon.realtime.sessions)
        recording.addon.tape.close()
    replaying = brownout_proxy(f"seed: 1\nreplay: {{dir: {cassettes}}}\n")
    return replaying, Recorder(replaying), up


def test_a_client_message_the_recording_lacks_is_a_replay_miss(
    brownout_proxy: Callable[..., ProxyHandle], tmp_path: Path
) -> None:
    replaying, rec, up = _record_then_replay_raw(brownout_proxy, tmp_path, "Hello")
    assert _talk(replaying, up, "Hello") == ["session.created", "conversation.item.added", "conversation.item.done"]
    assert rec.metric("brownout_replay_requests_total", {"outcome": "miss"}) == 0  # event ids differ: no matter
    assert _talk(replaying, up, "Goodbye") == ["session.created"]  # the recording's answer waits for "Hello"
    assert rec.metric("brownout_replay_requests_total", {"outcome": "miss"}) == 1


def test_secrets_in_messages_are_not_recorded_and_still_match(
    brownout_proxy: Callable[..., ProxyHandle], tmp_path: Path
) -> None:
    key = "sk-proj-" + "A1b2C3d4" * 5
    replaying, rec, up = _record_then_replay_raw(brownout_proxy, tmp_path, f"my key is {key}")
    text = "".join(p.read_text() for p in (tmp_path / "c").rglob("*") if p.is_file())
    assert "conversation.item.create" in text and key not in text and "REDACTED" in text
    # the live message carries the key, the recording does not: blanked the same way, they still match
    answer = _talk(replaying, up, f"my key is {key}")
    assert answer == ["session.created", "conversation.item.added", "conversation.item.done"]
    assert rec.metric("brownout_replay_requests_total", {"outcome": "miss"}) == 0


def test_a_recorded_realtime_session_exports_to_har_with_every_message(
    brownout_proxy: Callable[..., ProxyHandle], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from brownout.proxy.cli import main

    cassettes = tmp_path / "cassettes"
    with mock_upstream(tls=True) as up:
        recording = brownout_proxy(f"seed: 1\nrecord: {{dir: {cassettes}}}\n", upstream=up)
        proxy_environment(monkeypatch, recording)
        with openai_realtime(up) as conn:
            ask_weather(conn)
        wait_for(lambda: recording.addon.in_flight == 0 and not recording.addon.realtime.sessions)
        recording.addon.tape.close()
    out = tmp_path / "out.har"
    done = CliRunner().invoke(main, ["cassette", "har", str(cassettes), "-o", str(out)])
    assert done.exit_code == 0, done.output
    (entry,) = json.loads(out.read_text())["log"]["entries"]
    ((session,),) = [c.exchanges for c in read_dir(cassettes)]
    assert entry["response"]["status"] == 101 and entry["_resourceType"] == "websocket"
    messages = entry["_webSocketMessages"]
    # Every message as recorded, in order, each way, timed from the upgrade; text frames stay readable.
    assert [(m["type"], m["data"]) for m in messages] == [
        ("send" if m.from_client else "receive", m.data.decode()) for m in session.messages or []
    ]
    assert {json.loads(m["data"])["type"] for m in messages} >= {"session.update", "response.done"}
    times = [m["time"] for m in messages]
    assert times == sorted(times) and times[0] >= session.recorded_at and {m["opcode"] for m in messages} == {1}
