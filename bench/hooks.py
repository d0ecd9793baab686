"""brownout's own cost per exchange, in process: the addon's hooks and the pipeline, no proxy I/O.

    .venv/bin/python bench/hooks.py                      # no rules vs bench/all-on.yaml, CPU us per exchange
    .venv/bin/python bench/hooks.py --gc                 # and the collector's pauses, without and with gc.freeze()

A GET /ping flow (mitmproxy's test flow, a 1 KB JSON answer) goes through requestheaders, request,
responseheaders and response, then the pipeline (span, invariants, metrics, logs) on the loop, as
in the proxy. CPU time counts every thread of the process (the OTLP and JSONL writers too).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

from mitmproxy.test import taddons, tflow, tutils

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from brownout.proxy.addon import Brownout
from brownout.proxy.config import BrownoutConfig
from brownout.proxy.configload import load_config

ALL_ON = str(Path(__file__).resolve().parent / "all-on.yaml")
BODY = json.dumps({"ok": True, "pad": "x" * 1000}).encode()


def _flow() -> Any:
    flow = tflow.tflow()
    flow.request.path, flow.request.method, flow.request.content = "/ping", "GET", b""
    flow.request.timestamp_start = flow.request.timestamp_end = time.time()
    flow.response = None
    return flow


async def _one(addon: Brownout) -> None:
    flow = _flow()
    addon.requestheaders(flow)
    await addon.request(flow)
    flow.response = tutils.tresp(content=BODY)
    flow.response.headers["content-type"] = "application/json"
    flow.response.timestamp_start = flow.response.timestamp_end = time.time()
    await addon.responseheaders(flow)
    await addon.response(flow)
    await asyncio.sleep(0)  # the pipeline runs right after the response hook, on the loop


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


async def measure(config: str | None, n: int, freeze: bool | None) -> str:
    addon = Brownout(config=load_config(config) if config else BrownoutConfig())
    with taddons.context(addon):
        await addon.running()
        for _ in range(300):
            await _one(addon)
        if freeze:
            gc.collect()
            gc.freeze()
        pauses = Pauses()
        gc.callbacks.append(pauses)
        start = time.process_time()
        for _ in range(n):
            await _one(addon)
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
    args = parser.parse_args(argv)
    runs: list[tuple[str, str | None, bool | None]] = [("no rules", None, None), ("all-on", ALL_ON, None)]
    if args.gc:
        runs = [("all-on, heap as started", ALL_ON, False), ("all-on, gc.freeze() after start", ALL_ON, True)]

    async def all_runs() -> None:  # one loop: mitmproxy's test context keeps a log handler bound to it
        for label, config, freeze in runs:
            print(f"{label:32} {await measure(config, args.n, freeze)}", flush=True)

    asyncio.run(all_runs())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
