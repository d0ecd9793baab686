"""brownout's own cost per exchange, in process: the addon's hooks and the pipeline, no proxy I/O.

    .venv/bin/python bench/hooks.py                      # no rules vs bench/all-on.yaml, CPU us per exchange
    .venv/bin/python bench/hooks.py --gc                 # and the collector's pauses, without and with gc.freeze()
    .venv/bin/python bench/hooks.py --case openai-tools  # an LLM-shaped case (bench/llm.py) instead of GET /ping

A GET /ping flow (mitmproxy's test flow, a 1 KB JSON answer) goes through requestheaders, request,
responseheaders and response, then the pipeline (span, invariants, metrics, logs) on the loop, as
in the proxy. With `--case`, the flow is that case's request, answered with what the mock upstream
answers it (a stream goes through the stream tap event by event, as its chunks would). CPU time
counts every thread of the process (the OTLP and JSONL writers too).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import http.client
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mitmproxy.test import taddons, tflow, tutils

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.llm import CASES, LlmCase
from bench.procs import start_upstream
from brownout.proxy.addon import Brownout
from brownout.proxy.config import BrownoutConfig
from brownout.proxy.configload import load_config

ALL_ON = str(Path(__file__).resolve().parent / "all-on.yaml")
BODY = json.dumps({"ok": True, "pad": "x" * 1000}).encode()


@dataclass(frozen=True)
class Shape:
    """One exchange to repeat: the request, and the answer as upstream sends it (a stream in its chunks)."""

    method: str = "GET"
    path: str = "/ping"
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    content_type: str = "application/json"
    chunks: tuple[bytes, ...] = (BODY,)
    stream: bool = False


def case_shape(case: LlmCase) -> Shape:
    """The case's request and the mock upstream's answer to it, asked once (its events are its chunks)."""
    with tempfile.TemporaryDirectory(prefix="brownout-hooks-") as tmp:
        upstream = start_upstream(Path(tmp))
        try:
            conn = http.client.HTTPConnection("127.0.0.1", upstream.port, timeout=10)
            req = case.request
            conn.request("POST", case.path, body=req.body, headers=dict(req.headers))
            resp = conn.getresponse()
            content_type, answer = resp.getheader("content-type", ""), resp.read()
            conn.close()
        finally:
            upstream.stop()
    stream = content_type.startswith("text/event-stream")
    chunks = tuple(e + b"\n\n" for e in answer.split(b"\n\n") if e) if stream else (answer,)
    return Shape("POST", case.path, req.headers, req.body, content_type, chunks, stream)


def _flow(shape: Shape) -> Any:
    flow = tflow.tflow()
    flow.request.path, flow.request.method, flow.request.content = shape.path, shape.method, shape.body
    for name, value in shape.headers:
        flow.request.headers[name] = value
    flow.request.timestamp_start = flow.request.timestamp_end = time.time()
    flow.response = None
    return flow


async def _one(addon: Brownout, shape: Shape) -> None:
    flow = _flow(shape)
    addon.requestheaders(flow)
    await addon.request(flow)
    flow.response = tutils.tresp(content=b"" if shape.stream else shape.chunks[0])
    flow.response.headers["content-type"] = shape.content_type
    if shape.stream:
        del flow.response.headers["content-length"]
    flow.response.timestamp_start = time.time()
    await addon.responseheaders(flow)
    if callable(flow.response.stream):
        for chunk in (*shape.chunks, b""):
            flow.response.stream(chunk)
    flow.response.timestamp_end = time.time()
    await addon.response(flow)
    await asyncio.sleep(0)  # the pipeline completes it when the loop is idle (or within idlework.MAX_S)


class Pauses:
    """Collector pauses per generation, from gc.callbacks."""

    def __init__(self) -> None:
        self.by_gen: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.by_gen[info["generation"]].append((time.perf_counter() - self._start) * 1000)

    def summary(self) -> str:
        return "  ".join(
            f"gen{g}: {len(v)} x, max {max(v):.1f} ms" if v else f"gen{g}: 0" for g, v in self.by_gen.items()
        )


async def measure(config: str | None, n: int, freeze: bool | None, shape: Shape = Shape()) -> str:
    addon = Brownout(config=load_config(config) if config else BrownoutConfig())
    with taddons.context(addon):
        await addon.running()
        for _ in range(300):
            await _one(addon, shape)
        if freeze:
            gc.collect()
            gc.freeze()
        pauses = Pauses()
        gc.callbacks.append(pauses)
        start = time.process_time()
        for _ in range(n):
            await _one(addon, shape)
        addon.pipeline.complete_deferred_now()  # what still waits for an idle moment counts too
        cpu_us = (time.process_time() - start) / n * 1e6
        gc.callbacks.remove(pauses)
        gc.unfreeze()
        await addon.done()
    line = f"{cpu_us:6.0f} us CPU per exchange"
    return line if freeze is None else f"{line}   {pauses.summary()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=3000, help="exchanges per measurement")
    parser.add_argument("--gc", action="store_true", help="report collector pauses, without and with gc.freeze()")
    parser.add_argument("--case", choices=[c.name for c in CASES], help="an LLM-shaped case instead of GET /ping")
    args = parser.parse_args(argv)
    shape = case_shape(next(c for c in CASES if c.name == args.case)) if args.case else Shape()
    runs: list[tuple[str, str | None, bool | None]] = [("no rules", None, None), ("all-on", ALL_ON, None)]
    if args.gc:
        runs = [("all-on, heap as started", ALL_ON, False), ("all-on, gc.freeze() after start", ALL_ON, True)]

    async def all_runs() -> None:  # one loop: mitmproxy's test context keeps a log handler bound to it
        for label, config, freeze in runs:
            print(f"{label:32} {await measure(config, args.n, freeze, shape)}", flush=True)

    asyncio.run(all_runs())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
