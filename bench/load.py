"""Keep-alive HTTP load: `wrk` when installed, else an asyncio raw-socket generator."""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["LoadResult", "have_wrk", "run_load"]

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


def _run_wrk(url: str, connections: int, duration_s: float) -> LoadResult:
    threads = min(connections, 2)  # the reference numbers came from a 2-core machine
    cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration_s:g}s", "--latency", url]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration_s + 30, check=True)
    return parse_wrk(out.stdout, connections, duration_s)


async def _worker(host: str, port: int, request: bytes, stop_at: float, lats: list[float]) -> int:
    """One keep-alive connection sending requests back to back; returns its error count."""
    errors = 0
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            if length:
                await reader.readexactly(length)
            lats.append(time.perf_counter() - t0)
            if not head.startswith(b"HTTP/1.1 2"):
                errors += 1
    except (OSError, asyncio.IncompleteReadError) as e:
        log.debug("load connection failed: %s", e)
        errors += 1
    finally:
        writer.close()
    return errors


async def _python_load(host: str, port: int, path: str, connections: int, duration_s: float) -> LoadResult:
    request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
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


def run_load(port: int, path: str, connections: int, duration_s: float, *, use_wrk: bool | None = None) -> LoadResult:
    """Load `http://127.0.0.1:port{path}` with `connections` keep-alive connections."""
    if use_wrk is None:
        use_wrk = have_wrk()
    if use_wrk:
        return _run_wrk(f"http://127.0.0.1:{port}{path}", connections, duration_s)
    return asyncio.run(_python_load("127.0.0.1", port, path, connections, duration_s))
