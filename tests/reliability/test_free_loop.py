"""The event loop never waits on slow work: a large body's edit, a config load or reload, a stalled disk.

Each case runs through the real proxy while another client (tests/reliability/probes.py) sends
small requests on its own connection and keeps the slowest answer. The slow parts are made slow
by sleeping (a test plugin, a named pipe nobody reads), not by burning CPU, so the other client's
wait measures whether the loop was held, not how busy this machine is.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from brownout.proxy.embed import running_proxy_async
from brownout.proxy.record.cassette import Recorded, file_name
from brownout.proxy.record.writer import CassetteWriter
from tests.reliability import slow_plugin
from tests.reliability.badinput import JSON_CT, Collector, internal_errors, wait_until
from tests.reliability.probes import OtherClient
from tests.reliability.rawupstream import RawRequest, RawUpstream, fixed, http_response, routes

PONG = http_response(200, JSON_CT, b'{"pong": true}')
PLUGIN = "tests.reliability.slow_plugin"
# What one slow step may cost the other client at most: half of what each step sleeps (2 s), so a
# loaded machine has room and a loop held for the step does not.
HELD_S = 1.0


async def _pong(req: RawRequest, reader: Any, writer: Any) -> bool:
    writer.write(PONG)
    await writer.drain()
    return True


def upstream(body: bytes = b"{}") -> RawUpstream:
    return RawUpstream(routes({"/ping": _pong, "/v1/chat/completions": fixed(http_response(200, JSON_CT, body))}))


def big_answer() -> bytes:
    """A chat completion of about 2 MB: above the size whose edits and parsing leave the loop."""
    content = "word " * 400_000
    doc = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
    }
    return json.dumps(doc).encode()


@pytest.mark.timeout(60)
def test_a_slow_edit_of_a_large_body_holds_up_no_other_exchange(brownout_proxy):
    seen = Collector()
    config = f"""version: 1
seed: 1
plugins: ['{PLUGIN}:slow_edit_plugin']
rules:
  - {{name: slow, match: {{path: /v1/chat/completions}}, fault: {{type: slow_edit, seconds: 2.0}}}}
"""
    proxy = brownout_proxy(config, on_exchange=seen)
    body = big_answer()
    slow_plugin.EDIT_THREADS.clear()
    up = upstream(body)
    with (
        up.running(),
        OtherClient(proxy, up.url + "/ping") as other,
        httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=30) as client,
    ):
        t0 = time.monotonic()
        r = client.post(up.url + "/v1/chat/completions", json={"model": "gpt-4o-mini", "messages": []})
        took = time.monotonic() - t0
    assert r.status_code == 200 and r.content == body and took >= 2.0
    assert other.answered > 5 and not other.failures, other.failures
    assert other.worst_s < HELD_S, f"another client waited {other.worst_s:.2f} s while a body was edited"
    assert slow_plugin.EDIT_THREADS and threading.main_thread().name not in slow_plugin.EDIT_THREADS
    ex = next(e for e in seen.wait(1) if e.path == "/v1/chat/completions")
    assert [f.fault for f in ex.faults] == ["slow_edit"] and ex.response_model == "gpt-4o-mini"
    assert internal_errors(proxy) == {}


@pytest.mark.timeout(60)
def test_a_slow_edit_of_a_large_gzip_request_holds_up_no_other_exchange(brownout_proxy):
    import gzip

    config = f"""version: 1
seed: 1
plugins: ['{PLUGIN}:slow_edit_plugin']
rules:
  - {{name: slow, match: {{path: /v1/chat/completions}}, fault: {{type: slow_edit, seconds: 2.0, phase: request}}}}
