"""Keep-alive HTTP load: `wrk` when installed, else an asyncio raw-socket generator.

Both send the same request over and over: `GET path` by default, or a `Request` with a method,
headers and a body (wrk through a generated Lua script). Responses may carry a content-length or
come chunked (a stream): both are read to their end before the next request.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["LoadResult", "Request", "have_wrk", "run_load", "wrk_command", "wrk_script"]

log = logging.getLogger(__name__)

_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


@dataclass
class LoadResult:
    """Throughput and latency of one load run."""

    tool: str  # wrk or python
    connections: int
    duration_s: float
    requests: int
    errors: int
    rps: float
    p50_ms: float
    p99_ms: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


ROUNDS_LATENCY = "latency percentiles: the median over the rounds"  # in a run's meta: how it summarised


def median_round(runs: list[LoadResult]) -> dict[str, Any]:
    """The round with the median throughput, whose p50 and p99 are replaced by each one's median over the
    rounds (every round's value kept beside it). One disturbed round (VM steal, a host stall) then decides
    neither a throughput ratio nor a tail: the median-throughput round's own p99 can be that of a round in
    which a stall held many requests without moving its req/s much."""
    best = sorted(runs, key=lambda r: r.rps)[len(runs) // 2].to_dict()
    best["rps_rounds"] = [round(r.rps, 1) for r in runs]
    for key in ("p50_ms", "p99_ms"):
        values = [getattr(r, key) for r in runs]
        best[key] = round(statistics.median(values), 3)
        best[f"{key}_rounds"] = [round(v, 3) for v in values]
    return best


@dataclass(frozen=True)
class Request:
    """The request a load run repeats (the path is given apart)."""

    method: str = "GET"
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()

    def head(self, host: str, port: int, path: str) -> bytes:
        lines = [f"{self.method} {path} HTTP/1.1", f"Host: {host}:{port}"]
        lines += [f"{k}: {v}" for k, v in self.headers]
        if self.body or self.method not in ("GET", "HEAD"):
            lines.append(f"Content-Length: {len(self.body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode()


def wrk_script(request: Request) -> str:
    """A wrk Lua script sending `request` (wrk itself adds Host and Content-Length)."""
    body = request.body.decode()
    level = next(n for n in range(1, 64) if f"]{'=' * n}]" not in body)  # a long bracket the body cannot close
    lines = [f'wrk.method = "{request.method}"', f"wrk.body = [{'=' * level}[{body}]{'=' * level}]"]
    lines += [f'wrk.headers["{k}"] = "{v}"' for k, v in request.headers]
    return "\n".join(lines) + "\n"


def have_wrk() -> bool:
    return shutil.which("wrk") is not None


def _ms(value: str, unit: str) -> float:
    return float(value) * _UNITS[unit]


def parse_wrk(output: str, connections: int, duration_s: float) -> LoadResult:
    """Parse `wrk --latency` output (Requests/sec, the 50% and 99% latency lines, errors)."""
    rps = re.search(r"Requests/sec:\s+([\d.]+)", output)
    total = re.search(r"(\d+) requests in", output)
    lat = {
        m.group(1): _ms(m.group(2), m.group(3))
        for m in re.finditer(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", output, re.M)
    }
    errors = 0
    for m in re.finditer(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output):
        errors += sum(int(g) for g in m.groups())
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    errors += int(non2xx.group(1)) if non2xx else 0
    if not rps or "50" not in lat or "99" not in lat:
        raise ValueError(f"cannot parse wrk output:\n{output}")
    return LoadResult(
        "wrk",
        connections,
        duration_s,
        int(total.group(1)) if total else 0,
        errors,
        float(rps.group(1)),
        lat["50"],
        lat["99"],
    )


def wrk_command(url: str, connections: int, duration_s: float, script: str | None = None) -> list[str]:
    threads = min(connections, 2)  # the reference numbers came from a 2-core machine
    seconds = max(1, math.ceil(duration_s))  # wrk takes whole seconds only
    cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency"]
    return [*cmd, "-s", script, url] if script else [*cmd, url]


def _run_wrk(url: str, connections: int, duration_s: float, request: Request | None = None) -> LoadResult:
    script = None
    if request is not None and request != Request():
        fd, script = tempfile.mkstemp(prefix="brownout-bench-", suffix=".lua")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(wrk_script(request))
    cmd = wrk_command(url, connections, duration_s, script)
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration_s + 31, check=True)
    finally:
        if script is not None:
            os.unlink(script)
    return parse_wrk(out.stdout, connections, duration_s)


async def _read_response(reader: asyncio.StreamReader) -> bytes:
    """One response's head, its body read to the end (content-length or chunked); returns the head."""
    head = await reader.readuntil(b"\r\n\r\n")
    length, chunked = 0, False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if chunked:
        while size := int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16):
            await reader.readexactly(size + 2)  # the chunk and its CRLF
        while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, then the blank line
            pass
    elif length:
        await reader.readexactly(length)
    return head


async def _worker(host: str, port: int, request: bytes, stop_at: float, lats: list[float]) -> int:
    """One keep-alive connection sending requests back to back; returns its error count."""
    errors = 0
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            writer.write(request)
            head = await _read_response(reader)
            lats.append(time.perf_counter() - t0)
            if not head.startswith(b"HTTP/1.1 2"):
                errors += 1
    except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
        log.debug("load connection failed: %s", e)
        errors += 1
    finally:
        writer.close()
    return errors


async def _python_load(
    host: str, port: int, path: str, connections: int, duration_s: float, req: Request | None = None
) -> LoadResult:
    request = (req or Request()).head(host, port, path) + (req.body if req else b"")
    lats: list[float] = []
    t0 = time.perf_counter()
    errors = await asyncio.gather(*(_worker(host, port, request, t0 + duration_s, lats) for _ in range(connections)))
    elapsed = time.perf_counter() - t0
    if not lats:
        return LoadResult("python", connections, elapsed, 0, sum(errors), 0.0, float("nan"), float("nan"))
    q = statistics.quantiles(lats, n=100, method="inclusive")
    return LoadResult(
        "python", connections, elapsed, len(lats), sum(errors), len(lats) / elapsed, q[49] * 1000, q[98] * 1000
    )


def run_load(
    port: int,
    path: str,
    connections: int,
    duration_s: float,
    *,
    use_wrk: bool | None = None,
    request: Request | None = None,
) -> LoadResult:
    """Load `http://127.0.0.1:port{path}` with `connections` keep-alive connections (GET, or `request`)."""
    if use_wrk is None:
        use_wrk = have_wrk()
    if use_wrk:
        return _run_wrk(f"http://127.0.0.1:{port}{path}", connections, duration_s, request)
    return asyncio.run(_python_load("127.0.0.1", port, path, connections, duration_s, request))
