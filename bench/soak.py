"""Soak run: mixed LLM traffic through a brownout subprocess for a long time, watching for leaks.

    .venv/bin/python bench/soak.py --duration 600 --rate 300

Traffic: OpenAI chat and Anthropic messages, JSON and SSE, a quarter each, against the mock
upstream in its own process; about 20% of requests get a fault (429, 529, a cut stream, latency),
with invariants and the JSONL logs on. Every few seconds the brownout process's RSS, open fds,
asyncio tasks and in-flight exchanges are sampled. The run fails (exit 1) on any client error
no configured fault explains, RSS growth of 30 MB or more after warm-up, or fd or task growth.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import secrets
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.procs import Proc, free_port, start_brownout, start_upstream
from bench.rawhttp import RawConnection
from bench.soakmon import Limits, Sample, Tally, Verdict, judge, sample_process, samples_table, settle_fds, to_json

__all__ = ["SOAK_CONFIG", "run_soak"]

log = logging.getLogger(__name__)

# One rule per traffic kind at probability 0.2: about 20% of all requests are faulted.
SOAK_CONFIG = """\
version: 1
seed: 11
proxy: {announce_faults: true}
rules:
  - {name: oa-429, match: {provider: openai, stream: false},
     fault: {type: http_error, status: 429, retry_after_s: 0}, schedule: {probability: 0.2}}
  - {name: oa-cut, match: {provider: openai, stream: true},
     fault: {type: truncate, after_events: 2}, schedule: {probability: 0.2}}
  - {name: an-529, match: {provider: anthropic, stream: false},
     fault: {type: http_error, status: 529}, schedule: {probability: 0.2}}
  - {name: an-slow, match: {provider: anthropic, stream: true},
     fault: {type: latency, delay_ms: 20}, schedule: {probability: 0.2}}
invariants:
  - {type: latency_budget, total_ms: 2000, severity: warning}
  - {type: no_pii, direction: both}
  - {type: stream_complete}
  - {type: tool_arguments_json}
exporters:
  jsonl: {path: VIOLATIONS, decisions_path: DECISIONS}
