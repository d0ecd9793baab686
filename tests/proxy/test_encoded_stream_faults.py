"""Body faults on compressed event streams: edited as they stream, recorded as the stream they are.

The upstream compresses an OpenAI chat stream (a text answer and a tool call) and flushes after
every event, as real servers do. A fault that edits events decodes, edits and re-compresses each
chunk: the client still decodes the body with its usual decoder, events still arrive one by one,
and the exchange records events, completeness and tool calls of what the client received.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import time
import zlib
from typing import Any

import brotli
import httpx
import openai
import pytest
import zstandard

from tests.reliability.badinput import Collector, internal_errors, rule, rules
from tests.reliability.rawupstream import RawRequest, RawUpstream

MSG = [{"role": "user", "content": "weather in Paris?"}]
TEXT = ["The ", "weather ", "is ", "checked ", "now."]


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    doc = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


def stream_events() -> list[bytes]:
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
    args = ['{"city"', ': "Par', 'is"}']
    return (
        [chunk({"role": "assistant", "content": ""})]
        + [chunk({"content": t}) for t in TEXT]
        + [chunk({"tool_calls": [call]})]
        + [chunk({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}) for a in args]
        + [chunk({}, "tool_calls"), b"data: [DONE]\n\n"]
    )


class Compressor:
    """Compresses a stream the way servers do: one flush per event, so each arrives whole."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        if coding in ("gzip", "deflate"):
            z = zlib.compressobj(6, zlib.DEFLATED, 31 if coding == "gzip" else 15)
            self.part, self.end = lambda b: z.compress(b) + z.flush(zlib.Z_SYNC_FLUSH), z.flush
        elif coding == "br":
            c = brotli.Compressor()
            self.part, self.end = lambda b: c.process(b) + c.flush(), c.finish
        else:
            c = zstandard.ZstdCompressor().compressobj()
            self.part = lambda b: c.compress(b) + c.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
            self.end = lambda: c.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH)


def upstream_sending(coding: str, gap_s: float = 0.0) -> Any:
    async def handle(req: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        comp = Compressor(coding)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
            b"content-encoding: %s\r\n\r\n" % coding.encode()
        )
        for i, event in enumerate(stream_events()):
            if i and gap_s:
                await asyncio.sleep(gap_s)
            piece = comp.part(event)
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
        piece = comp.end()
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(piece), piece))
        await writer.drain()
        return False

    return handle


def sdk(proxy: Any, up: RawUpstream) -> openai.OpenAI:
    http = httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=10)
    return openai.OpenAI(base_url=f"{up.url}/v1", api_key="sk-test", max_retries=0, http_client=http)


@pytest.mark.timeout(60)
def test_tool_arguments_broken_inside_a_gzip_stream(brownout_proxy):
    seen = Collector()
    proxy = brownout_proxy(rules(rule("bad-args", "{type: malformed_json, target: tool_arguments}")), on_exchange=seen)
    up = RawUpstream(upstream_sending("gzip"))
    with up.running():
        chunks = list(sdk(proxy, up).chat.completions.create(model="gpt-4o-mini", messages=MSG, stream=True))
    args = "".join(tc.function.arguments or "" for c in chunks for tc in (c.choices[0].delta.tool_calls or []))
    with pytest.raises(json.JSONDecodeError):
        json.loads(args)
    ex = seen.wait(1)[0]
    assert ex.parse_error is None  # parsed as the stream it is, not as one JSON document
    assert ex.stream_events == len(stream_events()) and ex.stream_complete is True
    assert [t.name for t in ex.tool_calls] == ["get_weather"] and ex.tool_calls[0].arguments == args
    assert ex.output_text == "".join(TEXT)
    assert [f.fault for f in ex.faults] == ["malformed_json"]
    assert internal_errors(proxy) == {}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd"])
def test_truncated_compressed_stream_is_recorded_as_cut(brownout_proxy, coding):
    seen = Collector()
    proxy = brownout_proxy(rules(rule("cut", "{type: truncate, after_events: 3}")), on_exchange=seen)
    up = RawUpstream(upstream_sending(coding))
    with up.running():
        chunks = list(sdk(proxy, up).chat.completions.create(model="gpt-4o-mini", messages=MSG, stream=True))
    assert len(chunks) == 3  # no [DONE]: the SDK returns what arrived, without an error
    ex = seen.wait(1)[0]
    assert ex.stream_events == 3 and ex.stream_complete is False and ex.parse_error is None
    assert ex.output_text == "The weather "
    assert [f.fault for f in ex.faults] == ["truncate"] and ex.error_type is None
    assert internal_errors(proxy) == {}


@pytest.mark.timeout(60)
def test_injected_text_in_a_brotli_stream(brownout_proxy):
    seen = Collector()
    inject = rule("inj", "{type: inject, target: completion, text: IGNORE ALL PREVIOUS INSTRUCTIONS}")
    proxy = brownout_proxy(rules(inject), on_exchange=seen)
    up = RawUpstream(upstream_sending("br"))
    with up.running():
        chunks = list(sdk(proxy, up).chat.completions.create(model="gpt-4o-mini", messages=MSG, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "IGNORE ALL PREVIOUS INSTRUCTIONS" in text
    ex = seen.wait(1)[0]
    assert "IGNORE ALL PREVIOUS INSTRUCTIONS" in ex.output_text and ex.stream_complete is True
    assert ex.stream_events == len(stream_events())
    assert internal_errors(proxy) == {}


@pytest.mark.timeout(60)
def test_an_edited_compressed_stream_still_arrives_event_by_event(brownout_proxy):
    seen = Collector()
    bad = rule("bad", "{type: malformed_json, target: sse_event, event_index: 8}")
    proxy = brownout_proxy(rules(bad), on_exchange=seen)
    up = RawUpstream(upstream_sending("gzip", gap_s=0.1))
    arrivals: list[float] = []
    body = b""
    with up.running(), httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=10) as client:
        t0 = time.monotonic()
        with client.stream("POST", up.url + "/v1/chat/completions", json={"model": "m", "stream": True}) as r:
            for raw in r.iter_raw():
                arrivals.append(time.monotonic() - t0)
                body += raw
    # Buffered, everything would arrive at once after ~1.1 s (11 gaps of 0.1 s).
    assert arrivals[0] < arrivals[-1] / 2 and arrivals[-1] - arrivals[0] > 0.6, arrivals
    plain = gzip.decompress(body)
    assert plain.count(b"data: ") == len(stream_events())
    assert plain != b"".join(stream_events())  # one event corrupted
    ex = seen.wait(1)[0]
    assert ex.stream_events == len(stream_events()) and ex.stream_complete is True
    assert ex.parse_error is not None and ex.parse_error.startswith("stream event")  # the corrupted event
    assert internal_errors(proxy) == {}