"""
    proxy = brownout_proxy(config)
    plain = big_answer()  # about 2 MB of JSON, sent as the request this time
    slow_plugin.EDIT_THREADS.clear()
    up = upstream()
    with (
        up.running(),
        OtherClient(proxy, up.url + "/ping") as other,
        httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=30) as client,
    ):
        headers = {"content-type": "application/json", "content-encoding": "gzip"}
        r = client.post(up.url + "/v1/chat/completions", content=gzip.compress(plain), headers=headers)
    assert r.status_code == 200
    assert other.answered > 5 and not other.failures, other.failures
    assert other.worst_s < HELD_S, f"another client waited {other.worst_s:.2f} s while a request was edited"
    assert slow_plugin.EDIT_THREADS and threading.main_thread().name not in slow_plugin.EDIT_THREADS
    [sent] = [q for q in up.requests if q.path == "/v1/chat/completions"]
    assert {k.lower(): v for k, v in sent.headers}["content-encoding"] == "gzip"
    assert gzip.decompress(sent.body) == plain + b" "  # edited, re-encoded, framed right
    assert internal_errors(proxy) == {}


@pytest.mark.timeout(60)
def test_a_slow_hot_reload_holds_up_no_exchange(brownout_proxy, tmp_path: Path):
    path = tmp_path / "chaos.yaml"
    head = f"version: 1\nseed: 1\nplugins: ['{PLUGIN}:slow_load_plugin']\nrules:\n"
    teapot = "  - {name: teapot, match: {path: /v1/chat/completions}, fault: {type: http_error, status: 418}}\n"
    path.write_text(head + "  []\n")
    proxy = brownout_proxy(path)
    up = upstream()
    with (
        up.running(),
        httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=30) as client,
        OtherClient(proxy, up.url + "/ping") as other,
    ):
        assert client.post(up.url + "/v1/chat/completions", json={}).status_code == 200
        path.write_text(head + teapot)  # picked up within brownout_reload_s (1 s); the load takes 2 x LOAD_S
        assert wait_until(
            lambda: client.post(up.url + "/v1/chat/completions", json={}).status_code == 418, timeout_s=10
        )
        time.sleep(0.2)
    assert other.answered > 5 and not other.failures, other.failures
    assert other.worst_s < HELD_S, f"another client waited {other.worst_s:.2f} s during a reload"


@pytest.mark.timeout(90)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_switching_record_and_replay_on_a_reload_holds_up_no_exchange(brownout_proxy, tmp_path: Path):
    # What such a reload does that takes time: index the cassettes it will replay (here with a wire format
    # whose replay key takes KEY_S per recording), and retire the record writer it replaces (closing
    # waits for the writer's thread; here one stuck opening a cassette on a disk that does not answer, a
    # named pipe nobody reads, so it waits its full 5 s).
    played = tmp_path / "played"
    writer = CassetteWriter(played)
    for n in range(4):
        writer.put(
            Recorded(
                session="s",
                seq=n + 1,
                method="POST",
                url="http://tools.test/tools/slow",
                request_headers=[(slow_plugin.SLOW_KEY_HEADER, "1"), ("content-type", "application/json")],
                request_body=json.dumps({"n": n}).encode(),
                status=200,
                response_headers=[("content-type", "application/json")],
                body=b'{"ok": true}',
            )
        )
    writer.close()
    stuck = tmp_path / "stuck"
    stuck.mkdir()
    fifo = stuck / file_name("stuck")
    os.mkfifo(fifo)
    path = tmp_path / "chaos.yaml"
    head = f"version: 1\nseed: 1\nplugins: ['{PLUGIN}:slow_key_plugin']\ncontrol: {{token: t0ken}}\n"
    path.write_text(head + f"record: {{dir: '{stuck}'}}\n")
    proxy = brownout_proxy(path, extra_options={"brownout_reload_s": 0})
    loop_thread = proxy.call(lambda: threading.current_thread().name)
    up = upstream()
    with up.running(), httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=30) as client:
        r = client.post(up.url + "/v1/chat/completions", json={}, headers={"x-brownout-session": "stuck"})
        assert r.status_code == 200  # recorded by a writer thread now stuck opening the pipe
        path.write_text(
            head + f"record: {{dir: '{tmp_path / 'recorded'}'}}\nreplay: {{dir: '{played}', miss: passthrough}}\n"
        )
        slow_plugin.KEY_THREADS.clear()
        with OtherClient(proxy, up.url + "/ping") as other:
            t0 = time.monotonic()
            r = httpx.post(
                f"http://127.0.0.1:{proxy.addon.control.port}/reload",
                headers={"Authorization": "Bearer t0ken"},
                timeout=30,
            )
            took = time.monotonic() - t0
            time.sleep(0.2)
    reader = threading.Thread(target=fifo.read_bytes, daemon=True)  # lets the stuck writer thread end
    reader.start()
    assert r.status_code == 200, r.text
    assert took >= 4 * slow_plugin.KEY_S + 4.0  # the index was built and the old writer waited for
    assert other.answered > 5 and not other.failures, other.failures
    # The slow steps here are longer (the index: 4 keys of KEY_S, 2 s; the writer: 5 s), and a full suite on
    # 2 cores once made the other client wait 1.05 s with neither on the loop: bounded below the shorter step.
    held_s = 4 * slow_plugin.KEY_S - 0.2
    assert other.worst_s < held_s, f"another client waited {other.worst_s:.2f} s while record and replay switched"
    assert len(slow_plugin.KEY_THREADS) == 4 and loop_thread not in slow_plugin.KEY_THREADS
    assert proxy.addon.tape.index is not None and proxy.addon.tape.index.exchanges == 4


@pytest.mark.timeout(60)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_stalled_log_file_holds_up_no_exchange_and_loses_no_line(brownout_proxy, tmp_path: Path):
    # Opening a named pipe for writing blocks until a reader comes: a disk that does not answer.
    fifo = tmp_path / "exchanges.jsonl"
    os.mkfifo(fifo)
    seen = Collector()
    proxy = brownout_proxy(f"version: 1\nexporters:\n  jsonl: {{exchanges_path: '{fifo}'}}\n", on_exchange=seen)
    up = upstream()
    with up.running(), httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=5) as client:
        for _ in range(5):
            t0 = time.monotonic()
            assert client.post(up.url + "/v1/chat/completions", json={}).status_code == 200
            assert time.monotonic() - t0 < HELD_S
    ids = [e.id for e in seen.wait(5)]
    got: list[str] = []

    def read() -> None:
        with open(fifo, encoding="utf-8") as f:
            got.extend(f)  # line by line as they come, until brownout closes the log

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert proxy.addon.pipeline.exporters.flush_logs()  # the writer thread gets through once someone reads
    assert wait_until(lambda: len(got) == len(ids), timeout_s=5), got
    assert sorted(json.loads(line)["id"] for line in got) == sorted(ids)


@pytest.mark.timeout(60)
def test_starting_on_a_running_loop_loads_the_config_off_it(tmp_path: Path, confdir: Path):
    path = tmp_path / "chaos.yaml"
    path.write_text(f"version: 1\nseed: 1\nplugins: ['{PLUGIN}:slow_load_plugin']\nrules: []\n")
    endpoints = {"brownout_metrics_listen": "127.0.0.1:0", "brownout_control_listen": "127.0.0.1:0"}

    async def start() -> tuple[float, float]:
        """(the longest the loop was away from a 10 ms ticker, how long start-up took)"""
        gaps: list[float] = []
        done = asyncio.Event()

        async def tick() -> None:
            last = time.monotonic()
            while not done.is_set():
                await asyncio.sleep(0.01)
                gaps.append(time.monotonic() - last)
                last = time.monotonic()

        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0.05)  # ticking
        t0 = time.monotonic()
        async with running_proxy_async(path, confdir=confdir, extra_options=endpoints):
            took = time.monotonic() - t0
        done.set()
        await ticker
        return max(gaps), took

    worst, took = asyncio.run(start())
    assert took >= 2 * slow_plugin.LOAD_S  # the plugin was read while starting
    assert worst < HELD_S, f"the loop was held {worst:.2f} s while the config loaded"