"""

SETTLE_S = 2.0  # at least this long after the traffic before the idle count: the client's connections close

_MSG = [{"role": "user", "content": "Summarise the weather in Paris."}]
# (path, body, streamed, provider): cycled in order, so the mix is exact
KINDS: list[tuple[str, dict[str, Any], bool, str]] = [
    ("/v1/chat/completions", {"model": "gpt-4o-mini", "messages": _MSG}, False, "openai"),
    ("/v1/chat/completions", {"model": "gpt-4o-mini", "messages": _MSG, "stream": True}, True, "openai"),
    ("/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": _MSG}, False, "anthropic"),
    (
        "/v1/messages",
        {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": _MSG, "stream": True},
        True,
        "anthropic",
    ),
]


def _complete(body: bytes, streamed: bool, provider: str) -> bool:
    """Is an unfaulted answer whole? (a proxy bug would show up as a cut or garbled body)."""
    if streamed:
        return (b"data: [DONE]" in body) if provider == "openai" else (b"message_stop" in body)
    try:
        data = json.loads(body)
    except ValueError:
        return False
    return "choices" in data if provider == "openai" else data.get("type") == "message"


async def _one(conn: RawConnection, n: int, tally: Tally) -> None:
    path, body, streamed, provider = KINDS[n % len(KINDS)]
    try:
        resp = await conn.post_json(path, body)
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError) as e:
        if conn.last_headers.get("x-brownout-fault"):  # e.g. a stream the fault cut: ordered, so expected
            tally.faulted += 1
        else:
            tally.fail(f"{provider} {path} stream={streamed}: {type(e).__name__}: {e}")
        return
    if resp.headers.get("x-brownout-fault"):
        tally.faulted += 1
    elif resp.status != 200 or not _complete(resp.body, streamed, provider):
        tally.fail(f"{provider} {path} stream={streamed}: status {resp.status}, {len(resp.body)} bytes, unfaulted")
    else:
        tally.ok += 1


async def drive(base_url: str, rate: float, duration_s: float, tally: Tally, *, concurrency: int = 32) -> float:
    """Open-loop traffic at `rate` req/s over at most `concurrency` keep-alive connections; the elapsed time."""
    host, _, port = base_url.removeprefix("http://").rpartition(":")
    idle = [RawConnection(host, int(port)) for _ in range(concurrency)]
    sem = asyncio.Semaphore(concurrency)
    tasks: set[asyncio.Task[None]] = set()

    async def guarded(n: int) -> None:
        conn = idle.pop()
        try:
            await _one(conn, n, tally)
        finally:
            idle.append(conn)
            sem.release()

    loop = asyncio.get_running_loop()
    t0 = loop.time()
    n = 0
    while (now := loop.time()) - t0 < duration_s:
        due = t0 + n / rate
        if due > now:
            await asyncio.sleep(due - now)
        await sem.acquire()  # behind schedule at capacity: the achieved rate shows it
        tally.sent += 1
        task = asyncio.create_task(guarded(n))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        n += 1
    if tasks:
        await asyncio.wait(tasks, timeout=60)
    for conn in idle:
        conn.close()
    return loop.time() - t0


async def _monitor(
    sample: Callable[[float], Sample], interval_s: float, out: list[Sample], stop: asyncio.Event, echo: bool
) -> None:
    t0 = time.monotonic()
    while not stop.is_set():
        s = await asyncio.to_thread(sample, time.monotonic() - t0)
        out.append(s)
        if echo:
            print(
                f"  t={s.t_s:6.1f}s rss={s.rss_mb:6.1f}MB fds={s.fds} tasks={s.tasks} in_flight={s.in_flight} "
                f"sent={s.sent} unexpected={s.unexpected}",
                flush=True,
            )
        with contextlib.suppress(TimeoutError):  # the sampling interval elapsed: sample again
            await asyncio.wait_for(stop.wait(), interval_s)


def run_soak(
    duration_s: float,
    rate: float,
    *,
    interval_s: float = 5.0,
    limits: Limits | None = None,
    workdir: Path | None = None,
    concurrency: int = 32,
    echo: bool = False,
    plugins: Sequence[str] = (),
) -> tuple[Verdict, list[Sample]]:
    """Start the mock upstream and brownout, drive traffic, sample, stop both; the verdict and samples.

    `plugins`: brownout plugins (`module:object`) to load as well, importable from the repository root."""
    limits = limits or Limits()
    work = workdir or Path(tempfile.mkdtemp(prefix="brownout-soak-"))
    config = work / "soak.yaml"
    text = SOAK_CONFIG.replace("VIOLATIONS", str(work / "violations.jsonl"))
    text = text.replace("DECISIONS", str(work / "decisions.jsonl"))
    if plugins:
        text += f"plugins: {json.dumps(list(plugins))}\n"
    config.write_text(text, encoding="utf-8")
    token = secrets.token_urlsafe(16)
    control = free_port()
    upstream = start_upstream(work)
    brownout: Proc | str = "not started"
    try:
        brownout = start_brownout(
            upstream.port,
            work,
            str(config),
            extra_args=[
                "--set",
                f"brownout_control_listen=127.0.0.1:{control}",
                "--set",
                f"brownout_metrics_listen=127.0.0.1:{free_port()}",
            ],
            env={"BROWNOUT_TOKEN": token},
        )
        if isinstance(brownout, str):
            raise RuntimeError(brownout)
        proc = brownout
        tally = Tally()
        samples: list[Sample] = []

        def sample(t_s: float, idle: bool = False) -> Sample:
            return sample_process(proc.popen.pid, f"http://127.0.0.1:{control}", token, t_s, tally, idle=idle)

        def settled() -> None:
            settle_fds(proc.popen.pid, quiet_s=limits.settle_quiet_s, timeout_s=limits.settle_timeout_s)

        async def main() -> float:
            await asyncio.to_thread(settled)  # start-up's own connections (the readiness probe) closed
            samples.append(await asyncio.to_thread(sample, 0.0, True))
            stop = asyncio.Event()
            mon = asyncio.create_task(_monitor(sample, interval_s, samples, stop, echo))
            try:
                return await drive(proc.url, rate, duration_s, tally, concurrency=concurrency)
            finally:
                stop.set()
                await mon
                # idle again: the client closed its connections, so every fd and task they held must go
                await asyncio.sleep(SETTLE_S)
                await asyncio.to_thread(settled)
                samples.append(await asyncio.to_thread(sample, samples[-1].t_s + SETTLE_S, True))

        elapsed = asyncio.run(main())
        if proc.popen.poll() is not None:
            raise RuntimeError(f"brownout exited during the soak:\n{proc.log_tail()}")
        return judge(samples, tally, limits, elapsed, concurrency=concurrency), samples
    finally:
        if isinstance(brownout, Proc):
            brownout.stop()
        upstream.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of traffic (default 600)")
    parser.add_argument("--rate", type=float, default=300.0, help="requests per second offered (default 300)")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between samples (default 5)")
    parser.add_argument("--warmup", type=float, default=60.0, help="seconds before growth is measured (default 60)")
    parser.add_argument("--concurrency", type=int, default=32, help="max requests in flight (default 32)")
    parser.add_argument("--json", type=Path, default=None, help="also write figures and samples here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    print(f"soak: {args.duration:g} s at {args.rate:g} req/s offered, sampling every {args.interval:g} s", flush=True)
    verdict, samples = run_soak(
        args.duration,
        args.rate,
        interval_s=args.interval,
        limits=Limits(warmup_s=args.warmup),
        concurrency=args.concurrency,
        echo=True,
    )
    print(samples_table(samples))
    print(json.dumps(verdict.figures, indent=2))
    if args.json:
        args.json.write_text(to_json(verdict, samples), encoding="utf-8")
    if verdict.ok:
        print("PASS: no unexpected errors, no RSS/fd/task growth beyond the limits")
        return 0
    print("FAIL:\n  " + "\n  ".join(verdict.failures))
    return 1


if __name__ == "__main__":
    sys.exit(main())
